"""The Jitter view on a real store with a real LLVM session: a real report (fresh worker processes, a
planted slow buffer layout) drawn as a headline, a bar per cause and a table; the GUI thread keeps
answering meanwhile; Stop ends it at once and stores nothing."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QTimer

from tunelab.app.views.jitter_view import CAUSE_COLUMNS, NOT_RUN, JitterView
from tunelab.core.faults import PLANT_ENV
from tunelab.core.trust.jitter import CAUSES, TITLES
from tunelab.core.trust.remeasure.pool import worker_processes


def _random_session(store) -> int:
    return next(r.id for r in store.sessions() if r.tuner == "random")


@pytest.mark.serial  # its planted layout must stand out and the GUI must not stall 1 s: no second lane beside it
def test_the_view_explains_a_planted_placement_cause_and_stays_responsive(qtbot, store_copy, monkeypatch):
    monkeypatch.setenv(PLANT_ENV, "slowlayout@aligned")  # the worker processes time "aligned" at ~4x
    sid = _random_session(store_copy)
    before = len(store_copy.validations(sid))
    view = JitterView(store_copy)
    qtbot.addWidget(view)
    view.resize(1300, 850)
    view.show()
    view.set_session(sid)
    assert f"Session {sid}" in view.title.text() and view.headline.text() == NOT_RUN
    view.runs_spin.setValue(3)

    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start()
    worker = view.start()
    assert worker is not None and view.running
    assert not view.explain_button.isEnabled() and view.stop_button.isEnabled()
    qtbot.waitUntil(lambda: not view.running, timeout=180_000)
    timer.stop()

    assert view.last_error == ""
    report = view.report
    assert report is not None and "placement" in report.explaining, report.to_json()
    assert view.headline.text().lower() == report.headline.lower()
    assert "buffer placement" in view.headline.text().lower()
    # one bar per cause, as long as its share in % (the axis says so), and one table row per cause
    assert view.causes_plot.plot.getAxis("bottom").labelText == "share of the spread (%)"
    shares = view.causes_plot.shares()
    assert len(shares) == len(CAUSES)
    placement = list(CAUSES).index("placement")
    assert abs(shares[placement] - 100 * report.cause("placement").share) < 1e-6
    assert view.table.rowCount() == len(CAUSES) and view.table.columnCount() == len(CAUSE_COLUMNS)
    assert [view.table.item(i, 0).text() for i in range(len(CAUSES))] == [TITLES[c] for c in CAUSES]
    assert view.table.item(placement, 3).text() == "yes"
    assert view.table.item(placement, 4).text() == report.cause("placement").sentence
    assert "layouts staggered, aligned" in view.spread_label.text()
    # the validation behind it is stored, as validations are
    assert len(store_copy.validations(sid)) == before + 1 and "stored" in view.stage.text()
    # the GUI thread kept answering: the 20 ms timer never stalled for long
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    print(f"\nlongest GUI-thread stall: {max(gaps):.3f} s over {ticks[-1] - ticks[0]:.1f} s")
    assert len(ticks) > 20 and max(gaps) < 1.0, max(gaps)
    assert view.explain_button.isEnabled()


def test_stop_ends_the_report_at_once_and_stores_nothing(qtbot, store_copy):
    sid = _random_session(store_copy)
    before = [v["id"] for v in store_copy.validations(sid)]
    view = JitterView(store_copy)
    qtbot.addWidget(view)
    view.show()
    view.set_session(sid)
    view.runs_spin.setValue(30)  # minutes to the end
    events = []
    worker = view.start()
    worker.progress.connect(lambda item: events.append(item))
    qtbot.waitUntil(lambda: bool(events), timeout=120_000)  # the first fresh-process run is done
    assert worker_processes()
    t0 = time.monotonic()
    view.stop_button.click()
    assert not view.stop_button.isEnabled()
    qtbot.waitUntil(lambda: not view.running, timeout=10_000)
    assert time.monotonic() - t0 < 10
    assert view.last_error == "" and view.report is None
    assert "nothing was stored" in view.headline.text() and view.stage.text() == "Stopped."
    assert worker_processes() == []
    assert [v["id"] for v in store_copy.validations(sid)] == before


def test_main_window_has_a_jitter_tab_that_follows_the_session(qtbot, store, settings):
    from tunelab.app.main_window import MainWindow

    window = MainWindow(store, settings, poll_ms=50, probe_target=False)
    qtbot.addWidget(window)
    window.show()
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert "Jitter" in titles and window.tabs.widget(titles.index("Jitter")) is window.jitter
    sid = store.sessions()[0].id
    window.browser.select_session(sid)
    qtbot.waitUntil(lambda: window.session_id == sid)
    assert f"Session {sid}" in window.jitter.title.text() and window.jitter.explain_button.isEnabled()

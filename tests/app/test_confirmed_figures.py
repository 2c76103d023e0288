"""Once a session's figure has been confirmed in fresh processes, the views state the confirmed figure
and mark the session's own as superseded (issue 10): the browser, the Live and Validation headers and
the export dialog, all from tunelab.core.export.pick. A real confirmation on a real tuned store.

Each figure carries the mark of its kind (tunelab.core.export.stated): ✓ only on a confirmation that can
be held to, ⚠ on one taken while the machine was disturbed or whose runs scattered, ○ on the session's
own figure. Whether this machine was quiet during the real confirmation is not the test's to assume:
the mark is checked against the pick's own verdict, and an untrusted one is planted (the same stored
report, its verdict noisy) to pin that ⚠ is never ✓."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tunelab.app.dialogs.export_dialog import ExportDialog, pick_figure
from tunelab.app.views.browser import COLUMNS, SessionBrowser
from tunelab.app.views.live_plot import LivePlot
from tunelab.app.views.stated import StatedFigures
from tunelab.app.views.validation.view import ValidationView
from tunelab.app.widgets.formatting import fmt_ms
from tunelab.core.export.pick import export_pick
from tunelab.core.trust.confirm import confirm_session


def _cell(browser: SessionBrowser, session_id: int, column: str, role=Qt.ItemDataRole.DisplayRole):
    row = next(
        r
        for r in range(browser.proxy.rowCount())
        if browser.proxy.data(browser.proxy.index(r, 0)) == str(session_id)
    )
    return browser.proxy.data(browser.proxy.index(row, COLUMNS.index(column)), role)


def test_a_confirmed_figure_supersedes_the_sessions_own_in_every_view(qtbot, store_copy, tmp_path):
    confirmed_sid, other_sid = (r.id for r in sorted(store_copy.sessions(), key=lambda r: r.id))
    browser = SessionBrowser(store_copy)
    qtbot.addWidget(browser)
    own = store_copy.session(confirmed_sid)
    assert _cell(browser, confirmed_sid, "Best ms") == f"{fmt_ms(own.best_ms)} ○"  # nothing confirmed yet

    confirm_session(store_copy, confirmed_sid, top_k=2, runs=1, max_s=0)
    pick = export_pick(store_copy, confirmed_sid)
    assert pick.confirmation is not None
    browser.refresh()
    mark = "✓" if pick.untrusted_because is None else "⚠"
    assert _cell(browser, confirmed_sid, "Best ms") == f"{fmt_ms(pick.stated_ms)} {mark}"
    tip = _cell(browser, confirmed_sid, "Best ms", Qt.ItemDataRole.ToolTipRole)
    assert f"trial #{pick.trial.number}" in tip and tip.startswith(mark)
    # a session never confirmed keeps its own figure, marked as the session's
    assert _cell(browser, other_sid, "Best ms") == f"{fmt_ms(store_copy.session(other_sid).best_ms)} ○"

    stated = StatedFigures(store_copy)
    stated.refresh(store_copy.sessions())
    assert stated.pick(other_sid) is None and stated.pick(confirmed_sid).trial.id == pick.trial.id
    live = LivePlot(store_copy, redraw_ms=10)
    qtbot.addWidget(live)
    live.show()
    live.set_session(confirmed_sid)
    live.set_stated(stated.stated(confirmed_sid))
    title = live.title.text()
    if mark == "✓":
        assert f"{fmt_ms(pick.stated_ms)} ms ✓ confirmed</b> in 1 fresh process" in title
    else:
        assert (
            f"{fmt_ms(pick.stated_ms)} ms ⚠ untrusted</span> in 1 fresh process" in title
            and f"<b>{fmt_ms(pick.stated_ms)}" not in title
        )
    assert f"the session's best {fmt_ms(own.best_ms)} ms at trial #" in title and "superseded" in title
    live.set_session(other_sid)  # another session: its own figure, no confirmation carried over
    assert "confirmed" not in live.title.text() and "superseded" not in live.title.text()

    validation = ValidationView(store_copy)  # its header states the confirmed figure as well
    qtbot.addWidget(validation)
    validation.set_stated(stated.pick(confirmed_sid))
    validation.set_session(confirmed_sid)
    header = validation.title.text()
    assert f"{fmt_ms(pick.stated_ms)} ms confirmed" in header and "superseded" in header
    validation.set_session(other_sid)
    assert "confirmed" not in validation.title.text()

    dialog = ExportDialog(own, None, str(tmp_path / "out"), picks={False: pick})
    qtbot.addWidget(dialog)
    assert dialog.trial_combo.itemText(0) == f"Best trial ({pick_figure(pick)})"
    assert f"#{pick.trial.number}, {fmt_ms(pick.stated_ms)} ms {mark} confirmed" in pick_figure(pick)


def test_a_noisy_confirmation_is_never_marked_trusted_anywhere(qtbot, store_copy):
    sid = min(r.id for r in store_copy.sessions())
    confirm_session(store_copy, sid, top_k=1, runs=1, max_s=0)
    (latest,) = store_copy.validations(sid)[:1]
    report = store_copy.validation(latest["id"])
    for schedule in report[
        "schedules"
    ]:  # on a quiet machine, fresh processes that disagree (run CV 25 %): no figure to hold to
        schedule.update(verdict="noisy", cv=0.01, run_cv=0.25, busy_fraction=0.0, other_busy_pids=[])
        schedule.update(throttled_fraction=0.0)
    store_copy.add_validation(report)
    pick = export_pick(store_copy, sid)
    assert pick.confirmation is not None and pick.confirmation.verdict == "noisy"
    assert pick.untrusted_because is not None and "scattered (CV 25%)" in pick.untrusted_because
    browser = SessionBrowser(store_copy)
    qtbot.addWidget(browser)
    assert _cell(browser, sid, "Best ms") == f"{fmt_ms(pick.stated_ms)} ⚠"
    stated = StatedFigures(store_copy)
    stated.refresh(store_copy.sessions())
    assert stated.stated(sid).kind == "untrusted" and not stated.stated(sid).trusted
    live = LivePlot(store_copy, redraw_ms=10)
    qtbot.addWidget(live)
    live.set_session(sid)
    live.set_stated(stated.stated(sid))
    assert "✓" not in live.title.text() and "untrusted" in live.title.text()
    assert "✓" not in pick_figure(pick) and "untrusted" in pick_figure(pick)


def test_compare_states_the_same_best_as_the_list_and_its_speed_up_comes_from_it(qtbot, store_copy):
    from tunelab.app.views.compare import CompareView
    from tunelab.core.export.stated import stated_best

    first, second = sorted(r.id for r in store_copy.sessions())
    confirm_session(store_copy, first, top_k=1, runs=1, max_s=0)
    stated = {sid: stated_best(store_copy, store_copy.session(sid)) for sid in (first, second)}
    assert stated[first].kind in ("confirmed", "untrusted") and stated[second].kind == "session"
    view = CompareView(store_copy)
    qtbot.addWidget(view)
    view.show()
    view.set_checked([first, second])
    table = view.summary_table
    rows = {
        table.verticalHeaderItem(r).text(): [table.item(r, c).text() for c in range(table.columnCount())]
        for r in range(table.rowCount())
    }
    assert rows["Best ms"] == [f"{fmt_ms(stated[sid].ms)} {stated[sid].mark}" for sid in (first, second)]
    (speedup,) = [values for name, values in rows.items() if name.startswith("Speed-up")]
    assert speedup == ["1.00×", f"{stated[first].ms / stated[second].ms:.2f}×"]
    browser = SessionBrowser(store_copy)  # the list shows the very same figures
    qtbot.addWidget(browser)
    assert [_cell(browser, sid, "Best ms") for sid in (first, second)] == rows["Best ms"]

"""Once a session's figure has been confirmed in fresh processes, the views state the confirmed figure
and mark the session's own as superseded (issue 10): the browser, the Live and Validation headers and
the export dialog, all from tunelab.core.export.pick. A real confirmation on a real tuned store."""

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
    assert _cell(browser, confirmed_sid, "Best ms") == fmt_ms(own.best_ms)  # nothing confirmed yet

    confirm_session(store_copy, confirmed_sid, top_k=2, runs=1, max_s=0)
    pick = export_pick(store_copy, confirmed_sid)
    assert pick.confirmation is not None
    browser.refresh()
    assert _cell(browser, confirmed_sid, "Best ms") == f"{fmt_ms(pick.stated_ms)} ✓"
    tip = _cell(browser, confirmed_sid, "Best ms", Qt.ItemDataRole.ToolTipRole)
    assert f"trial #{pick.trial.number}" in tip
    assert f"the session's {fmt_ms(pick.trial.latency_ms)} ms is superseded" in tip
    # a session never confirmed keeps its own figure, unmarked
    assert _cell(browser, other_sid, "Best ms") == fmt_ms(store_copy.session(other_sid).best_ms)

    stated = StatedFigures(store_copy)
    stated.refresh(store_copy.sessions())
    assert stated.pick(other_sid) is None and stated.pick(confirmed_sid).trial.id == pick.trial.id
    live = LivePlot(store_copy, redraw_ms=10)
    qtbot.addWidget(live)
    live.show()
    live.set_session(confirmed_sid)
    live.set_stated(stated.pick(confirmed_sid))
    title = live.title.text()
    assert f"{fmt_ms(pick.stated_ms)} ms confirmed</b> in 1 fresh process" in title
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
    assert f"#{pick.trial.number}, {fmt_ms(pick.stated_ms)} ms confirmed" in pick_figure(pick)

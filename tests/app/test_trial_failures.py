"""Failed trials grouped by class where a performance engineer looks (issue 10): the Live header and
the Trials table say '3 failed: 2 SIGILL, 1 build error'; the table has CV and Failure columns (sorting
by Failure groups them) and shows a trial's knobs as name | value rows."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.core.stores import new_trial
from tunelab.app.views.live_plot import LivePlot
from tunelab.app.views.trials.model import COLUMNS
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.core.faults import describe_failures


def _plant_failures(store, session_id: int) -> None:
    for i, (status, error) in enumerate(
        (
            ("run_error", "worker died: signal 4 (SIGILL): an instruction this CPU lacks"),
            ("run_error", "worker died: signal 4 (SIGILL)"),
            ("build_error", "TVMError: cannot vectorize"),
        )
    ):
        failed = new_trial({"bad": i}, (), round=9, status=status, error=error, run_s=None)
        store.add_trial(session_id, failed, f"bad-{i}")


def test_describe_failures():
    assert (
        describe_failures(["SIGILL", "build error", "SIGILL"], 32)
        == "3 of 32 failed: 2 SIGILL, 1 build error"
    )
    assert describe_failures([], 32) == ""


def test_failures_by_class_cv_column_and_knob_rows(qtbot, store_copy):
    record = store_copy.sessions()[-1]
    before = store_copy.session(record.id)
    _plant_failures(store_copy, record.id)
    total, failed = before.n_trials + 3, before.n_failed + 3

    live = LivePlot(store_copy, redraw_ms=10)
    qtbot.addWidget(live)
    live.show()
    live.set_session(record.id)
    assert f"{failed} failed: 2 SIGILL, 1 build error" in live.title.text()

    view = TrialsTable(store_copy)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    assert view.failures_label.text() == f"{failed} of {total} failed: 2 SIGILL, 1 build error"
    failure, cv = COLUMNS.index("Failure"), COLUMNS.index("CV %")
    view.table.sortByColumn(failure, Qt.SortOrder.DescendingOrder)
    shown = [view.proxy.data(view.proxy.index(r, failure)) for r in range(view.proxy.rowCount())]
    assert shown[:3] == ["build error", "SIGILL", "SIGILL"] and set(shown[3:]) == {""}  # grouped
    trials = {t.id: t for t in store_copy.trials(record.id, with_samples=True)}
    for r in range(view.proxy.rowCount()):
        t = trials[int(view.proxy.data(view.proxy.index(r, 1)))]
        text = view.proxy.data(view.proxy.index(r, cv))
        if t.ok and t.mean_ms:
            assert text == f"{100 * t.std_ms / t.mean_ms:.1f}"
        else:
            assert text == "—"

    best = store_copy.best_trial(record.id)
    view.select_trial(best.id)
    rows = {
        view.knob_table.item(r, 0).text(): view.knob_table.item(r, 1).text()
        for r in range(view.knob_table.rowCount())
    }
    assert list(rows) == list(best.config) and len(rows) == len(best.config)
    assert all("\n" not in v for v in rows.values())  # one line per knob, lists too
    assert "CV " in view.samples_text.toPlainText() and "IQR " in view.samples_text.toPlainText()

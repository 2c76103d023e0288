"""File → Import MetaSchedule run…: a real MetaSchedule database folder read in off the GUI thread, the new
session shown and selected; a bad folder is a message, not a crash."""

from __future__ import annotations

import pytest
import shiboken6

from tests.core.specs import quick_spec
from tunelab.app.main_window import MainWindow
from tunelab.core.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def database_folder(tmp_path_factory):
    """The MetaSchedule database tunelab exports for a real auto-space session (GEMM 32^3, llvm)."""
    from tunelab.core.export.files import export_trial
    from tunelab.core.session.loop import create_session

    root = tmp_path_factory.mktemp("ms_import")
    store = Store(root / "source.sqlite")
    try:
        session = create_session(store, quick_spec(space_kind="auto", trials=4))
        list(session.run())
        export_trial(store, session.session_id, out_dir=root / "export", formats=("database",))
        best_ms = store.session(session.session_id).best_ms
    finally:
        store.close()
    return root / "export" / "database", best_ms


def _window(qtbot, store, settings) -> MainWindow:
    window = MainWindow(store, settings, poll_ms=100, probe_target=False)
    qtbot.addWidget(window)
    window.show()
    return window


def _wait_until_ended(qtbot, worker, timeout_ms: int) -> None:
    """Wait for an import worker the window has already started. Not ``waitSignal(worker.finished)``:
    it connects only when entered, and a worker that fails at once (a folder without a database) can
    finish before that, so the signal is missed and the wait runs to its timeout. The window deletes
    the worker (deleteLater) once its ``finished`` reaches the GUI thread."""
    qtbot.waitUntil(lambda: not shiboken6.isValid(worker) or worker.isFinished(), timeout=timeout_ms)


def test_import_a_metaschedule_run_from_the_window(qtbot, store_copy, settings, database_folder):
    folder, best_ms = database_folder
    window = _window(qtbot, store_copy, settings)
    assert window.import_action in window.menuBar().actions()[0].menu().actions()
    before = {r.id for r in store_copy.sessions()}
    worker = window.import_run(str(folder))
    assert worker is not None
    _wait_until_ended(qtbot, worker, 120_000)
    qtbot.waitUntil(lambda: "Imported 1 session" in window.message_bar.text, timeout=10_000)
    (new_id,) = {r.id for r in store_copy.sessions()} - before
    record = store_copy.session(new_id)
    assert record.status == "finished" and record.n_trials == 1 and record.space_kind == "auto"
    assert record.best_ms == pytest.approx(best_ms, rel=1e-6)  # the export states the session's median
    assert window.browser.selected_session() == new_id


def test_importing_a_folder_without_a_database_is_a_message(qtbot, store_copy, settings, tmp_path):
    window = _window(qtbot, store_copy, settings)
    before = [r.id for r in store_copy.sessions()]
    worker = window.import_run(str(tmp_path))
    assert worker is not None
    _wait_until_ended(qtbot, worker, 60_000)
    qtbot.waitUntil(lambda: window.message_bar.level == "error", timeout=10_000)
    assert "holds no MetaSchedule database" in window.message_bar.text
    assert [r.id for r in store_copy.sessions()] == before

"""The GUI thread only draws: a person's journey through every view and dialog, watched on the main
thread, runs no engine work there (tests/app/gui_thread_guard.py says what counts as engine work).

The journey: the main window on a store with a template session, an xgb session (cost-model
predictions) and a compare of two sessions; every tab of every session; the New-session dialog
deriving a template and an auto space, its space editor edited, its target options opened and typed in
(an mcpu, an mattr: each resolved and checked), its tuners offered, a custom workload file loaded; the
export dialog. Work the app starts in its workers
runs on their threads, unwatched; what the app does with their answers on the GUI thread is watched.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dialog_ready import is_settled
from gui_thread_guard import engine_calls_on_gui_thread

from tunelab.app.dialogs.export_dialog import ExportDialog
from tunelab.app.main_window import MainWindow
from tunelab.core.store import Store
from tunelab.core.usecases.export import export_pick
from tunelab.core.workloads.custom import EXAMPLE_SOURCE

# It waits for the app's workers: spaces derived, a custom file loaded, the target probe.
pytestmark = pytest.mark.slow

WAIT_MS = 120_000

# Engine entry points the app still calls on the GUI thread, each with what it is (engine entry <- app
# caller, as GuiThreadWatch.describe writes them). A pair that appears and is not here fails the test;
# a pair here that no longer appears fails it too, so this list only shrinks.
STILL_ON_GUI_THREAD: dict[str, str] = {}


def _journey(qtbot, window: MainWindow, store: Store, custom_file: Path) -> None:
    records = store.sessions()
    for record in records:
        window.browser.select_session(record.id)
        for index in range(window.tabs.count()):
            window.tabs.setCurrentIndex(index)
            qtbot.wait(20)
    window.compare.set_checked([r.id for r in records])
    window.tabs.setCurrentWidget(window.compare)
    qtbot.wait(50)

    dialog = window.new_session_dialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: is_settled(dialog), timeout=WAIT_MS)  # its target resolved, its space derived
    for kind in ("auto", "template"):
        dialog.space_kind_combo.setCurrentIndex(dialog.space_kind_combo.findData(kind))
        qtbot.waitUntil(lambda: is_settled(dialog), timeout=WAIT_MS)
    dialog.target_options.setVisible(True)
    dialog.tuner_combo.setCurrentIndex(dialog.tuner_combo.findData("xgb"))
    qtbot.waitUntil(dialog.can_start, timeout=WAIT_MS)
    _type_target_fields(qtbot, dialog)
    dialog.load_custom_file(str(custom_file))  # a person's TE file: run in a child process, then built
    qtbot.waitUntil(lambda: not dialog.custom_loading(), timeout=WAIT_MS)
    qtbot.waitUntil(dialog.can_start, timeout=WAIT_MS)
    dialog.reject()

    record = records[-1]
    picks = {robust: export_pick(store, record.id, robust=robust) for robust in (False, True)}
    export = ExportDialog(record, None, "out", picks=picks)
    qtbot.addWidget(export)
    export.show()
    qtbot.wait(20)
    export.reject()


def _type_target_fields(qtbot, dialog) -> None:
    """An mcpu and an mattr typed into the target options, each refused once a worker has resolved it (a
    refused target starts no self-check: seconds in a child), then Use detected."""
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    options = dialog.target_options
    for field, typed in (
        (options.mcpu_combo.setCurrentText, "pentium-9000"),
        (options.mattr_edit.setText, "+avx3000"),
    ):
        field(typed)
        qtbot.waitUntil(lambda: not dialog.is_resolving_target(), timeout=WAIT_MS)
        assert typed.lstrip("+") in dialog.problem_error.text() and not dialog.can_start()
        options.reset_button.click()
    qtbot.waitUntil(lambda: is_settled(dialog) and dialog.can_start(), timeout=WAIT_MS)


def _as_in_a_fresh_process(monkeypatch) -> None:
    """Forget what earlier tests in this process worked out and kept (the tuners loaded, targets resolved
    and described, functools caches in tunelab): a cached answer hides the call that made it."""
    import sys

    from tunelab.app.dialogs import new_session_tuners
    from tunelab.app.views import target_words
    from tunelab.app.workers import target_facts, telemetry_source

    monkeypatch.setattr(new_session_tuners, "_loaded", None)
    monkeypatch.setattr(target_words, "_described", {})
    monkeypatch.setattr(target_facts, "_answers", {})
    monkeypatch.setattr(target_facts, "_asking", set())
    monkeypatch.setattr(telemetry_source, "_gpu_status", None)
    monkeypatch.setattr(telemetry_source, "_asker", None)
    for name, module in list(sys.modules.items()):
        if name.startswith("tunelab.") and module is not None:
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == name:
                    value.cache_clear()


def test_a_journey_through_every_view_runs_no_engine_work_on_the_gui_thread(
    qtbot, xgb_db, settings, monkeypatch, tmp_path
):
    path, _xgb_id = xgb_db
    _as_in_a_fresh_process(monkeypatch)
    custom_file = tmp_path / "row_sum.py"
    custom_file.write_text(EXAMPLE_SOURCE)
    store = Store(path)
    try:
        with engine_calls_on_gui_thread() as watch:  # from the window's start: it is part of the journey
            window = MainWindow(store, settings, poll_ms=100, probe_target=True)
            qtbot.addWidget(window)
            window.show()
            _journey(qtbot, window, store, custom_file)
            qtbot.waitUntil(lambda: window._probe is None or window._probe.isFinished(), timeout=WAIT_MS)
            window.close()
    finally:
        store.close()
    seen = set(watch.lines())
    new = sorted(seen - set(STILL_ON_GUI_THREAD))
    gone = sorted(set(STILL_ON_GUI_THREAD) - seen)
    assert not new, (
        "engine work on the GUI thread (move it to a worker in tunelab.app.workers):\n" + "\n".join(new)
    )
    assert not gone, "no longer on the GUI thread: strike from STILL_ON_GUI_THREAD:\n" + "\n".join(gone)


def test_the_watch_sees_engine_work_that_app_code_runs_on_the_gui_thread():
    """The guard itself: an app function that calls the engine on this thread is named; the same call
    from a test (no app code on the stack) or from a worker thread is not."""
    import threading

    from tunelab.app.views import stated  # any app module: its code on the stack is what the watch seeks
    from tunelab.core.trust.bias_stats import group_stats

    def work() -> object:
        return group_stats([1.0, 2.0, 3.0], [1.1, 2.2, 2.9])

    planted = compile("def reach(fn):\n    return fn()\n", stated.__file__, "exec")
    namespace: dict = {}
    exec(planted, namespace)  # a function whose code lives in an app file, as an app caller's does
    with engine_calls_on_gui_thread() as watch:
        work()  # from the test itself: not the app's doing
        worker = threading.Thread(target=namespace["reach"], args=(work,))
        worker.start()
        worker.join()
        assert not watch.violations
        namespace["reach"](work)
    (line,) = watch.lines()
    assert line.startswith("core/trust/bias_stats.py:group_stats") and "app/views/stated.py:reach" in line

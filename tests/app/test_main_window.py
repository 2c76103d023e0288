"""The main window driven like a person would: New session -> Start -> a finished session, pause,
resume, stop, close while tuning, errors as messages, export, settings, shortcuts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from dialog_ready import ask_small_gemm, settled, small_random_budget
from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QMessageBox

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.app.main_window import MainWindow
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store

TUNE_TIMEOUT_MS = 120_000


def _window(qtbot, store, settings, **kwargs) -> MainWindow:
    window = MainWindow(store, settings, poll_ms=100, probe_target=False, **kwargs)
    qtbot.addWidget(window)
    window.show()
    return window


def _record(window: MainWindow, session_id: int) -> SessionRecord:
    return window.store.session(session_id)


def _wait_idle(qtbot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: window.worker is None, timeout=TUNE_TIMEOUT_MS)


def test_new_session_dialog_to_finished_session_then_export(qtbot, store_copy, settings, tmp_path):
    window = _window(qtbot, store_copy, settings)
    before = {r.id for r in store_copy.sessions()}

    def fill_and_start() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, NewSessionDialog)
        ask_small_gemm(dialog)
        # the space is derived in a worker thread, and its size recommends a tuner: wait, then choose
        small_random_budget(settled(qtbot, dialog), trials=8, batch=4)
        dialog.confirm_cap_spin.setValue(0)  # one attempt: measuring again has its own test
        assert dialog.can_start()
        dialog.start_button.click()

    QTimer.singleShot(0, fill_and_start)
    window.new_action.trigger()  # opens the modal dialog; the timer above clicks Start
    assert window.worker is not None
    assert not window.new_action.isEnabled()
    _wait_idle(qtbot, window)

    (new_id,) = {r.id for r in store_copy.sessions()} - before
    record = _record(window, new_id)
    assert record.status == "finished" and record.n_trials == 8 and record.tuner == "random"
    assert window.session_id == new_id
    qtbot.waitUntil(lambda: window.live.n_trials == 8, timeout=5000)
    assert window.trials.model.rowCount() == 8
    assert window.message_bar.level == "info" and f"Session {new_id} finished" in window.message_bar.text
    assert window.run_bar.progress.value() == 8

    out = tmp_path / "export"
    worker = window.export_trial(new_id, None, str(out), ("schedule", "tvmscript"))
    assert worker is not None
    qtbot.waitUntil(lambda: window.export_worker is None, timeout=60_000)
    assert window.message_bar.level == "info", window.message_bar.text
    assert "Exported" in window.message_bar.text
    assert list(out.glob("*.schedule.json")) and list(out.glob("*.py"))


def test_pause_resume_and_stop(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    worker = window.start_session(small_spec(trials=40, batch=2))
    qtbot.waitUntil(lambda: worker.n_yielded >= 1, timeout=TUNE_TIMEOUT_MS)
    session_id = worker.session_id
    assert window.pause_action.isEnabled() and window.stop_action.isEnabled()

    window.pause_action.trigger()
    assert window.pause_action.text() == "Resume tuning"
    qtbot.waitUntil(lambda: _record(window, session_id).status == "paused", timeout=TUNE_TIMEOUT_MS)
    paused_at = _record(window, session_id).n_trials
    qtbot.wait(600)
    assert _record(window, session_id).n_trials == paused_at  # nothing measured while paused

    window.pause_action.trigger()
    assert window.pause_action.text() == "Pause"
    qtbot.waitUntil(lambda: _record(window, session_id).n_trials > paused_at, timeout=TUNE_TIMEOUT_MS)

    window.stop_action.trigger()
    assert not window.stop_action.isEnabled()
    _wait_idle(qtbot, window)
    record = _record(window, session_id)
    assert record.status == "cancelled"
    assert record.n_trials < 40
    assert window.new_action.isEnabled()


def test_resume_a_cancelled_session_from_the_browser(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    worker = window.start_session(small_spec(trials=6, batch=2))
    worker.cancel()  # before the first batch: stops at once
    _wait_idle(qtbot, window)
    session_id = worker.session_id
    assert _record(window, session_id).status == "cancelled"
    window.browser.refresh()
    window.browser.select_session(session_id)
    assert window.browser.resume_button.isEnabled() and window.resume_action.isEnabled()
    window.browser.resume_button.click()
    assert window.worker is not None
    _wait_idle(qtbot, window)
    record = _record(window, session_id)
    assert record.status == "finished" and record.n_trials == 6


def test_closing_while_tuning_asks_and_stops_cooperatively(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    asked = []

    def answer_stop() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(50, answer_stop)
            return
        asked.append([b.text() for b in box.buttons()])
        box.button(QMessageBox.StandardButton.Yes).click()

    worker = window.start_session(small_spec(trials=40, batch=2))
    qtbot.waitUntil(lambda: worker.n_yielded >= 1, timeout=TUNE_TIMEOUT_MS)
    session_id = worker.session_id
    QTimer.singleShot(0, answer_stop)
    assert window.close() is False  # not yet: it stops after the current batch first
    assert sorted(asked[0]) == ["Cancel", "Leave it running", "Stop and close"]
    assert asked and window.isVisible()
    _wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    assert _record(window, session_id).status == "cancelled"


def test_closing_while_tuning_with_the_question_left_open_until_the_session_finished(
    qtbot, store_copy, settings, small_spec
):
    """The question is a real modal box left open until the session has finished on its own; Yes then
    closes the window (once raised AttributeError: the worker it would cancel was gone)."""
    window = _window(qtbot, store_copy, settings)
    worker = window.start_session(small_spec(trials=4, batch=2))
    qtbot.waitUntil(lambda: worker.n_yielded >= 1, timeout=TUNE_TIMEOUT_MS)
    seen = []

    def answer_once_finished() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            seen.append(window.worker is None)
            if window.worker is None:  # the session finished while the question was open
                box.button(QMessageBox.StandardButton.Yes).click()
                return
        QTimer.singleShot(50, answer_once_finished)

    QTimer.singleShot(0, answer_once_finished)
    assert window.close() is True
    assert seen and seen[0] is False and seen[-1] is True  # asked while tuning, answered after
    assert not window.isVisible()
    assert _record(window, worker.session_id).status == "finished"


def test_run_bar_shows_what_the_session_does_after_its_trials(qtbot, store_copy, settings, small_spec):
    """A finished session confirms its winners in fresh processes (a real child process here); the
    run bar says so while it happens and clears it when the run ends."""
    window = _window(qtbot, store_copy, settings)
    spec = small_spec(
        trials=4, batch=4, measure=replace(small_spec().measure, confirm_runs=1, confirm_max_s=0)
    )
    worker = window.start_session(spec)
    seen: list[tuple[str, str, bool]] = []

    class Recorder(QObject):  # runs on the GUI thread, after the main window's own slot for the signal
        @Slot(str)
        def take(self, text: str) -> None:
            seen.append((text, window.run_bar.stage, window.run_bar.stage_label.isVisible()))

    recorder = Recorder()
    worker.stage.connect(recorder.take)
    _wait_idle(qtbot, window)
    record = _record(window, worker.session_id)
    assert record.status == "finished" and record.n_trials == 4
    assert seen, "no stage reported"
    text, shown, visible = seen[0]
    assert text.startswith("confirming the 3 fastest schedule") and "1 fresh process" in text
    assert shown == text[0].upper() + text[1:] + "…" and visible
    assert window.run_bar.stage == "" and not window.run_bar.stage_label.isVisible()  # cleared at the end


NO_TUNING_LOOP_HERE = r"""
import json, sys
from tests.app.child_app import launch, wait_for
from tests.core.specs import quick_spec

app, store, window = launch(sys.argv[1], sys.argv[2])
wait_for(app, lambda: window._probe is None or not window._probe.isRunning())
worker = window.start_session(quick_spec(trials=4, batch=2))
worker.cancel()  # at once: the child still stores the session, then ends it as cancelled
wait_for(app, lambda: window.worker is None)
sid = worker.session_id
cancelled = store.session(sid).status
window.resume_session(sid)
wait_for(app, lambda: window.worker is None)
record = store.session(sid)
loop_or_space = [m for m in sys.modules
                 if m == "tunelab.core.session.loop" or m.startswith("tunelab.core.search.space")]
print(json.dumps({"imported": sorted(loop_or_space),
                  "sid": sid, "shown": window.session_id, "cancelled": cancelled, "status": record.status,
                  "trials": record.n_trials, "live": window.live.n_trials, "message": window.message_bar.text}))
window.close()
"""


def test_starting_and_resuming_never_import_the_tuning_loop_into_the_gui(tmp_path):
    """The GUI process does not import tunelab.core.session.loop (1.5 s of imports holding the GIL) nor build a search
    space to start or resume a session: the child process does. Run in a fresh interpreter, as the app
    runs (target probe included); this test process itself imported tunelab.core.session.loop long ago."""
    script = tmp_path / "gui.py"
    script.write_text(NO_TUNING_LOOP_HERE)
    root = Path(__file__).resolve().parents[2]
    temp = tmp_path / "tmp"  # where the worker writes the spec file for the child
    temp.mkdir()
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        TMPDIR=str(temp),
        PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "db.sqlite"), str(tmp_path / "s.ini")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["imported"] == []
    assert doc["sid"] == doc["shown"] == 1 and doc["cancelled"] == "cancelled"
    assert doc["status"] == "finished" and doc["trials"] == doc["live"] == 4, doc
    assert not list(temp.glob("tunelab-spec-*")), "the spec file was left behind"


def test_core_errors_are_messages_not_crashes(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    window.start_session(small_spec(shape={"M": 0, "N": 32, "K": 32}))
    _wait_idle(qtbot, window)
    assert window.message_bar.level == "error"
    assert "'M' must be at least 1" in window.message_bar.text
    window.resume_session(99_999)  # a session that is not there
    _wait_idle(qtbot, window)
    assert window.message_bar.level == "error" and "99999" in window.message_bar.text


def test_settings_and_shortcuts(qtbot, store, settings):
    window = _window(qtbot, store, settings)
    assert window.new_action.shortcut() == QKeySequence(QKeySequence.StandardKey.New)
    assert window.export_action.shortcut() == QKeySequence("Ctrl+E")
    assert window.pause_action.shortcut() == QKeySequence("Space")
    assert QKeySequence("Ctrl+W") in window.close_action.shortcuts()
    assert window.quit_action.shortcut() == QKeySequence("Ctrl+Q")
    window.resize(700, 560)
    window.tabs.setCurrentWidget(window.compare)
    window.close()
    again = _window(qtbot, store, settings)
    assert (again.size().width(), again.size().height()) == (700, 560)
    assert again.tabs.currentWidget() is again.compare
    again.close()


def test_export_without_a_selection_is_disabled(qtbot, store, settings):
    window = _window(qtbot, store, settings)
    assert not window.export_action.isEnabled()
    window.browser.select_session(store.sessions()[0].id)
    assert window.export_action.isEnabled()


def test_main_opens_the_window_on_the_given_store(qtbot, tuned_db, monkeypatch):
    from tunelab.app import main as app_main

    opened = []

    def close_soon() -> None:
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, MainWindow) and widget.isVisible():
                opened.append(Path(widget.store.path))
                widget.close()

    QTimer.singleShot(300, close_soon)
    assert app_main.main(str(tuned_db), argv=[]) == 0
    assert opened == [Path(tuned_db)]


def test_main_reports_a_store_it_cannot_open(qtbot, tmp_path, monkeypatch, capsys):
    from tunelab.app import main as app_main

    bad = tmp_path / "not-a-db.sqlite"
    bad.write_text("hello")
    monkeypatch.setattr(QMessageBox, "critical", lambda *a, **k: QMessageBox.StandardButton.Ok)
    assert app_main.main(argv=["--db", str(bad)]) == 2
    assert "not a tunelab database" in capsys.readouterr().err
    Store  # noqa: B018 - the import documents what main opens


def test_status_bar_names_the_selected_sessions_target(qtbot, settings, tmp_path, small_spec):
    """Each session's own target (the browser's words), the default one only while none is selected."""
    from tunelab.app.views.browser import target_text
    from tunelab.core.target.host_cpu import host_cpu

    store = Store(tmp_path / "targets.sqlite")
    try:
        ids = {}
        for name, target, kind in (
            ("host", {"kind": "llvm", "mcpu": host_cpu().llvm_name, "num-cores": 2}, "llvm"),
            ("generic", {"kind": "llvm", "mcpu": "x86-64", "num-cores": 2}, "llvm"),
            ("gpu", {"kind": "cuda", "arch": "sm_80"}, "cuda"),
        ):
            ids[name] = store.create_session(
                small_spec(name=name),
                target_json=target,
                target_kind=kind,
                space_json={},
                tvm_version="test",
                flops=2 * 32**3,
            )
        window = _window(qtbot, store, settings)
        assert window.target_label.text().startswith("Default target: ")
        shown = {}
        for name, session_id in ids.items():
            window.browser.select_session(session_id)
            qtbot.waitUntil(lambda sid=session_id: window.session_id == sid, timeout=5000)
            shown[name] = window.target_label.text()
            assert shown[name] == f"Target: {target_text(store.session(session_id))}"
        assert len(set(shown.values())) == 3, shown
        assert host_cpu().llvm_name in shown["host"] and "x86-64" in shown["generic"]
        assert shown["gpu"] == "Target: CUDA sm_80"
        window.browser.table.clearSelection()
        qtbot.waitUntil(lambda: window.session_id is None, timeout=5000)
        assert window.target_label.text().startswith("Default target: ")
        window.close()
    finally:
        store.close()


def test_a_sessions_end_banner_goes_when_another_session_is_shown(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    others = [r.id for r in store_copy.sessions()]
    worker = window.start_session(small_spec(trials=6, batch=2))
    worker.cancel()  # before the first batch: stops at once
    _wait_idle(qtbot, window)
    session_id = worker.session_id
    assert f"Session {session_id} cancelled" in window.message_bar.text
    window.browser.select_session(session_id)  # the same session: the line stays
    assert f"Session {session_id} cancelled" in window.message_bar.text
    window.browser.select_session(others[0])
    qtbot.waitUntil(lambda: window.session_id == others[0], timeout=5000)
    assert window.message_bar.text == "" and window.message_bar.isHidden()
    window._on_error("the disk is full")  # an error is not about one session: it stays
    window.browser.select_session(others[1])
    qtbot.waitUntil(lambda: window.session_id == others[1], timeout=5000)
    assert window.message_bar.text == "the disk is full"

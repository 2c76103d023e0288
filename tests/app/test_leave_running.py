"""Closing the window while a session tunes, and leaving it running: the app's process ends, the
session's child tunes on by itself, and the next window follows it and pauses, resumes and stops it.

The first window is a real app in a process of its own (it must really exit: a child that survived
only because the test's process kept its pipes open would prove nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tunelab.app.main_window import MainWindow
from tunelab.core.store import Store

APP_THAT_LEAVES_IT_RUNNING = textwrap.dedent(
    """
    import json, sys
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox, QPushButton
    from tunelab.app.main_window import MainWindow
    from tunelab.core.records import SessionSpec
    from tunelab.core.store import Store

    db, spec_file, ini = sys.argv[1:4]
    app = QApplication([])
    store = Store(db)
    window = MainWindow(store, QSettings(ini, QSettings.Format.IniFormat), poll_ms=100, probe_target=False)
    window.show()
    with open(spec_file) as f:
        worker = window.start_session(SessionSpec.from_json(json.load(f)))
    seen = {}

    def answer_leave_running():
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            seen["question"] = box.text()
            box.findChild(QPushButton, "leave_running").click()
            return
        QTimer.singleShot(50, answer_leave_running)

    def close_after_the_first_trial():
        if worker.n_yielded < 1:
            QTimer.singleShot(100, close_after_the_first_trial)
            return
        seen.update(session_id=worker.session_id, child_pid=worker._child.pid)
        QTimer.singleShot(0, answer_leave_running)
        seen["closed"] = window.close()
        app.quit()

    QTimer.singleShot(0, close_after_the_first_trial)
    app.exec()
    store.close()
    print(json.dumps(seen))
    """
)


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow  # a tuning child outlives two windows: 12 s
def test_a_session_left_running_outlives_the_app_and_the_next_window_steers_it(
    qtbot, tmp_path, settings, small_spec
):
    db = tmp_path / "store.db"
    Store(db).close()
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(small_spec(trials=400, batch=2).to_json()))
    app = subprocess.run(
        [sys.executable, "-c", APP_THAT_LEAVES_IT_RUNNING, str(db), str(spec_file), str(tmp_path / "a.ini")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert app.returncode == 0, app.stderr[-3000:]
    seen = json.loads(app.stdout.strip().splitlines()[-1])
    assert seen["closed"] is True and "leave it running" in seen["question"]
    session_id, child_pid = seen["session_id"], seen["child_pid"]
    child = psutil.Process(child_pid)
    try:
        assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        store = Store(db)
        window: MainWindow | None = None
        try:
            # The app is gone (its end of the events pipe closed): the child goes on storing trials.
            after_app = store.session(session_id).n_trials
            _wait_for(
                lambda: store.session(session_id).n_trials >= after_app + 2, 120, "trials after the app left"
            )
            record = store.session(session_id)
            assert record.status == "running" and record.pid == child_pid

            window = MainWindow(store, settings, poll_ms=100, probe_target=False)
            qtbot.addWidget(window)
            window.show()
            window.browser.select_session(session_id)
            qtbot.waitUntil(lambda: window.session_id == session_id, timeout=5000)
            shown = window.live.n_trials
            qtbot.waitUntil(lambda: window.live.n_trials > shown, timeout=120_000)  # it follows the session
            assert window.worker is None  # steered by signal, not owned by this window
            assert window.pause_action.isEnabled() and window.stop_action.isEnabled()
            assert not window.resume_action.isEnabled() and window.new_action.isEnabled()

            window.pause_action.trigger()
            qtbot.waitUntil(lambda: store.session(session_id).status == "paused", timeout=120_000)
            qtbot.waitUntil(lambda: window.pause_action.text() == "Resume tuning", timeout=5000)
            paused_at = store.session(session_id).n_trials
            qtbot.wait(1000)
            assert store.session(session_id).n_trials == paused_at  # nothing measured while paused

            window.pause_action.trigger()
            qtbot.waitUntil(lambda: store.session(session_id).n_trials > paused_at, timeout=120_000)
            # The window learns the new status at its next poll of the store, which may come after the trial.
            qtbot.waitUntil(lambda: window.pause_action.text() == "Pause", timeout=5000)

            window.stop_action.trigger()
            assert not window.stop_action.isEnabled()
            child.wait(timeout=120)
            record = store.session(session_id)
            assert record.status == "cancelled" and record.n_trials < 400
            qtbot.waitUntil(lambda: not window.stop_action.isEnabled(), timeout=5000)
        finally:
            if window is not None:
                # closed before its store: a poll of the store after store.close() fails in a Qt slot
                # (sqlite3.ProgrammingError: Cannot operate on a closed database), as the app never does
                assert window.close()
            store.close()
    finally:
        if child.is_running():
            child.kill()

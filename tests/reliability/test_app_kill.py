"""The desktop app killed mid-session (SIGKILL to the window process and its tuning child): the next
launch offers Resume, and resuming finishes the budget with every earlier trial intact. (The app alone
killed leaves its child tuning: the next launch follows that session instead.)"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

APP_TUNES = r"""
import sys, time
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
from tunelab.app.main_window import MainWindow
from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.store import Store

app = QApplication([])
store = Store(sys.argv[1])
window = MainWindow(store, QSettings(sys.argv[2], QSettings.Format.IniFormat), poll_ms=100, probe_target=False)
window.show()
spec = SessionSpec(workload="gemm", shape={"M": 32, "N": 32, "K": 32}, target="llvm", space_kind="template",
                   tuner="genetic", trials=16, batch=2,
                   measure=MeasureOptions(number=1, repeat=2, min_repeat_ms=1, cooldown_s=0, confirm_runs=0))
window.start_session(spec)
while True:  # tune until killed
    app.processEvents()
    time.sleep(0.01)
"""


def _rows(db: Path) -> dict[int, tuple]:
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return {r[0]: tuple(r) for r in conn.execute("SELECT * FROM trials")}
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def _wait_for_trials(app: subprocess.Popen, db: Path, n: int = 3) -> None:
    deadline = time.time() + 300
    while len(_rows(db)) < n:
        assert app.poll() is None, app.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "the app stored no trials in 300 s"
        time.sleep(0.1)


def test_killed_window_process_is_offered_resume_on_the_next_launch(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from tunelab.app.main_window import MainWindow
    from tunelab.core.store import Store

    db, ini = tmp_path / "app.sqlite", tmp_path / "s.ini"
    script = tmp_path / "app_tunes.py"
    script.write_text(APP_TUNES)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    app = subprocess.Popen(
        [sys.executable, str(script), str(db), str(ini)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_trials(app, db)
    finally:
        # The window process and the tuning child it started. The child has a process group of its own
        # (a session left running outlives the app: tests/app/test_leave_running.py), so a kill of the app's
        # group alone leaves it tuning and the next launch follows it; here both die, as in a power cut.
        groups = {app.pid}
        with contextlib.suppress(psutil.Error):
            groups |= {os.getpgid(c.pid) for c in psutil.Process(app.pid).children(recursive=True)}
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        app.wait()
    time.sleep(0.5)
    before = _rows(db)
    assert 3 <= len(before) < 16

    store = Store(db)
    window = MainWindow(
        store, QSettings(str(ini), QSettings.Format.IniFormat), poll_ms=100, probe_target=False
    )
    qtbot.addWidget(window)
    window.show()
    (record,) = store.sessions()
    qtbot.waitUntil(lambda: store.session(record.id).status == "crashed", timeout=10_000)
    window.browser.select_session(record.id)
    qtbot.waitUntil(window.browser.resume_button.isEnabled, timeout=10_000)
    window.browser.resume_button.click()
    qtbot.waitUntil(lambda: window.worker is None, timeout=300_000)
    after = _rows(db)
    assert store.session(record.id).status == "finished" and len(after) == 16
    assert all(after[i] == row for i, row in before.items())  # byte for byte
    store.close()

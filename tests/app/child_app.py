"""The app's window in a process of its own, for tests whose script runs there: opened as a person's launch
opens it (the target probe included), and a wait that keeps the event loop turning."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from tunelab.app.main_window import MainWindow
from tunelab.core.store import Store


def launch(db: str, ini: str) -> tuple[QApplication, Store, MainWindow]:
    """The application, the store at ``db`` and the main window on it, shown, with settings from ``ini``."""
    app = QApplication([])
    store = Store(db)
    window = MainWindow(store, QSettings(ini, QSettings.Format.IniFormat), poll_ms=100)  # probe included
    window.show()
    return app, store, window


def wait_for(app: QApplication, done: Callable[[], bool], timeout: float = 300) -> None:
    """Turn ``app``'s event loop until ``done()``; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        app.processEvents()
        time.sleep(0.01)

"""Single-shot timers that gather requests into one call: the views' redraws, the dialogs' checks that
wait for typing to pause."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer


def single_shot(parent: QObject, ms: int | None, slot: Callable[[], Any]) -> QTimer:
    """A single-shot timer of `parent` calling `slot` `ms` after it is started (restarting it puts the
    call off); `ms` None leaves the interval to `start(ms)`."""
    timer = QTimer(parent)
    timer.setSingleShot(True)
    if ms is not None:
        timer.setInterval(ms)
    timer.timeout.connect(slot)
    return timer

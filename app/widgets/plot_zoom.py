"""Zooming that a person asks for, and a way back: the views' plots zoom with Ctrl+wheel only (a plain
wheel scrolls the page, as it does everywhere else), and a double-click or the "Reset view" button
shows all of the data again.

A plain wheel over a plot used to zoom it; scrolling the Hardware panels zoomed them into negative time,
and that zoom stayed when another session was shown."""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QToolButton, QWidget

ZOOM_MODIFIER = Qt.KeyboardModifier.ControlModifier
ZOOM_HINT = "Ctrl+wheel zooms, drag pans; double-click or Reset view shows everything again"


class ZoomViewBox(pg.ViewBox):
    """A ViewBox that zooms on Ctrl+wheel only and asks for a reset on a double-click."""

    reset_requested = Signal()

    def wheelEvent(self, ev, axis=None) -> None:  # noqa: N802 - pyqtgraph's name
        if ev.modifiers() & ZOOM_MODIFIER:
            super().wheelEvent(ev, axis)
        else:
            ev.ignore()  # the scroll area (or nothing) gets it: the ranges stay as they are

    def mouseDoubleClickEvent(self, ev) -> None:  # noqa: N802 - Qt's name
        if ev.button() == Qt.MouseButton.LeftButton:
            ev.accept()
            self.reset_requested.emit()
        else:
            super().mouseDoubleClickEvent(ev)


def reset_button(on_click: Callable[[], None], parent: QWidget | None = None) -> QToolButton:
    """The "Reset view" button beside a view's plots."""
    button = QToolButton(parent)
    button.setText("Reset view")
    button.setObjectName("reset_view")
    button.setToolTip(f"Show all of the data again. {ZOOM_HINT}.")
    button.clicked.connect(on_click)
    return button

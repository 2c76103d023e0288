"""Mouse and wheel events on pyqtgraph plots as Qt delivers them, for the plot tests."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication


def wheel(view, box, modifiers=Qt.KeyboardModifier.NoModifier, clicks: int = 1) -> None:
    """`clicks` wheel notches (away from the user: zoom in) over the middle of `box`, as Qt delivers them."""
    pos = view.mapFromScene(box.sceneBoundingRect().center())
    for _ in range(abs(clicks)):
        event = QWheelEvent(
            QPointF(pos),
            QPointF(view.viewport().mapToGlobal(pos)),
            QPoint(0, 0),
            QPoint(0, 120 if clicks > 0 else -120),
            Qt.MouseButton.NoButton,
            modifiers,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        QApplication.sendEvent(view.viewport(), event)


def double_click(qtbot, view, box) -> None:
    pos = view.mapFromScene(box.sceneBoundingRect().center())
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def ranges(box) -> list[list[float]]:
    box.prepareForPaint()
    return [list(r) for r in box.viewRange()]


def sessions(store):
    return sorted(store.sessions(), key=lambda r: r.id)

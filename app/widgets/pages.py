"""Small pages built the same way in several views: a caption above the widget it is about, panes in a
splitter, a page that scrolls."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QSplitter, QVBoxLayout, QWidget


def captioned(caption: QWidget, body: QWidget) -> QWidget:
    """A page of `caption` above `body`, which takes the spare height; no margins of its own."""
    page = QWidget()
    layout = QVBoxLayout(page)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(caption)
    layout.addWidget(body, 1)
    return page


def split(
    orientation: Qt.Orientation,
    panes: Sequence[QWidget],
    stretch: Sequence[int] = (),
    sizes: Sequence[int] = (),
) -> QSplitter:
    """`panes` side by side (Horizontal) or one above the other (Vertical); each pane's share of a resize
    by `stretch`, their first sizes by `sizes` (both in the panes' order, where given)."""
    splitter = QSplitter(orientation)
    for pane in panes:
        splitter.addWidget(pane)
    for i, factor in enumerate(stretch):
        splitter.setStretchFactor(i, factor)
    if sizes:
        splitter.setSizes(list(sizes))
    return splitter


def scrolled(page: QWidget) -> QScrollArea:
    """`page` in a frameless scroll area that lets it grow to the area's size: a page that wants more
    room than a small window has scrolls rather than holding the window at its size."""
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(page)
    return scroll

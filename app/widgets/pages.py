"""Small pages built the same way in several views: a caption above the widget it is about."""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget


def captioned(caption: QWidget, body: QWidget) -> QWidget:
    """A page of `caption` above `body`, which takes the spare height; no margins of its own."""
    page = QWidget()
    layout = QVBoxLayout(page)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(caption)
    layout.addWidget(body, 1)
    return page

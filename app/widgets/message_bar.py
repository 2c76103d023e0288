"""A dismissable line at the top of the window for errors and notices (never a crash, never a modal)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QWidget,
)


class MessageBar(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MessageBar")
        self._details = ""
        self.about: int | None = None  # the session an info line speaks of (gone when another is shown)
        self.label = QLabel()
        self.label.setWordWrap(True)
        # Wrapped, a message asks for the width of its longest word: a long path or an unbroken line
        # grew the main window past the screen. It gets the width the window has; the whole message
        # is in the tooltip (and selectable) where a word is cut.
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._details_button = QPushButton("Details…")
        self._details_button.clicked.connect(self._on_details)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self._details_button)
        layout.addWidget(close)
        self.hide()

    @property
    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()

    @property
    def level(self) -> str:
        return str(self.property("level") or "")

    def show_error(self, message: str, details: str = "") -> None:
        self.about = None
        self._show("error", message, details)

    def show_info(self, message: str, about: int | None = None) -> None:
        """An info line; with `about`, one that speaks of that session only (see `session_shown`)."""
        self.about = about
        self._show("info", message, "")

    def session_shown(self, session_id: int | None) -> None:
        """Another session is shown now: an info line about a different one ("Session 3 cancelled: …")
        no longer belongs on screen."""
        if self.about is not None and self.about != session_id:
            self.about = None
            self.hide()

    def _show(self, level: str, message: str, details: str) -> None:
        self.setProperty("level", level)
        self.style().unpolish(self)
        self.style().polish(self)
        self.label.setText(message)
        self.label.setToolTip(message)
        self._details = details
        self._details_button.setVisible(bool(details))
        self.show()

    def _on_details(self) -> None:
        box = QMessageBox(QMessageBox.Icon.Warning, "Error details", self.label.text(), parent=self)
        box.setDetailedText(self._details)
        box.exec()

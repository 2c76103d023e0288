"""The Validation panel's verdict box: the verdict in large plain words, its cause and its figures."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from tunelab.app import theme
from tunelab.app.views.validation.drawing import verdict_styles


class VerdictBox(QFrame):
    """A headline, a cause and figures (hidden while empty), coloured by the verdict they state."""

    def __init__(self, headline: str, cause: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("verdict_box")
        self.verdict_label = QLabel(headline)
        self.verdict_label.setObjectName("verdict_label")
        self.cause_label = QLabel(cause)
        self.cause_label.setObjectName("verdict_cause")
        self.cause_label.setWordWrap(True)
        self.cause_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.figures_label = QLabel()
        self.figures_label.setObjectName("verdict_figures")
        self.figures_label.setWordWrap(True)
        self.figures_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box = QVBoxLayout(self)
        box.setContentsMargins(12, 8, 12, 8)
        box.setSpacing(2)
        box.addWidget(self.verdict_label)
        box.addWidget(self.cause_label)
        box.addWidget(self.figures_label)
        self.figures_label.hide()
        self.style_verdict(None)

    def say(self, headline: str, cause: str, verdict: str | None = None, figures: str = "") -> None:
        """State a verdict (None: not validated, in grey) in words."""
        self.verdict_label.setText(headline)
        self.style_verdict(verdict)
        self.cause_label.setText(cause)
        self.set_figures(figures)

    def set_figures(self, text: str) -> None:
        self.figures_label.setText(text)
        self.figures_label.setVisible(bool(text))

    def style_verdict(self, verdict: str | None) -> None:
        box, headline, cause = verdict_styles(verdict)
        self.setStyleSheet(box)
        self.verdict_label.setStyleSheet(headline)
        self.cause_label.setStyleSheet(cause)
        self.figures_label.setStyleSheet(f"font-size: 13px; color: {theme.TEXT};")

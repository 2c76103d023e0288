"""A one-line label that never widens its window: text longer than the room it has is cut with "…"
and said in full in its tooltip."""

from __future__ import annotations

from PySide6 import QtGui
from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

MIN_WIDTH = 60  # what the label asks of its layout at least, whatever its text


def plain_text(text: str) -> str:
    """`text` without its markup when it is rich text (what a person reads)."""
    if not QtGui.Qt.mightBeRichText(text):  # (QtGui's, not QtCore's Qt)
        return text
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText()


class ElidedLabel(QLabel):
    """A QLabel whose `text()` is the whole text while it shows what fits of it.

    A QLabel asks its layout for its whole text's width as its minimum; a 400-character line grew the
    main window to 3,300 px. This one asks for `MIN_WIDTH`; when the text does not fit, it shows the
    start of its plain text with "…" and the whole text in its tooltip. Rich text that fits is shown
    as rich text."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self._full_width = 0
        self._tooltip = ""  # the tooltip set from outside, shown when the whole text fits
        self._elided = False
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setText(text)

    # ---- QLabel ---------------------------------------------------------------------------------
    def text(self) -> str:  # the whole text, as a QLabel's callers expect
        return self._full

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        text = text or ""
        if text == self._full and self._full_width:
            return
        self._full = text
        self._measure()

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        # A style sheet's font arrives after the text was set: the whole text's width changes with it.
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange) and self._full:
            self._measure()

    def setToolTip(self, tip: str) -> None:  # noqa: N802 - Qt's name
        self._tooltip = tip
        super().setToolTip(self._full if self._elided else tip)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self._full_width, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(min(MIN_WIDTH, self._full_width), super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit()

    # ---- public ---------------------------------------------------------------------------------
    @property
    def elided(self) -> bool:
        """Whether the text is cut now (its whole is in the tooltip)."""
        return self._elided

    @property
    def shown_text(self) -> str:
        """What the label shows now."""
        return super().text()

    # ---- eliding --------------------------------------------------------------------------------
    def _measure(self) -> None:
        """The whole text's width, as a QLabel would ask for it; then show what fits."""
        self.setTextFormat(Qt.TextFormat.AutoText)
        super().setText(self._full)
        self._full_width = super().sizeHint().width()
        self.updateGeometry()
        self._fit()

    def _fit(self) -> None:
        room = self.contentsRect().width() - 2 * self.margin() - 2 * max(self.indent(), 0)
        elided = bool(self._full) and self._full_width > self.width()
        if elided:
            shown = self.fontMetrics().elidedText(plain_text(self._full), Qt.TextElideMode.ElideRight, room)
            self.setTextFormat(Qt.TextFormat.PlainText)  # the cut text is plain; "<" in it is a "<"
        else:
            shown = self._full
            self.setTextFormat(Qt.TextFormat.AutoText)
        if shown != super().text():
            super().setText(shown)
        self._elided = elided
        tip = self._full if elided else self._tooltip
        if tip != super().toolTip():
            super().setToolTip(tip)

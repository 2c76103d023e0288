"""A sentence in the middle of an empty plot ("No predictions yet: …"), so that a blank panel says
why it is blank. Placed in the plot's view box in pixels, so it stays centred whatever the axes show."""

from __future__ import annotations

import pyqtgraph as pg

from tunelab.app import theme

NOTE_COLOR = theme.TEXT_MUTED


class PlotNote:
    """`show(text)` / `hide()` a centred note over `plot`'s view box."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self._vb = plot.getViewBox()
        self.item = pg.TextItem("", color=NOTE_COLOR, anchor=(0.5, 0.5))
        # A child of the view box (not added to it as data): its position is in the box's pixels and
        # it never changes the auto-range.
        self.item.setParentItem(self._vb)
        self.item.hide()
        self._vb.sigResized.connect(self._place)

    @property
    def text(self) -> str:
        return self.item.textItem.toPlainText() if self.item.isVisible() else ""

    def show(self, text: str) -> None:
        self.item.setText(text)
        self.item.show()
        self._place()

    def hide(self) -> None:
        self.item.hide()

    def _place(self, *_: object) -> None:
        rect = self._vb.boundingRect()
        self.item.setPos(rect.center())

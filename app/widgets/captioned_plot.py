"""A plot under a caption that serves as its legend: a legend inside a short plot hides what it names."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from tunelab.app import theme


class CaptionedPlot(QWidget):
    """A white plot (`plot`, in `plot_widget`) at least `min_height` px high, under a wrapped caption."""

    def __init__(self, caption: str, min_height: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot_widget = pg.PlotWidget(background="w")
        self.plot_widget.setMinimumHeight(min_height)
        self.plot = self.plot_widget.getPlotItem()
        self.caption = QLabel(caption)
        self.caption.setWordWrap(True)
        self.caption.setStyleSheet(theme.CAPTION_STYLE)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.caption)
        layout.addWidget(self.plot_widget, 1)

    def scene(self):
        return self.plot_widget.scene()

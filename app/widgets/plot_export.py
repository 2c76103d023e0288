"""Save a pyqtgraph scene or item as PNG or SVG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyqtgraph.exporters as exporters
from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsScene

PLOT_FILTER = "PNG image (*.png);;SVG drawing (*.svg)"


def save_plot(item: Any, path: str | Path) -> Path:
    """Write `item` (a GraphicsScene, PlotItem or GraphicsLayout) to `path`; the suffix picks the format."""
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        path = path.with_suffix(".png")
    if path.suffix.lower() == ".svg":
        try:
            exporters.SVGExporter(item).export(str(path))
        except ValueError:
            # pyqtgraph 0.14's SVG exporter cannot parse the closed paths ("... Z") Qt 6.10+ writes
            # (pyqtgraph issue #3495); Qt's own SVG generator draws the same scene as vectors.
            _qt_svg(item, path)
        return path
    exporter = exporters.ImageExporter(item)
    width = int(exporter.parameters()["width"])
    exporter.parameters()["width"] = max(width, 1200)  # crisp on a slide; height follows the aspect
    exporter.export(str(path))
    return path


def _qt_svg(item: Any, path: Path) -> None:
    scene = item if isinstance(item, QGraphicsScene) else item.scene()
    views = scene.views()
    if views:
        view = views[0]
        size = view.viewport().size()
        render = view.render
    else:
        rect = item.sceneBoundingRect().toRect()
        size = rect.size()

        def render(painter: QPainter) -> None:
            scene.render(painter, source=rect)

    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(QSize(size))
    generator.setViewBox(QRect(0, 0, size.width(), size.height()))
    generator.setTitle("tunelab plot")
    painter = QPainter(generator)
    try:
        render(painter)
    finally:
        painter.end()

"""Save a pyqtgraph scene or item as PNG or SVG, with a title naming what it shows: a saved plot
travels alone (a slide, a bug report), so it says which session, workload and shape it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyqtgraph.exporters as exporters
from PySide6.QtCore import QPoint, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsScene

from tunelab.app import theme

PLOT_FILTER = "PNG image (*.png);;SVG drawing (*.svg)"
TITLE_PT = 11  # the title's size at a 1200 px wide image


def plot_title(record: Any, what: str) -> str:
    """'Session 3 (gemm M=512,N=512,K=512 float32) · Live': the title a saved plot carries."""
    shape = ",".join(f"{k}={v}" for k, v in (record.shape or {}).items())
    return f"Session {record.id} ({record.workload} {shape} {record.dtype}) · {what}"


def save_plot(item: Any, path: str | Path, title: str | None = None) -> Path:
    """Write `item` (a GraphicsScene, PlotItem or GraphicsLayout) to `path`; the suffix picks the format.
    ``title``: a line drawn above the plot (and the SVG's title)."""
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        path = path.with_suffix(".png")
    if path.suffix.lower() == ".svg":
        if title:
            _qt_svg(item, path, title)
            return path
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
    if not title:
        exporter.export(str(path))
        return path
    plot = exporter.export(toBytes=True)
    band = _band_height(plot.width())
    image = QImage(plot.width(), plot.height() + band, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    try:
        _draw_title(painter, title, plot.width(), band)
        painter.drawImage(QPoint(0, band), plot)
    finally:
        painter.end()
    if not image.save(str(path)):
        raise OSError(f"cannot write {path}")
    return path


def _band_height(width: int) -> int:
    return max(28, round(width * 0.035))


def _draw_title(painter: QPainter, title: str, width: int, band: int) -> None:
    font = QFont()
    font.setPixelSize(round(band * 0.55))
    font.setBold(True)
    painter.setFont(font)
    painter.setPen(QColor(theme.TEXT))
    painter.drawText(
        QRect(round(band * 0.4), 0, width - round(band * 0.8), band),
        int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
        title,
    )


def _qt_svg(item: Any, path: Path, title: str | None = None) -> None:
    scene = item if isinstance(item, QGraphicsScene) else item.scene()
    views = scene.views()
    if views:
        view = views[0]
        size = view.viewport().size()

        def render(painter: QPainter) -> None:
            # An explicit target: by default the view fills the whole device, title band included.
            view.render(painter, QRectF(0, 0, size.width(), size.height()))
    else:
        rect = item.sceneBoundingRect().toRect()
        size = rect.size()

        def render(painter: QPainter) -> None:
            scene.render(painter, source=rect)

    band = _band_height(size.width()) if title else 0
    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(QSize(size.width(), size.height() + band))
    generator.setViewBox(QRect(0, 0, size.width(), size.height() + band))
    generator.setTitle(title or "tunelab plot")
    painter = QPainter(generator)
    try:
        if title:
            _draw_title(painter, title, size.width(), band)
            painter.translate(0, band)
        render(painter)
    finally:
        painter.end()

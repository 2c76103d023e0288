"""The cost-model view's three plots: predicted vs measured (a density image when there are many), the
prediction error per trial, and the rank correlation per round."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from tunelab.app import theme
from tunelab.app.widgets.buffers import decimate
from tunelab.app.widgets.log_axis import log_axes, unit_axis
from tunelab.app.widgets.plot_note import PlotNote

SCATTER_CAP = 5000  # above this many pairs: a density image instead of the scatter; markers thinned
POINT_BRUSH = theme.rgba(theme.ACCENT, 170)
CONTEXT_BRUSH = theme.rgba(theme.TEXT_FAINT, 90)
HIGHLIGHT_PEN = theme.WARN
DENSITY_BINS = 160  # per axis of the density image
RECENT = 256  # the latest trials' residual markers are always drawn
DENSITY_LOW = np.array([205, 220, 245], dtype=np.float64)  # one trial per cell
DENSITY_HIGH = np.array([13, 52, 140], dtype=np.float64)  # the densest cell


def density_rgba(x: np.ndarray, y: np.ndarray, bins: int = DENSITY_BINS):
    """An RGBA image (row-major: [y, x]) of a 2-D histogram of (x, y) and its rectangle (x0, y0, w, h).

    Empty cells are transparent; the colour goes from light to dark blue with log(count)."""
    x0, x1 = float(x.min()), float(x.max())
    y0, y1 = float(y.min()), float(y.max())
    w, h = max(x1 - x0, 1e-9), max(y1 - y0, 1e-9)
    x0, y0, w, h = x0 - 0.01 * w, y0 - 0.01 * h, 1.02 * w, 1.02 * h
    ix = np.minimum(((x - x0) * (bins / w)).astype(np.int64), bins - 1)
    iy = np.minimum(((y - y0) * (bins / h)).astype(np.int64), bins - 1)
    counts = np.bincount(iy * bins + ix, minlength=bins * bins).reshape(bins, bins)
    t = np.log1p(counts) / math.log1p(max(int(counts.max()), 1))
    t = np.where(counts > 0, 0.15 + 0.85 * t, 0.0)
    rgba = np.empty((bins, bins, 4), dtype=np.uint8)
    rgba[..., :3] = (DENSITY_LOW + t[..., None] * (DENSITY_HIGH - DENSITY_LOW)).astype(np.uint8)
    rgba[..., 3] = np.where(counts > 0, 235, 0)
    return rgba, (x0, y0, w, h)


class CostModelPlots(pg.GraphicsLayoutWidget):
    """Three plots side by side, each the full height: stacked, the error and rank plots got ~60 px
    each in a 1280x800 window, and their axes one tick ("0")."""

    def __init__(self) -> None:
        super().__init__()
        self.setBackground("w")
        self._build_scatter()
        self._build_residual()
        self._build_rank()
        self.scatter_note = PlotNote(self.scatter_plot)
        self.residual_note = PlotNote(self.residual_plot)
        self.rank_note = PlotNote(self.rank_plot)

    def _build_scatter(self) -> None:
        """Predicted vs measured, with the y = x line, other sessions' trials and the picked group's."""
        self.scatter_plot = self.addPlot(
            row=0, col=0, title="Predicted vs measured (ms)", axisItems=log_axes("bottom", "left")
        )
        self.scatter_plot.setLabel("bottom", "Measured (ms)")
        self.scatter_plot.setLabel("left", "Predicted (ms)")
        self.scatter_plot.setLogMode(x=True, y=True)
        for side in ("bottom", "left"):
            self.scatter_plot.getAxis(side).enableAutoSIPrefix(False)
        self.scatter_plot.showGrid(x=True, y=True, alpha=0.25)
        self.scatter = self.scatter_plot.plot(
            pen=None, symbol="o", symbolSize=7, symbolPen=None, symbolBrush=POINT_BRUSH
        )
        # Many trials: their density instead (view coordinates are log10 ms, as the axes are log).
        self.density = pg.ImageItem(axisOrder="row-major")
        self.density.setZValue(-2)
        self.density.hide()
        self.scatter_plot.addItem(self.density)
        # In log-log coordinates y = x is still the 45-degree line through the origin.
        self.identity = pg.InfiniteLine(
            pos=(0, 0), angle=45, pen=pg.mkPen(theme.TEXT_SECONDARY, width=1.5, style=Qt.PenStyle.DashLine)
        )
        self.identity.setZValue(5)  # above the density image
        self.scatter_plot.addItem(self.identity, ignoreBounds=True)
        # Other pooled sessions' trials (grey, behind) and the picked bias group's trials (on top).
        self.context_scatter = self.scatter_plot.plot(
            pen=None, symbol="o", symbolSize=6, symbolPen=None, symbolBrush=CONTEXT_BRUSH
        )
        self.context_scatter.setZValue(-5)
        self.highlight = self.scatter_plot.plot(
            pen=None,
            symbol="o",
            symbolSize=13,
            symbolBrush=None,
            symbolPen=pg.mkPen(HIGHLIGHT_PEN, width=2.5),
        )
        self.highlight.setZValue(10)

    def _build_residual(self) -> None:
        """The prediction error per trial."""
        # A short title: the long formula ran into the axis labels at 1280 px; the formula is the tooltip.
        self.residual_plot = self.addPlot(row=0, col=1, title="Prediction error per trial")
        self.residual_plot.setLabel("bottom", "Trial #")
        self.residual_plot.setToolTip(
            "(predicted − measured) / measured, in %: above 0 the model guessed too slow"
        )
        unit_axis(self.residual_plot.getAxis("left"), "Error (%)")
        self.residual_plot.showGrid(x=True, y=True, alpha=0.25)
        self.residual_plot.addItem(
            pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen(theme.TEXT_MUTED)), ignoreBounds=True
        )
        self.residual_plot.setDownsampling(auto=True, mode="peak")
        self.residual_plot.setClipToView(True)
        self.residuals = self.residual_plot.plot(
            pen=pg.mkPen(theme.rgba(theme.ACCENT, 90)),
            symbol="o",
            symbolSize=5,
            symbolPen=None,
            symbolBrush=POINT_BRUSH,
        )
        self.residuals.setSkipFiniteCheck(True)
        # With many trials the line above is drawn downsampled and without markers; these are a thinned set.
        self.residual_points = self.residual_plot.plot(
            pen=None, symbol="o", symbolSize=5, symbolPen=None, symbolBrush=POINT_BRUSH
        )
        self.residual_points.setDownsampling(ds=1, auto=False)
        self.residual_points.setSkipFiniteCheck(True)
        self.residual_highlight = self.residual_plot.plot(
            pen=None, symbol="o", symbolSize=10, symbolBrush=None, symbolPen=pg.mkPen(HIGHLIGHT_PEN, width=2)
        )
        self.residual_highlight.setZValue(10)

    def _build_rank(self) -> None:
        """The rank correlation per round."""
        # Three plots side by side, each the full height: stacked, the error and rank plots got ~60 px
        # each in a 1280x800 window, and their axes one tick ("0").
        self.rank_plot = self.addPlot(row=0, col=2, title="Rank correlation per round (ρ)")
        self.rank_plot.setLabel("bottom", "Round")
        self.rank_plot.setLabel("left", "ρ")
        self.rank_plot.setYRange(-1.05, 1.05, padding=0)
        self.rank_plot.setMouseEnabled(x=False, y=False)
        # Fixed ticks: a short panel otherwise gets only "0" and reads as one squashed tick.
        self.rank_plot.getAxis("left").setTicks([[(v, f"{v:g}") for v in (-1, -0.5, 0, 0.5, 1)], []])
        self.rank_plot.showGrid(x=False, y=True, alpha=0.25)
        self.rank_plot.addItem(
            pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen(theme.TEXT_MUTED)), ignoreBounds=True
        )
        self.rank_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brush=theme.GOOD)
        self.rank_plot.addItem(self.rank_bars)

    def draw_pairs(
        self, index: np.ndarray, measured: np.ndarray, predicted: np.ndarray, residual: np.ndarray
    ) -> None:
        """The scatter (or, with many trials, its density) and the residual line of the shown pairs."""
        n = len(measured)
        if n > SCATTER_CAP:
            self.scatter.setData([], [])
            rgba, rect = density_rgba(np.log10(measured), np.log10(predicted))
            self.density.setImage(rgba, autoLevels=False)
            self.density.setRect(*rect)
            self.density.show()
            # The residual line is downsampled by pyqtgraph; its markers are a thinned, stable subset.
            self.residuals.setSymbol(None)
            self.residuals.setData(index, residual)
            rows = decimate(np.arange(n), SCATTER_CAP, np.arange(max(0, n - RECENT), n))
            self.residual_points.setData(index[rows], residual[rows])
        else:
            self.density.hide()
            self.density.clear()
            self.scatter.setData(measured, predicted)
            self.residuals.setSymbol("o")
            self.residuals.setData(index, residual)
            self.residual_points.setData([], [])

    def draw_rounds(self, rounds: list[tuple[int, float]], all_rounds: list[int]) -> None:
        """A bar per round's ρ, ticked with the session's rounds (or, none known, the ones drawn)."""
        self.rank_bars.setOpts(x=[r for r, _ in rounds], height=[rho for _, rho in rounds], width=0.7)
        if len(rounds):
            self.rank_plot.setXRange(rounds[0][0] - 0.7, rounds[-1][0] + 0.7)
            all_rounds = all_rounds or [r for r, _ in rounds]
            step = max(1, len(all_rounds) // 12)
            ticks = [(r, str(r)) for r in all_rounds[::step]]
            self.rank_plot.getAxis("bottom").setTicks([ticks, []])

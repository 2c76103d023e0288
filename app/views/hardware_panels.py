"""The Hardware view's stacked panels: one per reading, sharing the time axis of the first (the trials),
each titled by its name with its unit on the axis, never stretched over a flat series' noise, and
shaded where the GPU throttled."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyqtgraph as pg

from tunelab.app import theme
from tunelab.app.widgets.log_axis import log_axes
from tunelab.app.widgets.plot_zoom import ZoomViewBox

PANEL_MIN_H = 120  # px per stacked panel: its title, unit and a few numbers fit
THROTTLE_BRUSH = theme.rgba(theme.ERROR, 50)


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index ranges where flags is true."""
    if not len(flags):
        return []
    padded = np.concatenate([[0], flags.astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2], strict=True))


def split_title(title: str) -> tuple[str, str]:
    """ "Clock (MHz)" -> ("Clock", "MHz"); a title without a unit counts ("Other busy processes", "count")."""
    if title.endswith(")") and " (" in title:
        name, unit = title[:-1].rsplit(" (", 1)
        return name, unit
    return title, "count"


def min_span(columns: Iterable[np.ndarray]) -> float:
    """The least y range of a panel: a flat series (a clock steady at 2596 MHz, wobbling by 0.1) is
    drawn as flat, over 5% of its level (at least 1 unit), not stretched over its noise."""
    finite = [c[np.isfinite(c)] for c in columns]
    values = np.concatenate(finite) if finite else np.zeros(0)
    if not len(values):
        return 1.0
    return max(0.05 * float(np.max(np.abs(values))), 1.0)


def add_panel(
    layout: pg.GraphicsLayoutWidget, above: list[pg.PlotItem], title: str, x_min: float
) -> pg.PlotItem:
    """One panel per row, all sharing the time axis of the first (the trials). The panel's name is
    a title above it and the y axis carries only the unit: stacked panels are too short for a
    vertical "Utilization (%)", which was cut or ran into the next panel's."""
    # Ctrl+wheel zooms: a plain wheel scrolls the panels (it zoomed them into negative time).
    plot = layout.addPlot(row=len(above), col=0, axisItems=log_axes("left"), viewBox=ZoomViewBox())
    plot.setLimits(xMin=x_min)
    plot.enableAutoRange(x=False)  # the time axis is set from all the data at once (_fit_time)
    name, unit = split_title(title)
    plot.setTitle(f"<span style='color:{theme.TEXT}'>{name}</span>", size="9pt", justify="left")
    plot.setLabel("left", unit)
    plot.getAxis("left").setWidth(70)
    plot.showGrid(x=True, y=True, alpha=0.25)
    plot.setDownsampling(mode="peak")
    plot.setClipToView(True)
    if above:
        plot.setXLink(above[0])
    for other in above:
        other.getAxis("bottom").setLabel("")
    plot.setLabel("bottom", "Seconds since the session was created")
    return plot


def shade_throttling(
    panels: list[pg.PlotItem], t: np.ndarray, throttled: np.ndarray
) -> list[pg.LinearRegionItem]:
    """Shade the (first 200) runs of throttled samples in every panel; the regions added."""
    regions = []
    runs = _runs(throttled > 0)
    for start, end in runs[:200]:
        span = (float(t[start]), float(t[min(end, len(t) - 1)]))
        for plot in panels:
            region = pg.LinearRegionItem(values=span, movable=False, brush=THROTTLE_BRUSH, pen=pg.mkPen(None))
            region.setZValue(-10)
            plot.addItem(region)
            regions.append(region)
    return regions

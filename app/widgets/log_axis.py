"""Axes whose labels stay readable and never go missing.

`LogAxis`: in log mode only 1, 2 and 5 of each decade are written out (pyqtgraph labels every minor
tick, which overlaps on a horizontal axis); a range too narrow to hold two of those (best latencies
within 0.012-0.018 ms) gets evenly spaced ticks in data units instead, every one labelled, so the axis
is never left without numbers. `IntegerAxis`: a count (trials) ticked at whole numbers only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg

LABELLED_MANTISSAS = (1.0, 2.0, 5.0)
NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


def _labelled(x: float) -> bool:
    if not math.isfinite(x) or x <= 0:
        return False
    mantissa = x / 10 ** math.floor(math.log10(x) + 1e-9)
    return any(abs(mantissa - m) < 1e-6 * m for m in LABELLED_MANTISSAS)


def nice_step(span: float, n: int) -> float:
    """A 1-2-2.5-5 step that cuts `span` into about `n` parts."""
    raw = span / max(n, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(s for s in NICE_STEPS if s * magnitude >= raw * (1 - 1e-9)) * magnitude


def unit_axis(axis: pg.AxisItem, text: str, **style: Any) -> None:
    """Label `axis` `text` (its unit included) and keep its numbers in that unit: pyqtgraph would scale
    them by an SI prefix ("x0.001", "k") that contradicts the label."""
    axis.setLabel(text, **style)
    axis.enableAutoSIPrefix(False)


class LogAxis(pg.AxisItem):
    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)
        self._linear_step: float | None = None  # the data-unit step of a narrow range's ticks

    def logTickValues(self, minVal, maxVal, size, stdTicks):  # noqa: N802 - pyqtgraph's name
        ticks = super().logTickValues(minVal, maxVal, size, stdTicks)
        self._linear_step = None
        shown = [v for _, values in ticks for v in values if minVal <= v <= maxVal]
        if sum(_labelled(10.0**v) for v in shown) >= 2 or not (math.isfinite(minVal) and maxVal > minVal):
            return ticks
        lo, hi = 10.0**minVal, 10.0**maxVal
        n = max(3, min(6, int(size / 60))) if size else 4
        for _ in range(4):  # a short axis: cut finer until three ticks fall inside (one at an end may
            step = nice_step(hi - lo, n)  # be left unlabelled, its text not fitting the axis)
            values = np.arange(math.ceil(lo / step), math.floor(hi / step) + 1) * step
            values = values[values > 0]
            if len(values) >= 3:
                break
            n *= 2
        if not len(values):
            return ticks
        self._linear_step = step
        return [(None, list(np.log10(values)))]

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph's name
        out = []
        step = self._linear_step
        decimals = 0 if step is None else max(0, -math.floor(math.log10(step) + 1e-9) + 1)
        for x in 10 ** np.asarray(values, dtype=float) * scale:
            if not math.isfinite(x) or x <= 0:
                out.append("")
            elif step is not None:
                out.append(f"{x:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{x:.0f}")
            else:
                out.append(f"{x:g}" if _labelled(x) else "")
        return out


class IntegerAxis(pg.AxisItem):
    """Ticks at whole numbers only: a trial is trial 3 or 4, never 3.5."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 - pyqtgraph's name
        levels = [
            (spacing, values) for spacing, values in super().tickValues(minVal, maxVal, size) if spacing >= 1
        ]
        if levels:
            return [(spacing, [v for v in values if float(v).is_integer()]) for spacing, values in levels]
        return [(1.0, [float(v) for v in range(math.ceil(minVal), math.floor(maxVal) + 1)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph's name
        if scale != 1:  # an SI prefix (thousands of trials): pyqtgraph's own decimals
            return super().tickStrings(values, scale, spacing)
        return [f"{round(v):d}" for v in values]


def log_axes(*sides: str) -> dict[str, LogAxis]:
    return {side: LogAxis(side) for side in sides}

"""An axis whose log-mode labels stay readable: only 1, 2 and 5 of each decade are written out
(pyqtgraph labels every minor tick, which overlaps on a horizontal axis)."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

LABELLED_MANTISSAS = (1.0, 2.0, 5.0)


class LogAxis(pg.AxisItem):
    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph's name
        out = []
        for x in 10 ** np.asarray(values, dtype=float) * scale:
            if not math.isfinite(x) or x <= 0:
                out.append("")
                continue
            mantissa = x / 10 ** math.floor(math.log10(x) + 1e-9)
            keep = any(abs(mantissa - m) < 1e-6 * m for m in LABELLED_MANTISSAS)
            out.append(f"{x:g}" if keep else "")
        return out


def log_axes(*sides: str) -> dict[str, LogAxis]:
    return {side: LogAxis(side) for side in sides}

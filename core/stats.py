"""The figures tunelab reports for a trial's samples: the median, with its spread beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SampleStats:
    n: int
    median: float
    iqr: float  # interquartile range, same unit as the samples
    cv: float  # standard deviation / mean
    outliers: int  # samples beyond 1.5 IQR from the quartiles (Tukey's fences)

    @property
    def relative_iqr(self) -> float:
        return self.iqr / self.median if self.median > 0 else float("inf")


def sample_stats(samples: Sequence[float]) -> SampleStats | None:
    """None for no samples; a single sample has zero spread."""
    x = np.asarray([s for s in samples if s is not None and np.isfinite(s)], dtype=np.float64)
    if x.size == 0:
        return None
    q1, median, q3 = np.percentile(x, [25, 50, 75])
    iqr = float(q3 - q1)
    mean = float(x.mean())
    cv = float(x.std() / mean) if mean > 0 else 0.0
    outliers = int(np.sum((x < q1 - 1.5 * iqr) | (x > q3 + 1.5 * iqr)))
    return SampleStats(int(x.size), float(median), iqr, cv, outliers)

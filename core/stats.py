"""The figures tunelab reports for a trial's samples: the median, with its spread beside it.

One implementation of each: :func:`median` (a trial's latency, as the store keeps it),
:func:`coefficient_of_variation` and :func:`quartiles`; :func:`sample_stats` puts them together.
:func:`summarize` gives the figures the store keeps beside a trial's latency (mean, spread, range).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

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


@dataclass(frozen=True)
class SampleSummary:
    median: float
    mean: float
    std: float  # population standard deviation (0 for one sample), as TVM's time_evaluator reports it
    min: float
    max: float


def median(samples: Sequence[float]) -> float | None:
    """The median (the mean of the middle two for an even count); None for no samples."""
    return float(statistics.median(samples)) if len(samples) else None


def summarize(samples: Sequence[float]) -> SampleSummary | None:
    """The median, mean, population standard deviation, min and max of the samples; None for none."""
    middle = median(samples)
    if middle is None:
        return None
    return SampleSummary(
        median=middle,
        mean=float(statistics.fmean(samples)),
        std=float(statistics.pstdev(samples)) if len(samples) > 1 else 0.0,
        min=float(min(samples)),
        max=float(max(samples)),
    )


def coefficient_of_variation(samples: Sequence[float]) -> float | None:
    """Population standard deviation / mean (as TVM's ``time_evaluator`` reports the spread); None for
    fewer than two samples or a mean that is not above 0."""
    if len(samples) < 2:
        return None
    mean = float(np.mean(samples))
    return float(np.std(samples)) / mean if mean > 0 else None


def quartiles(samples: Sequence[float]) -> tuple[float, float] | None:
    """(first, third) quartile, linearly interpolated (NumPy's default); None for no samples."""
    if not len(samples):
        return None
    q1, q3 = np.percentile(np.asarray(samples, dtype=np.float64), [25, 75])
    return float(q1), float(q3)


def sample_stats(samples: Sequence[float | None]) -> SampleStats | None:
    """None for no samples (missing and non-finite ones are left out); a single sample has zero spread."""
    x = [float(s) for s in samples if s is not None and np.isfinite(s)]
    q = quartiles(x)
    if q is None:
        return None
    q1, q3 = q
    iqr = q3 - q1
    outliers = sum(1 for s in x if s < q1 - 1.5 * iqr or s > q3 + 1.5 * iqr)
    return SampleStats(len(x), float(statistics.median(x)), iqr, coefficient_of_variation(x) or 0.0, outliers)


def bootstrap_median_ci(
    values: Sequence[float], *, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """A percentile-bootstrap confidence interval of the median of ``values`` (None with fewer than 2).

    Used on per-process medians: the processes are the independent units (samples within one process
    share its heap, its clocks and its neighbours), so they are what is resampled. With few processes
    the interval is wide, as it should be: three processes only say the figure lies about within them.
    Seeded, so that the same figures always give the same interval."""
    data = [float(v) for v in values if v is not None]
    if len(data) < 2:
        return None
    rng = random.Random(seed)
    n = len(data)
    meds = sorted(statistics.median(rng.choices(data, k=n)) for _ in range(resamples))
    lo = meds[int((1 - level) / 2 * (resamples - 1))]
    hi = meds[int((1 + level) / 2 * (resamples - 1))]
    return lo, hi


def positive_finite(x: object) -> TypeGuard[float]:
    """A number above 0 that is not NaN or infinite (a usable latency or prediction); False for None."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0

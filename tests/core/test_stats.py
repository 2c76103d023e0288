"""A trial's sample statistics: one implementation each, the figures the store and the CLI state."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from tunelab.core.stats import coefficient_of_variation, median, quartiles, sample_stats


def test_median_is_the_stores_latency():
    samples = [0.1, 0.7, 0.3, 0.2]
    assert median(samples) == statistics.median(samples) and median([]) is None
    assert sample_stats(samples).median == median(samples)


def test_spread():
    samples = [1.0, 2.0, 3.0, 4.0, 50.0]
    cv = coefficient_of_variation(samples)
    assert cv == pytest.approx(np.std(samples) / np.mean(samples))
    assert coefficient_of_variation([1.0]) is None and coefficient_of_variation([0.0, 0.0]) is None
    q1, q3 = quartiles(samples)
    assert (q1, q3) == (2.0, 4.0) and quartiles([]) is None
    stats = sample_stats([*samples, None, math.nan])  # missing and non-finite samples are left out
    assert (stats.n, stats.iqr, stats.cv, stats.outliers) == (5, 2.0, cv, 1)
    one = sample_stats([2.0])
    assert (one.n, one.median, one.iqr, one.cv, one.outliers) == (1, 2.0, 0.0, 0.0, 0)
    assert sample_stats([]) is None and sample_stats([None]) is None

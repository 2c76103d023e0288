"""The spread decomposition of tests/benchmarks/process_spread.py (issue 28's firmer yardstick): Tukey's
median polish finds the process factors planted in a kernel x process table, and a low quantile of a
kernel's processes is the more precise estimator when the slowdowns are one-sided episodes."""

from __future__ import annotations

import math
import random

import pytest
from benchmarks.process_spread import decompose, estimate, median_polish, split_half


def _result(kernels: int, factors: list[float], noise: float, episode: float, seed: int) -> dict:
    """A remeasure_bests result: each kernel's figure times its process's factor, lognormal noise, and
    with probability ``episode`` a one-sided slowdown of 1.3-2.2x (a core slowed for a while)."""
    rng = random.Random(seed)
    rows = []
    for k in range(kernels):
        base = rng.uniform(1.0, 20.0)
        per_run = []
        for run, factor in enumerate(factors):
            slow = rng.uniform(1.3, 2.2) if rng.random() < episode else 1.0
            ms = base * factor * slow * math.exp(rng.gauss(0.0, noise))
            per_run.append(
                {"run": run, "position": (k + run) % kernels, "t0": run * 100.0 + k, "median_ms": ms}
            )
        rows.append({"db": "planted.sqlite", "trial_id": k, "per_run": per_run})
    return {"rows": rows}


def test_median_polish_recovers_a_planted_two_way_table():
    rows, cols = [0.0, 1.0, -2.0, 0.5], [0.0, 0.3, -0.1]
    cells = {(k, r): 5.0 + a + b for k, a in enumerate(rows) for r, b in enumerate(cols)}
    overall, row_fx, col_fx, resid = median_polish(cells)
    for (k, r), v in cells.items():
        assert overall + row_fx[k] + col_fx[r] == pytest.approx(v)
    assert max(abs(x) for x in resid.values()) < 1e-9
    # effects are centred on their medians: the differences are the planted ones
    assert col_fx[1] - col_fx[0] == pytest.approx(0.3)
    assert row_fx[2] - row_fx[0] == pytest.approx(-2.0)


def test_decompose_finds_the_process_factors_and_what_is_left():
    factors = [1.0, 1.3, 0.9, 1.1, 1.0, 1.25, 0.95]
    d = decompose(_result(40, factors, noise=0.02, episode=0.0, seed=1))
    found = list(d["process_factors"].values())
    typical = sorted(found)[len(found) // 2]
    planted_typical = sorted(factors)[len(factors) // 2]
    for got, planted in zip(found, factors, strict=True):
        assert got / typical == pytest.approx(planted / planted_typical, rel=0.02)
    assert d["kernel_cv_raw"] > 0.1  # the factors spread each kernel...
    assert d["kernel_cv_left"] < 0.04  # ...and taking them out leaves the planted noise
    assert d["share_of_process"] > 0.9
    # each kernel's figure in a typical process: the planted base times the typical factor
    assert len(d["adjusted_ms"]) == 40


def test_the_process_explains_nothing_where_none_was_planted():
    d = decompose(_result(40, [1.0] * 7, noise=0.05, episode=0.0, seed=2))
    assert d["share_of_process"] < 0.2
    assert d["kernel_cv_left"] == pytest.approx(d["kernel_cv_raw"], rel=0.3)


def test_estimators():
    values = [10.0, 12.0, 11.0, 30.0, 10.5]
    assert estimate(values, "median") == 11.0
    assert estimate(values, "min") == 10.0
    # the 10th percentile interpolates between the two fastest (rank 0.4 of 0..4)
    assert estimate(values, "q10") == pytest.approx(10.0 + 0.4 * 0.5)
    assert estimate(values, "q25") == pytest.approx(10.5)


def test_a_low_quantile_is_more_precise_than_the_median_under_one_sided_episodes():
    again = _result(30, [1.0] * 28, noise=0.01, episode=0.3, seed=3)
    precision = split_half(again, draws=40)
    assert precision["q10"] < 0.8 * precision["median"]
    # without episodes, every estimator is about as good as the noise allows
    calm = split_half(_result(30, [1.0] * 28, noise=0.01, episode=0.0, seed=4), draws=40)
    assert max(calm.values()) < 0.02

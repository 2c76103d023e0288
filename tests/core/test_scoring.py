"""The scoring math (tunelab.core.search.scoring) pinned against brute force and Monte-Carlo."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tunelab.core.search.scoring import (
    aggregate,
    best_so_far,
    exhaustive_baseline,
    expected_random_best,
    sampled_baseline,
    score_curve,
    score_runs,
)


def brute_force(values: list[float | None], t: int) -> float:
    """The mean over every t-subset of the table of its best (the worst working value if all failed)."""
    ok = [v for v in values if v is not None]
    bests = []
    for subset in itertools.combinations(values, t):
        found = [v for v in subset if v is not None]
        bests.append(min(found) if found else max(ok))
    return float(np.mean(bests))


def issue_formula(values: list[float], t: int) -> float:
    """sum_i v_i C(N-i, t-1) / C(N, t) with exact binomials (no failures)."""
    v = sorted(values)
    n = len(v)
    return sum(v[i - 1] * math.comb(n - i, t - 1) for i in range(1, n + 1)) / math.comb(n, t)


@pytest.mark.parametrize(
    "values",
    [
        [3.0, 1.0, 2.0, 5.0, 4.0, 9.0, 7.0],
        [2.0, 2.0, 1.0, 1.0, 3.0, 2.0],  # ties, the optimum twice
        [4.0, None, 1.5, None, 2.5, 8.0, None, 3.0],  # failures use up draws
        [None, None, None, 6.0],  # one working config among failures
        [5.0],
    ],
)
def test_expected_best_equals_brute_force(values):
    curve = expected_random_best(values)
    assert len(curve) == len(values)
    for t in range(1, len(values) + 1):
        assert curve[t - 1] == pytest.approx(brute_force(values, t), rel=1e-12)


def test_expected_best_equals_the_binomial_formula_at_size():
    rng = np.random.default_rng(3)
    values = list(rng.lognormal(0.0, 0.6, size=300))
    curve = expected_random_best(values, budget=120)
    for t in (1, 2, 7, 60, 120):
        assert curve[t - 1] == pytest.approx(issue_formula(values, t), rel=1e-10)
    assert curve[0] == pytest.approx(np.mean(values), rel=1e-12)  # one draw: the table's mean
    assert np.all(np.diff(curve) <= 1e-15)  # more draws never do worse
    full = expected_random_best(values)
    assert full[-1] == pytest.approx(min(values), rel=1e-15)  # t = N: every config drawn


def test_expected_best_matches_monte_carlo_with_failures():
    rng = np.random.default_rng(7)
    values: list[float | None] = [float(x) for x in rng.uniform(1.0, 10.0, size=40)]
    for i in rng.choice(40, size=12, replace=False):
        values[int(i)] = None
    curve = expected_random_best(values, budget=10)
    table = np.array([np.inf if v is None else v for v in values])
    worst = max(v for v in values if v is not None)
    draws = np.array([rng.permutation(table)[:10] for _ in range(40_000)])
    mc = np.minimum(np.minimum.accumulate(draws, axis=1), worst).mean(axis=0)
    se = np.minimum(np.minimum.accumulate(draws, axis=1), worst).std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(curve - mc) < 5 * se + 1e-12), (curve, mc)


def test_a_table_without_working_configs_or_a_bad_budget_is_refused():
    with pytest.raises(ValueError, match="no working config"):
        expected_random_best([None, None])
    with pytest.raises(ValueError, match="budget"):
        expected_random_best([1.0, 2.0], budget=3)


def test_best_so_far_fills_before_the_first_success_and_holds_after_the_last_trial():
    assert list(best_so_far([None, 3.0, 5.0, 1.0, None], fill=9.0)) == [9.0, 3.0, 3.0, 1.0, 1.0]
    assert list(best_so_far([2.0, 1.0], fill=9.0, budget=4)) == [2.0, 1.0, 1.0, 1.0]
    assert list(best_so_far([], fill=9.0, budget=2)) == [9.0, 9.0]


def table(n: int = 50, seed: int = 0) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).lognormal(0.0, 0.5, size=n)]


def test_an_oracle_that_finds_the_optimum_first_scores_one():
    values = table()
    baseline = exhaustive_baseline(values, budget=20)
    oracle = sorted(values)  # the optimum first, then anything
    p = score_curve(oracle, baseline, 20)
    assert np.allclose(p, 1.0)
    assert aggregate(p) == pytest.approx(1.0)


def test_the_worst_order_scores_below_zero_and_random_search_about_zero():
    values = table(80, seed=1)
    budget = 16
    baseline = exhaustive_baseline(values, budget)
    assert aggregate(score_curve(sorted(values, reverse=True), baseline, budget)) < -1.0
    rng = np.random.default_rng(11)
    runs = [list(rng.permutation(values)) for _ in range(2000)]
    score = score_runs("random", runs, baseline, budget)
    # P is affine in f_tuner: the mean of many random runs' scores tends to exactly 0.
    assert abs(score.mean) < 0.05, score.mean
    assert score.seeds == 2000 and len(score.curve) == budget and score.std > 0.1
    assert score.mean == pytest.approx(aggregate(np.array(score.curve)), abs=1e-12)


def test_steps_where_random_search_surely_holds_the_optimum_are_left_out():
    values = [1.0, 2.0, 3.0]
    baseline = exhaustive_baseline(values)  # t = 3 = N: f_random = f_opt, 0/0
    p = score_curve([3.0, 1.0, 2.0], baseline, 3)
    assert np.isnan(p[2]) and np.all(np.isfinite(p[:2]))
    # t=1: f_random = 2, tuner 3 -> (2-3)/(2-1) = -1; t=2: f_random = 4/3, tuner 1 -> 1.
    assert p[0] == pytest.approx(-1.0) and p[1] == pytest.approx(1.0)
    assert aggregate(p) == pytest.approx(0.0)
    all_optimal = exhaustive_baseline([1.0, 1.0, 1.0])
    assert np.isnan(aggregate(score_curve([1.0, 1.0, 1.0], all_optimal, 3)))


def test_failures_count_as_draws_in_the_baseline_and_the_tuner():
    values = [None, None, 1.0, 4.0]
    baseline = exhaustive_baseline(values, budget=2)
    assert baseline.fill == 4.0 and baseline.optimum == 1.0
    # t=1: E = (4 + 4 + 1 + 4) / 4 = 3.25; a tuner whose first trial failed holds the fill (4).
    assert baseline.expected_best[0] == pytest.approx(3.25)
    p = score_curve([None, 1.0], baseline, 2)
    assert p[0] == pytest.approx((3.25 - 4.0) / (3.25 - 1.0)) and p[1] == pytest.approx(1.0)


def test_a_sampled_baseline_is_the_random_runs_own_best_so_far():
    baseline = sampled_baseline([5.0, None, 3.0, 4.0, 2.0], optimum=1.0, fill=6.0)
    assert baseline.source == "sampled" and baseline.expected_best == (5.0, 5.0, 3.0, 3.0, 2.0)
    p = score_curve([2.0, 1.0], baseline, 5)  # at the optimum from trial 2 on
    assert p[0] == pytest.approx(3.0 / 4.0) and np.allclose(p[1:], 1.0)
    with pytest.raises(ValueError, match="budget"):
        score_curve([2.0], baseline, 6)

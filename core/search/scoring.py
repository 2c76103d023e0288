"""Tuners scored as the field scores them: Willemsen et al., FGCS 2024 (doi 10.1016/j.future.2024.05.021).

A tuner's best-so-far curve f_tuner(t) is set against two references on the same space: the optimum
f_opt and random search f_random(t). The score at step t is

    P(t) = (f_random(t) - f_tuner(t)) / (f_random(t) - f_opt)

so 1 means the tuner already holds the optimum, 0 means it does as well as random search, and below 0
it does worse. Its mean over the budget (t = 1..T) is the aggregate score; P(t) is affine in
f_tuner(t), so the mean over seeds of the scores equals the score of the seeds' mean curve.

f_random(t) is *calculated* where every config of the space has been measured (an exhaustive table):
the exact expectation of random search without replacement, not a sample of it. Where the space is not
exhaustive, a random-search session's own best-so-far stands in for it (sampled, one run of noise).

Failed configs (None) are drawn like any other, using up a draw, and are never the best. Until a search
has found one working config its best-so-far counts as ``fill``, the worst working latency of the
table: on the exhaustive table that is exactly "failures are +inf, and a run of only failures scores as
the worst config", and it keeps every f finite, so P(t) is defined from t = 1.

P(t) is undefined where random search is certain to hold the optimum already (f_random(t) = f_opt, e.g.
t = N): such steps are NaN and left out of the mean. Pure NumPy: no TVM, no store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Where f_random(t) - f_opt is below this fraction of f_opt, random search holds the optimum up to
# float rounding: P(t) would be 0/0 there.
_UNDEFINED_RTOL = 1e-9


@dataclass(frozen=True)
class RandomBaseline:
    """f_random(t) for t = 1..len(expected_best), with the optimum and fill it was computed against."""

    expected_best: tuple[float, ...]
    optimum: float  # f_opt: the best latency of the table (or the best known, for a sampled baseline)
    fill: float  # the best-so-far of a search that has found nothing working yet
    source: str  # "exhaustive": calculated on the whole table; "sampled": a random-search run
    n_configs: int | None = None  # the table's size (exhaustive only)

    @property
    def budget(self) -> int:
        return len(self.expected_best)


@dataclass(frozen=True)
class TunerScore:
    """A tuner's score over one budget and several seeds (its runs)."""

    tuner: str
    budget: int
    seeds: int
    mean: float  # the aggregate: mean over t = 1..budget of P(t), averaged over the seeds
    std: float  # the spread of the per-seed aggregates (0 for one seed)
    per_seed: tuple[float, ...]
    curve: tuple[float, ...]  # mean P(t) over the seeds, t = 1..budget (NaN where undefined)


def _ok_values(values: Sequence[float | None]) -> np.ndarray:
    return np.array([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)


def expected_random_best(values: Sequence[float | None], budget: int | None = None) -> np.ndarray:
    """E[best after t draws] of random search without replacement on the table `values`, t = 1..budget
    (default: all N); failures (None) fill as described in the module docstring.

    With v_1 <= ... <= v_N sorted, E = sum_i v_i C(N-i, t-1) / C(N, t). It is computed as the
    equivalent tail sum E = v_1 + sum_k (v_{k+1} - v_k) q_k(t), q_k(t) = C(N-k, t) / C(N, t) the chance
    that none of the k best is drawn, kept as a running product over t: every term is a non-negative
    gap times a probability in [0, 1], so nothing overflows or cancels at any N.
    """
    n = len(values)
    ok = _ok_values(values)
    if not len(ok):
        raise ValueError("the table has no working config: random search has nothing to find")
    budget = n if budget is None else budget
    if not 1 <= budget <= n:
        raise ValueError(f"budget {budget} is outside 1..{n} (the table's size)")
    # Failures sort after every working config with the worst working value: they can never be the
    # best unless everything drawn failed, and then the best-so-far is the fill.
    v = np.concatenate([np.sort(ok), np.full(n - len(ok), ok.max())])
    gaps = np.diff(v)  # v_{k+1} - v_k for k = 1..N-1
    k = np.arange(1, n, dtype=np.float64)
    q = np.ones(n - 1)  # q_k(0) = 1
    out = np.empty(budget)
    for t in range(1, budget + 1):
        # q_k(t) = q_k(t-1) * (N-k-(t-1)) / (N-(t-1)): the t-th draw also misses the k best.
        q *= np.clip(n - k - (t - 1), 0.0, None) / (n - (t - 1))
        out[t - 1] = v[0] + float(gaps @ q)
    return out


def best_so_far(latencies: Sequence[float | None], fill: float, budget: int | None = None) -> np.ndarray:
    """A search's best-so-far after each of its trials (`fill` until one works), t = 1..budget.

    A search that stopped before the budget (it ran out of space) keeps its last best to the end."""
    lat = np.array([np.inf if v is None else v for v in latencies], dtype=np.float64)
    budget = len(lat) if budget is None else budget
    if not len(lat):
        return np.full(budget, fill)
    best = np.minimum(np.minimum.accumulate(lat), fill)[:budget]
    if len(best) < budget:
        best = np.concatenate([best, np.full(budget - len(best), best[-1])])
    return best


def exhaustive_baseline(values: Sequence[float | None], budget: int | None = None) -> RandomBaseline:
    """The calculated random-search reference on a table holding every config of a space."""
    ok = _ok_values(values)
    curve = expected_random_best(values, budget)
    return RandomBaseline(
        expected_best=tuple(float(x) for x in curve),
        optimum=float(ok.min()),
        fill=float(ok.max()),
        source="exhaustive",
        n_configs=len(values),
    )


def sampled_baseline(
    random_latencies: Sequence[float | None], optimum: float, fill: float, budget: int | None = None
) -> RandomBaseline:
    """A random-search run's own best-so-far as the reference where the space was not measured whole.

    `optimum` is the best latency known on the space (every compared session's best), `fill` the worst
    working one: the same two must be used for every tuner scored against it."""
    curve = best_so_far(random_latencies, fill, budget)
    return RandomBaseline(
        expected_best=tuple(float(x) for x in curve), optimum=optimum, fill=fill, source="sampled"
    )


def score_curve(latencies: Sequence[float | None], baseline: RandomBaseline, budget: int) -> np.ndarray:
    """P(t) for t = 1..budget of one search's trials (in measurement order) against `baseline`."""
    if not 1 <= budget <= baseline.budget:
        raise ValueError(f"budget {budget} is outside 1..{baseline.budget} (the baseline's length)")
    f_random = np.array(baseline.expected_best[:budget])
    f_tuner = best_so_far(latencies, baseline.fill, budget)
    room = f_random - baseline.optimum
    defined = room > _UNDEFINED_RTOL * abs(baseline.optimum)
    out = np.full(budget, np.nan)
    out[defined] = (f_random[defined] - f_tuner[defined]) / room[defined]
    return out


def aggregate(curve: np.ndarray) -> float:
    """Willemsen's aggregate: the mean of P(t) over the budget (undefined steps left out; NaN if all are)."""
    defined = curve[np.isfinite(curve)]
    return float(defined.mean()) if len(defined) else float("nan")


def score_runs(
    tuner: str, runs: Sequence[Sequence[float | None]], baseline: RandomBaseline, budget: int
) -> TunerScore:
    """A tuner's score over several runs (one per seed), each its trials' latencies in order."""
    if not runs:
        raise ValueError("no runs to score")
    curves = np.array([score_curve(run, baseline, budget) for run in runs])
    per_seed = [aggregate(c) for c in curves]
    with np.errstate(invalid="ignore"):
        mean_curve = curves.mean(axis=0)  # NaN steps are NaN in every run: they depend on the baseline only
    return TunerScore(
        tuner=tuner,
        budget=budget,
        seeds=len(runs),
        mean=float(np.mean(per_seed)),
        std=float(np.std(per_seed)),
        per_seed=tuple(per_seed),
        curve=tuple(float(x) for x in mean_curve),
    )

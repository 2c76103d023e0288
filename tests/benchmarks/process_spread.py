"""Where the spread between fresh processes comes from: the process as a whole, or each kernel alone.

``remeasure_bests.py`` times many kernels in the same fresh processes, each process every kernel once.
One kernel's medians in different processes lay apart by CV 15 % in median. If that were the process's
(every kernel in process 3 slower, as a busy host would make it), dividing each figure by its process's
factor would leave little, and kernels could be ranked far more finely than their raw CVs allow; if it
is each kernel's own, nothing can be taken out. Tukey's median polish on the logarithms separates the
two: log(ms of kernel k in process r) = overall + kernel_k + process_r + residual, robust to the odd
outlier. The residuals in a process's time order show whether what is left moves with time inside a
process (neighbours alike: the machine's minutes) or not.

    python tests/benchmarks/process_spread.py [RESULT.json ...]   # default: every *_remeasured.json
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MAD_TO_SD = 1.4826  # a normal distribution's standard deviation over its median absolute deviation


def median_polish(
    cells: dict[tuple[int, int], float], sweeps: int = 20
) -> tuple[float, dict[int, float], dict[int, float], dict[tuple[int, int], float]]:
    """Tukey's median polish of a two-way table with missing cells: (overall, row effects, column
    effects, residuals), with cell = overall + row + column + residual and each effect's median 0."""
    row_fx = dict.fromkeys(sorted({k for k, _ in cells}), 0.0)
    col_fx = dict.fromkeys(sorted({r for _, r in cells}), 0.0)
    overall = 0.0
    resid = dict(cells)
    for _ in range(sweeps):
        overall += _sweep(resid, row_fx, 0)
        overall += _sweep(resid, col_fx, 1)
    return overall, row_fx, col_fx, resid


def _sweep(resid: dict[tuple[int, int], float], effects: dict[int, float], axis: int) -> float:
    """One half-sweep of the polish along ``axis`` (0: rows, 1: columns): each level's median residual
    moves into its effect, then the effects are centred on their median; the shift, for the overall."""
    for level in effects:
        m = statistics.median(v for key, v in resid.items() if key[axis] == level)
        effects[level] += m
        for key in resid:
            if key[axis] == level:
                resid[key] -= m
    shift = statistics.median(effects.values())
    for level in effects:
        effects[level] -= shift
    return shift


def robust_sd(values: list[float]) -> float:
    centre = statistics.median(values)
    return MAD_TO_SD * statistics.median(abs(v - centre) for v in values)


def lag1_correlation(series: list[list[float]]) -> float | None:
    """The correlation of each value with the next in the same series, pooled over the series."""
    pairs = [(a, b) for s in series for a, b in zip(s, s[1:], strict=False)]
    if len(pairs) < 3:
        return None
    xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else None


def runs_by_kernel(again: dict[str, Any]) -> dict[tuple[str, int], dict[int, dict[str, Any]]]:
    """Each re-measured kernel's figures by process, (store, trial id) -> run -> its ``per_run`` entry: a
    best at two budgets is one kernel; rows without ``per_run`` (re-measured before it was kept) are left
    out."""
    return {
        (row["db"], row["trial_id"]): {m["run"]: m for m in row["per_run"]}
        for row in again["rows"]
        if row.get("per_run")
    }


def decompose(again: dict[str, Any]) -> dict[str, Any]:
    """The spread of a ``remeasure_bests`` result taken apart; the rows need ``per_run`` (kept since
    the decomposition was written)."""
    runs = runs_by_kernel(again)
    kernels = {key: k for k, key in enumerate(runs)}  # (store, trial id) -> row number
    cells: dict[tuple[int, int], float] = {}
    when: dict[tuple[int, int], float] = {}
    for key, by_run in runs.items():
        for run, m in by_run.items():
            cells[(kernels[key], run)] = math.log(m["median_ms"])
            when[(kernels[key], run)] = m["t0"]
    if not cells:
        raise SystemExit("no per-process figures in this result: re-measure it with remeasure_bests.py")
    overall, kernel_fx, process_fx, resid = median_polish(cells)
    # each kernel's own spread before and after taking out its processes' factors (robust, as a CV)
    raw_sd, left_sd = [], []
    for k in kernel_fx:
        mine = [(r, v) for (kk, r), v in cells.items() if kk == k]
        if len(mine) >= 3:
            raw_sd.append(robust_sd([v for _, v in mine]))
            left_sd.append(robust_sd([v - process_fx[r] for r, v in mine]))
    in_time = [
        [resid[key] for key in sorted((key for key in resid if key[1] == r), key=lambda key: when[key])]
        for r in process_fx
    ]
    total = [v - overall - kernel_fx[k] for (k, _), v in cells.items()]
    resid_sd = robust_sd(list(resid.values()))
    return {
        "kernels": len(kernel_fx),
        "processes": len(process_fx),
        # exp(effect): a process's kernels all ran this many times their typical figure
        "process_factors": {r: math.exp(v) for r, v in sorted(process_fx.items())},
        "kernel_cv_raw": statistics.median(raw_sd),
        "kernel_cv_left": statistics.median(left_sd),
        # robust SDs, so a process factor of nothing can read a little below 0: none, then
        "share_of_process": max(0.0, 1 - (resid_sd / robust_sd(total)) ** 2),
        "residual_sd": resid_sd,
        "residual_lag1": lag1_correlation(in_time),
        # each kernel's figure in a typical process: exp(overall + kernel effect), by (store, trial)
        "adjusted_ms": {key: math.exp(overall + kernel_fx[k]) for key, k in kernels.items()},
    }


ESTIMATORS = ("median", "q25", "q10", "min")  # of a kernel's per-process medians


def estimate(values: list[float], kind: str) -> float:
    """A kernel's figure from its processes' medians: their median, a low quantile, or the fastest.
    The slowdowns that move it here are one-sided (nothing runs a kernel faster than the machine can),
    so a low quantile estimates the undisturbed figure where the median takes in the disturbed share."""
    ordered = sorted(values)
    if kind == "median":
        return statistics.median(ordered)
    if kind == "min":
        return ordered[0]
    fraction = {"q25": 0.25, "q10": 0.10}[kind]
    at = fraction * (len(ordered) - 1)  # linear interpolation between the closest ranks
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def split_half(again: dict[str, Any], draws: int = 200, seed: int = 0) -> dict[str, float]:
    """How well each estimator agrees with itself: the processes split at random into two halves, each
    kernel estimated from either half; the robust SD of log(half A / half B) over kernels and draws,
    divided by sqrt(2), is one half's precision (as a CV). Kernels lacking a process are left out."""
    import random

    per_kernel = [
        {run: m["median_ms"] for run, m in by_run.items()} for by_run in runs_by_kernel(again).values()
    ]
    runs = sorted({r for v in per_kernel for r in v})
    complete = [v for v in per_kernel if all(r in v for r in runs)]
    rng = random.Random(seed)
    found = {}
    for kind in ESTIMATORS:
        logs = []
        draw = random.Random(rng.random())
        for _ in range(draws):
            order = runs[:]
            draw.shuffle(order)
            a, b = order[: len(order) // 2], order[len(order) // 2 : 2 * (len(order) // 2)]
            for v in complete:
                logs.append(math.log(estimate([v[r] for r in a], kind) / estimate([v[r] for r in b], kind)))
        found[kind] = robust_sd(logs) / math.sqrt(2)
    return found


def sentence(name: str, d: dict[str, Any]) -> str:
    factors = list(d["process_factors"].values())
    lag = d["residual_lag1"]
    return (
        f"{name}: {d['kernels']} kernels x {d['processes']} processes. Process factors "
        f"{min(factors):.3f}-{max(factors):.3f} (every kernel of a process slower or faster together); "
        f"a kernel's spread between processes CV {d['kernel_cv_raw']:.1%} raw, {d['kernel_cv_left']:.1%} "
        f"with its processes' factors taken out (median over kernels); the process explains "
        f"{d['share_of_process']:.0%} of the variance; what is left, next to the kernel timed after it in "
        f"the same process: correlation {'-' if lag is None else f'{lag:+.2f}'}"
    )


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(RESULTS.glob("*_remeasured.json"))
    for path in paths:
        again = json.loads(path.read_text())
        if not any(r.get("per_run") for r in again["rows"]):
            print(f"{path.name}: no per-process figures (re-measured before they were kept)")
            continue
        print(sentence(path.name, decompose(again)))
        halves = split_half(again)
        n = len({m["run"] for r in again["rows"] for m in r.get("per_run", ())}) // 2
        print(
            f"  each estimator from {n} processes, against itself from {n} others (CV): "
            + ", ".join(f"{k} {v:.1%}" for k, v in halves.items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The xgb tuner's two losses against each other (`--tuner-option loss=reg|rank`), on recorded spaces.

Each recorded exhaustive space (tests/core/data/*_grid_llvm.json: real CPU measurements of every config)
is searched by the xgb tuner with each loss, once per seed, through the replay runner, and scored as
test_tuner_scores scores (mean P over the first T trials against random search of the same table:
1 = the optimum from the first trial, 0 = random) and by the best found relative to the optimum. The
default loss is the one with the higher mean P over the spaces at T = 64 (BENCHMARKS.md). Run:

    QT_QPA_PLATFORM=offscreen python -m pytest tests/benchmarks/test_xgb_loss.py -q -s
"""

from __future__ import annotations

import time

import numpy as np
from recorded_spaces import load_recorded, recording_names

from tunelab.core.search.costmodel import LOSSES
from tunelab.core.search.scoring import exhaustive_baseline, score_runs
from tunelab.core.search.tuners.registry import get_tuner_class, make_tuner
from tunelab.core.session.replay import ReplayRunner, replay_tune

SEEDS = 10
BUDGET = 64
BATCH = 8
POOL = 64  # as test_tuner_scores: a candidate's features build its schedule


def run(rec, loss: str, seed: int) -> list[float | None]:
    tuner = make_tuner("xgb", rec.space, seed=seed, loss=loss, pool_size=POOL)
    history = replay_tune(tuner, ReplayRunner(rec.space, rec.table), BUDGET, batch=BATCH)
    assert len({rec.space.key(o.config) for o in history}) == len(history) == BUDGET
    return [o.latency_ms for o in history]


def test_xgb_loss():
    lines = [
        "| space | loss | mean P, T = 64 | best found / optimum (median, worst) | s |",
        "|---|---|---|---|---|",
    ]
    means: dict[str, list[float]] = {loss: [] for loss in LOSSES}
    for name in recording_names():
        rec = load_recorded(name)
        baseline = exhaustive_baseline(list(rec.table.values()), BUDGET)
        for loss in LOSSES:
            started = time.perf_counter()
            runs = [run(rec, loss, seed) for seed in range(SEEDS)]
            seconds = time.perf_counter() - started
            score = score_runs(loss, runs, baseline, BUDGET)
            ratios = [min(v for v in r if v is not None) / baseline.optimum for r in runs]
            means[loss].append(score.mean)
            lines.append(
                f"| {name} ({len(rec.table)} configs) | {loss} | {score.mean:+.2f} ± {score.std:.2f} | "
                f"{np.median(ratios):.3f}, {max(ratios):.3f} | {seconds:.0f} |"
            )
            print(lines[-1], flush=True)
    overall = {loss: float(np.mean(m)) for loss, m in means.items()}
    print("\n".join(lines))
    print("mean over the spaces:", {k: round(v, 3) for k, v in overall.items()})
    best = max(overall, key=lambda loss: overall[loss])
    # The default is what this measurement chose (BENCHMARKS.md quotes the table).
    assert get_tuner_class("xgb").default_options["loss"] == best, overall

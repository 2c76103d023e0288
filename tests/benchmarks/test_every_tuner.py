"""Every tuner that loads here, old and new, on the recorded exhaustive spaces: 3 seeds, 64 trials.

The replay and the score of test_tuner_scores (mean P over the first T trials against random search of
the same table, tunelab.core.search.scoring), plus the best found: relative to the table's optimum and
to the best any tuner found in the run. MetaSchedule's evolutionary search is left to test_tuner_scores
(one seed there: a replay of it takes minutes). Options are each tuner's defaults, except the candidate
pools of xgb (64, as test_tuner_scores). Run:

    QT_QPA_PLATFORM=offscreen python -m pytest tests/benchmarks/test_every_tuner.py -q -s

(TUNELAB_BENCH_SEEDS=10 for ten seeds.)
"""

from __future__ import annotations

import os

import numpy as np
from recorded_spaces import load_recorded, recording_names
from tuner_replays import replay_every_tuner

from tunelab.core.search.scoring import exhaustive_baseline, score_runs

SEEDS = int(os.environ.get("TUNELAB_BENCH_SEEDS", "3"))  # 3 by default: the run takes under a minute here
BUDGETS = (16, 32, 64)
BATCH = 8


def test_every_tuner():
    head = [
        "space",
        "tuner",
        *[f"P, T = {b}" for b in BUDGETS],
        "best / optimum (median, worst)",
        "best / best of all",
        "s",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    skipped = []
    for space_name in recording_names():
        rec = load_recorded(space_name)
        baseline = exhaustive_baseline(list(rec.table.values()), max(BUDGETS))
        found, left_out = replay_every_tuner(rec, SEEDS, max(BUDGETS), BATCH)
        skipped += left_out
        best_of_all = min(min(v for v in run if v is not None) for runs, _ in found.values() for run in runs)
        for name, (runs, seconds) in found.items():
            bests = [min(v for v in run if v is not None) for run in runs]
            scores = [score_runs(name, runs, baseline, b).mean for b in BUDGETS]
            row = [
                f"{space_name} ({len(rec.table)})",
                name,
                *[f"{s:+.2f}" for s in scores],
                f"{np.median(bests) / baseline.optimum:.3f}, {max(bests) / baseline.optimum:.3f}",
                f"{np.median(bests) / best_of_all:.3f}",
                f"{seconds:.0f}",
            ]
            lines.append("| " + " | ".join(row) + " |")
            print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    print("left out:", "; ".join(sorted(set(skipped))))

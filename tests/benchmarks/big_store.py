"""Builds the benchmarks' big store: one real GEMM 512^3 template session holding 100,000 trials.

Everything is written through the real writer API (``tunelab.core.session.loop.create_session`` stores the
session from a real :class:`SessionSpec`; ``Store.add_trial`` stores each trial with its samples,
``Store.add_round`` each round), on one writing connection, exactly as a tuning session would.

GEMM 512^3's default CPU template has 16,464 configs (7^3 tiles x 3 orders x 4 unroll steps x
vectorize x parallel); a session never measures a config twice, so 100,000 trials need a bigger
space. The session uses an edited template (what the space editor produces): every divisor of
512 as a tile (10^3) and nine unroll steps: 10^3 x 3 x 9 x 2 x 2 = 108,000 configs.

Run as a script to build one and print how long it took:
``python tests/benchmarks/big_store.py /tmp/big.sqlite``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from tunelab.core.records import MeasureOptions, NewTrial, SessionSpec
from tunelab.core.search.space.base import config_key
from tunelab.core.store import Store

N_TRIALS = 100_000
BATCH = 64
SEED = 20240501
FAILED_FRACTION = 0.03  # a few percent of the trials fail (build, run, timeout, wrong result)
PREDICTED_FROM_ROUND = 2  # the cost model predicts once two rounds are measured (as with xgb)
SAMPLES = 3
# Bump when what the builder writes changes: a cached store with another version is rebuilt.
BUILD_VERSION = 1

TILES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
UNROLL = [0, 8, 16, 32, 64, 128, 256, 512, 1024]
ORDERS = ["ro,si,ri", "ro,ri,si", "si,ro,ri"]

FAILURES = (
    (
        "build_error",
        'TVMError: Traceback (most recent call last):\n  File "tvm/driver/build_module.py", '
        "line 241, in build\nInternalError: Check failed: (extent > 0) is false: split produced an empty loop",
    ),
    (
        "run_error",
        "RuntimeError: Traceback (most recent call last):\n  LocalRunner worker: kernel crashed "
        "(SIGSEGV) while running the module",
    ),
    ("timeout", "TimeoutError: the run exceeded 30.0 s"),
    (
        "wrong_result",
        "AssertionError: output differs from the NumPy reference: max |error| 3.2e-01 at (17, 402)",
    ),
)


def big_spec() -> SessionSpec:
    knobs = [
        {
            "name": f"tile_{axis}",
            "type": "split",
            "axis": axis,
            "parts": 2,
            "candidates": [[t] for t in TILES],
        }
        for axis in ("i", "j", "k")
    ]
    knobs += [
        {"name": "order", "type": "order", "candidates": list(ORDERS)},
        {"name": "unroll", "type": "choice", "candidates": list(UNROLL)},
        {"name": "vectorize", "type": "choice", "candidates": [True, False]},
        {"name": "parallel", "type": "choice", "candidates": [True, False]},
    ]
    return SessionSpec(
        workload="gemm",
        shape={"M": 512, "N": 512, "K": 512},
        target="llvm",
        space_kind="template",
        space={"kind": "template", "knobs": knobs},
        tuner="xgb",
        trials=N_TRIALS,
        batch=BATCH,
        seed=SEED,
        measure=MeasureOptions(number=3, repeat=SAMPLES, min_repeat_ms=20),
        name="gemm 512^3 · 100k trials (benchmark)",
    )


def _trials(space, flops: float, rng: np.random.Generator, t0: float):
    """(round, config, status, error, samples, predicted, build_s, run_s, started, finished) per trial."""
    picks = rng.choice(space.size, size=N_TRIALS, replace=False)
    # GEMM 512^3 is 268 MFLOP: ~27 ms at 10 GFLOP/s; tuned schedules are much faster, bad ones slower.
    medians = rng.lognormal(mean=math.log(25.0), sigma=0.9, size=N_TRIALS)
    # Tuning improves over time: later trials are drawn from a faster distribution.
    medians *= np.linspace(1.0, 0.35, N_TRIALS)
    noise = rng.normal(0.0, 0.015, size=(N_TRIALS, SAMPLES))
    predicted_noise = rng.lognormal(0.0, 0.35, size=N_TRIALS)
    failed = rng.random(N_TRIALS) < FAILED_FRACTION
    kinds = rng.integers(len(FAILURES), size=N_TRIALS)
    build_s = rng.uniform(0.15, 0.9, size=N_TRIALS)
    clock = t0
    for i in range(N_TRIALS):
        rnd = i // BATCH
        config = space.point(int(picks[i]))
        run_s = float(medians[i] * 1e-3 * 3 * (SAMPLES + 1) + 0.05)
        started = clock
        clock += float(build_s[i]) + run_s
        if failed[i]:
            status, error = FAILURES[int(kinds[i])]
            samples: tuple[float, ...] = ()
            if status == "wrong_result":  # it ran, so it was timed
                samples = tuple(float(medians[i] * (1 + e)) for e in noise[i])
        else:
            status, error = "ok", None
            samples = tuple(float(medians[i] * (1 + e)) for e in noise[i])
        predicted = float(medians[i] * predicted_noise[i]) if rnd >= PREDICTED_FROM_ROUND else None
        yield rnd, config, status, error, samples, predicted, float(build_s[i]), run_s, started, clock


def build(path: str | os.PathLike[str], progress: bool = False) -> int:
    """Write the big session into a new store at `path`; return its session id."""
    from tunelab.core.search.costmodel import spearman
    from tunelab.core.session.loop import create_session

    path = Path(path)
    store = Store(path)
    try:
        session = create_session(store, big_spec())
        sid = session.session_id
        space = session.space
        assert space.size >= N_TRIALS, space.size
        flops = store.session(sid).flops
        rng = np.random.default_rng(SEED)
        task_id = store.tasks(sid)[0].id
        store.set_status(sid, "running")
        pairs: list[tuple[float, float]] = []
        best: float | None = None
        current_round = 0
        started = time.perf_counter()
        for rnd, config, status, error, samples, predicted, build_s, run_s, t_start, t_end in _trials(
            space, flops, rng, time.time() - 14 * 3600
        ):
            if rnd != current_round:
                rho = spearman([p for p, _ in pairs], [m for _, m in pairs]) if pairs else None
                store.add_round(sid, current_round, BATCH, rho, best)
                pairs, current_round = [], rnd
                if progress and rnd % 200 == 0:
                    print(
                        f"  round {rnd}: {rnd * BATCH} trials in {time.perf_counter() - started:.1f} s",
                        file=sys.stderr,
                    )
            trial = store.add_trial(
                sid,
                NewTrial(
                    round=rnd,
                    config=config,
                    status=status,
                    error=error,
                    samples_ms=samples,
                    predicted_ms=predicted,
                    build_s=build_s,
                    run_s=run_s,
                    started_at=t_start,
                    finished_at=t_end,
                ),
                config_key(config),
                task_id=task_id,
            )
            if trial.ok:
                best = trial.latency_ms if best is None else min(best, trial.latency_ms)
                if predicted is not None:
                    pairs.append((predicted, trial.latency_ms))
        rho = spearman([p for p, _ in pairs], [m for _, m in pairs]) if pairs else None
        store.add_round(sid, current_round, len(pairs) or BATCH, rho, best)
        store.set_status(sid, "finished")
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sid
    finally:
        store.close()


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tunelab-big.sqlite")
    if out.exists():
        out.unlink()
    t = time.perf_counter()
    session_id = build(out, progress=True)
    print(f"built session {session_id} with {N_TRIALS} trials in {time.perf_counter() - t:.1f} s -> {out}")

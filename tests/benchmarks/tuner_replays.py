"""A tuner replayed on a recorded exhaustive space once per seed, for the benchmarks that score tuners."""

from __future__ import annotations

import os
import time
from typing import Any

from tunelab.core.search.tuners.registry import make_tuner, tuner_names, tuner_unavailable
from tunelab.core.session.replay import ReplayRunner, replay_tune


def replay_seeds(
    rec: Any, name: str, seeds: int, budget: int, batch: int, options: dict[str, Any]
) -> list[list[float | None]]:
    """The latencies, in the order measured, of one replay per seed (0 .. seeds - 1) of the tuner ``name``
    (made with ``options``) on the recording ``rec``, up to ``budget`` trials, ``batch`` at a time.

    A tuner that stops short (it found nothing new to ask) has a shorter run; one that measures a config
    twice fails the benchmark."""
    runs = []
    for seed in range(seeds):
        history = replay_one(rec, name, seed, budget, batch, options)
        keys = [rec.space.key(o.config) for o in history]
        assert len(keys) == len(set(keys)), f"{name} measured a config twice"
        runs.append([o.latency_ms for o in history])
    return runs


def replay_one(rec: Any, name: str, seed: int, budget: int, batch: int, options: dict[str, Any]) -> list[Any]:
    """The observations, in the order measured, of one replay of the tuner ``name`` (seed ``seed``, made
    with ``options``) on the recording ``rec``."""
    tuner = make_tuner(name, rec.space, seed=seed, **options)
    try:
        return replay_tune(tuner, ReplayRunner(rec.space, rec.table), budget, batch=batch)
    finally:
        tuner.close()


# What the every-tuner benchmarks replay, and with which options: MetaSchedule's evolutionary search is
# left to test_tuner_scores (a replay of it takes minutes); xgb's candidate pool as test_tuner_scores's.
LEFT_OUT = {"evolutionary": "test_tuner_scores (minutes a replay)"}
FAST_OPTIONS = {"xgb": {"pool_size": 64}}


def replay_every_tuner(
    rec: Any, seeds: int, budget: int, batch: int
) -> tuple[dict[str, tuple[list[list[float | None]], float]], list[str]]:
    """Every tuner that loads here (but LEFT_OUT) replayed on ``rec`` (replay_seeds, FAST_OPTIONS):
    {tuner: (its runs, seconds)}, and why each left-out tuner was left out.

    TUNELAB_BENCH_TUNERS=a,b replays those tuners only, a LEFT_OUT one included (the best of all is then
    theirs: set a row against a whole run's by hand)."""
    named = [n.strip() for n in os.environ.get("TUNELAB_BENCH_TUNERS", "").split(",") if n.strip()]
    found: dict[str, tuple[list[list[float | None]], float]] = {}
    skipped = []
    for name in named or tuner_names():
        why = (None if named else LEFT_OUT.get(name)) or tuner_unavailable(name)
        if why is not None:
            skipped.append(f"{name}: {why}")
            continue
        started = time.perf_counter()
        runs = replay_seeds(rec, name, seeds, budget, batch, FAST_OPTIONS.get(name, {}))
        found[name] = (runs, time.perf_counter() - started)
    return found, skipped

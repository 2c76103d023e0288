"""A tuner replayed on a recorded exhaustive space once per seed, for the benchmarks that score tuners."""

from __future__ import annotations

from typing import Any

from tunelab.core.search.tuners.registry import make_tuner
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
        tuner = make_tuner(name, rec.space, seed=seed, **options)
        try:
            history = replay_tune(tuner, ReplayRunner(rec.space, rec.table), budget, batch=batch)
        finally:
            tuner.close()
        keys = [rec.space.key(o.config) for o in history]
        assert len(keys) == len(set(keys)), f"{name} measured a config twice"
        runs.append([o.latency_ms for o in history])
    return runs

"""Tuning on recorded measurements: a runner that looks latencies up instead of building and running.

Kernel Tuner's simulation mode: with every config of a space measured once (an exhaustive recording,
or a session's trials), a tuner's whole search replays in seconds, repeatably, so tuners can be
compared over many seeds on real data (the benchmark tier does; tests do on small spaces). The loop
is the session's ask -> measure -> tell without the store, the cost of building, or a machine's noise.
"""

from __future__ import annotations

from collections.abc import Iterable

from tunelab.core.records import Config, TrialRecord
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner


class ReplayRunner:
    """Measures a config by looking it up in a table of recorded latencies (None: the trial failed).

    A config missing from the table raises KeyError, or counts as a failed trial with
    `missing_fails=True` (for partial tables from real sessions).
    """

    def __init__(
        self, space: SearchSpace, table: dict[str, float | None], *, missing_fails: bool = False
    ) -> None:
        self.space = space
        self.table = dict(table)
        self.missing_fails = missing_fails
        self.n_measured = 0

    @classmethod
    def from_trials(cls, space: SearchSpace, trials: Iterable[TrialRecord]) -> ReplayRunner:
        """A table from a recorded session's trials (failed trials replay as failures)."""
        table = {space.key(t.config): (t.latency_ms if t.ok else None) for t in trials}
        return cls(space, table, missing_fails=True)

    @property
    def best_ms(self) -> float:
        """The fastest recorded latency: the optimum a search over this table can find."""
        return min(v for v in self.table.values() if v is not None)

    def measure(self, configs: list[Config]) -> list[Observation]:
        out = []
        for config in configs:
            key = self.space.key(config)
            if key not in self.table and not self.missing_fails:
                raise KeyError(f"no recorded measurement for {key}")
            self.n_measured += 1
            out.append(Observation(config=config, latency_ms=self.table.get(key)))
        return out


def replay_tune(tuner: Tuner, runner: ReplayRunner, budget: int, batch: int = 8) -> list[Observation]:
    """The session's ask -> measure -> tell loop on recorded latencies, until the budget or the space
    is spent; the observations in measurement order."""
    history: list[Observation] = []
    while len(history) < budget:
        configs = tuner.ask(min(batch, budget - len(history)))
        if not configs:
            break
        observations = runner.measure(configs)
        tuner.tell(observations)
        history += observations
    return history

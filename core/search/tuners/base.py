"""Ask/tell tuners (Optuna's shape; MetaSchedule's generate_measure_candidates / notify_runner_results).

A tuner proposes configs and learns from their measured latencies. It never builds, runs or stores
anything: the session does that. It must be resumable: the session rebuilds a tuner from the
stored trials (`tell` with all of them in order) plus the last `state_dict`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace


@dataclass(frozen=True)
class Observation:
    config: Config
    latency_ms: float | None  # None: the trial failed (build/run error, wrong result, timeout)


class Tuner(ABC):
    name: ClassVar[str]
    description: ClassVar[str] = ""
    # The options a tuner takes, with their defaults (and so their types); `self.options` holds an
    # instance's resolved values.
    default_options: ClassVar[dict[str, Any]] = {}

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        self.space = space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.cost_model = (
            cost_model  # tunelab.core.search.costmodel.CostModel shared with the session (may be None)
        )
        self.options: dict[str, Any] = options

    @abstractmethod
    def ask(self, n: int) -> list[Config]:
        """Up to n configs to measure next. Fewer (or none) when the space is exhausted."""

    def tell(self, observations: list[Observation]) -> None:  # noqa: B027 - optional hook
        """Learn from measured configs (in measurement order)."""

    def prefetch(self, n: int) -> None:  # noqa: B027 - optional hook
        """Start proposing the next ``n`` configs in the background (the session calls it while a batch
        is measured on a device that this machine's CPU does not disturb); the next ``ask`` returns
        them. Tuners that propose in a moment need not."""

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state needed to resume exactly (beyond the replayed observations)."""
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (worker pools, TVM contexts)."""

"""A genetic algorithm over configs (AutoTVM's GATuner, in ask/tell form).

Generation 0 is random. Each later generation is bred from everything measured so far: the
`elite_num` fastest configs each contribute a mutated child, the rest are crossovers of two
parents chosen (by tournament or roulette on fitness = 1/latency, failed = 0) among the
`pop_size` fittest, each mutated with probability `mutation_prob`. Children that were already
measured or proposed are mutated again, and random configs fill any gap, so nothing repeats.
A generation is bred when the previous one has been handed out, from whatever has been told by
then; the session's batches need not line up with generations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from tunelab.core.errors import TunerError
from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.random_search import AnyOf, SeenSet, draw_unseen, take_unseen
from tunelab.core.search.tuners.registry import resolve_options

_TOURNAMENT = 3
_REMUTATE = 8  # extra mutations tried to turn an already-seen child into a new config


class GeneticTuner(Tuner):
    name = "genetic"
    description = "Genetic algorithm (AutoTVM GATuner): elites, selection, crossover and mutation."
    default_options: ClassVar[dict[str, Any]] = {
        "pop_size": 32,
        "elite_num": 3,
        "mutation_prob": 0.1,
        "selection": "tournament",  # or "roulette"
    }

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = opts = resolve_options(type(self), options)
        self.pop_size = int(opts["pop_size"])
        self.elite_num = int(opts["elite_num"])
        self.mutation_prob = float(opts["mutation_prob"])
        self.selection = str(opts["selection"])
        if self.pop_size < 2:
            raise TunerError(f"genetic: pop_size must be at least 2; got {self.pop_size}")
        if not 0 <= self.elite_num <= self.pop_size:
            raise TunerError(f"genetic: elite_num must be in [0, pop_size]; got {self.elite_num}")
        if not 0.0 <= self.mutation_prob <= 1.0:
            raise TunerError(f"genetic: mutation_prob must be in [0, 1]; got {self.mutation_prob}")
        if self.selection not in ("tournament", "roulette"):
            raise TunerError(f"genetic: selection must be 'tournament' or 'roulette'; got {self.selection!r}")
        self.generation = 0  # generations bred so far
        self._queue: list[Config] = []  # the current generation's configs not yet handed out
        self._seen = SeenSet()
        self._fitness: dict[str, tuple[Config, float]] = {}  # key -> (config, 1/latency or 0)

    def ask(self, n: int) -> list[Config]:
        # A bred config told from elsewhere since it was bred is passed over.
        return take_unseen(self.space, self._generations(), n, self._seen)

    def _generations(self) -> Iterator[Config]:
        """The current generation's configs, then each next one's, bred only when the one before is
        handed out; it ends when a generation comes out empty (the space is exhausted)."""
        while True:
            if not self._queue:
                self._queue = self._breed()
                if not self._queue:
                    return
            yield self._queue.pop(0)

    def tell(self, observations: list[Observation]) -> None:
        for obs in observations:
            key = self.space.key(obs.config)
            self._seen.add(key)
            lat = obs.latency_ms
            fitness = 1.0 / lat if lat is not None and np.isfinite(lat) and lat > 0 else 0.0
            self._fitness[key] = (obs.config, fitness)

    def _breed(self) -> list[Config]:
        self.generation += 1
        ranked = sorted(self._fitness.values(), key=lambda cf: -cf[1])  # stable: ties keep tell order
        parents = [cf for cf in ranked[: self.pop_size] if cf[1] > 0]
        if len(parents) < 2:
            return draw_unseen(self.space, self.rng, self.pop_size, self._seen)

        children: list[Config] = []
        taken: set[str] = set()

        def add(child: Config) -> bool:
            # Re-mutate a child that is not new; give up after a few tries.
            for _ in range(_REMUTATE + 1):
                key = self.space.key(child)
                if key not in self._seen and key not in taken:
                    taken.add(key)
                    children.append(child)
                    return True
                child = self.space.mutate(child, self.rng)
            return False

        for config, _ in parents[: self.elite_num]:
            add(self.space.mutate(config, self.rng))

        fitness = np.array([f for _, f in parents])
        attempts = 0
        while len(children) < self.pop_size and attempts < 4 * self.pop_size:
            attempts += 1
            a = parents[self._select(fitness)][0]
            b = parents[self._select(fitness)][0]
            child = self.space.crossover(a, b, self.rng)
            if self.rng.random() < self.mutation_prob:
                child = self.space.mutate(child, self.rng)
            add(child)

        if len(children) < self.pop_size:
            exclude = AnyOf(self._seen, taken)
            children += draw_unseen(self.space, self.rng, self.pop_size - len(children), exclude)
        return children

    def _select(self, fitness: np.ndarray) -> int:
        if self.selection == "roulette":
            return int(self.rng.choice(len(fitness), p=fitness / fitness.sum()))
        contenders = self.rng.integers(0, len(fitness), size=min(_TOURNAMENT, len(fitness)))
        return int(contenders[np.argmax(fitness[contenders])])

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "generation": self.generation, "queue": list(self._queue)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.generation = int(state.get("generation", 0))
        self._queue = [dict(c) for c in state.get("queue", [])]

"""Random search, and the draw-an-unmeasured-config helper the other tuners share."""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from typing import Any, ClassVar

import numpy as np

from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.registry import resolve_options

# Below this size a space can be enumerated once random draws keep hitting measured configs,
# so a nearly exhausted small space is finished exactly instead of "probably".
ENUMERATE_LIMIT = 100_000


def draw_unseen(space: SearchSpace, rng: np.random.Generator, n: int, seen: Container[str]) -> list[Config]:
    """Up to n distinct random configs whose keys are not in `seen`.

    Rejection-samples first; when that stalls (a nearly exhausted space) and the space is small
    enough, walks the unseen grid points in a random order. Fewer than n only when the space has
    fewer unseen points (or is too big to enumerate and sampling kept colliding).
    """
    return take_unseen(space, _candidates(space, rng, tries=max(64, 16 * n)), n, SeenSet(), exclude=seen)


def take_unseen(
    space: SearchSpace, configs: Iterable[Config], n: int, taken: SeenSet, exclude: Container[str] = ()
) -> list[Config]:
    """Up to n configs from `configs`, in their order, skipping any whose key is in `taken` or `exclude`;
    each one taken is added to `taken`. It pulls no more from `configs` than it needs, so a lazy stream
    (a walk's cursor, a generation being bred) advances only as far as the configs handed out."""
    out: list[Config] = []
    if n <= 0:
        return out
    for config in configs:
        key = space.key(config)
        if key in taken or key in exclude:
            continue
        taken.add(key)
        out.append(config)
        if len(out) == n:
            break
    return out


def _candidates(space: SearchSpace, rng: np.random.Generator, *, tries: int) -> Iterator[Config]:
    """Random draws, then (a small space whose draws kept colliding) every grid point in a random order;
    the permutation is drawn only once the draws are used up."""
    for _ in range(tries):
        yield space.sample(rng)
    if space.size <= ENUMERATE_LIMIT:
        for index in rng.permutation(space.size):
            yield space.point(int(index))


class SeenSet:
    """Keys of every config proposed or told, in first-seen order (never iterate a set: hash order)."""

    def __init__(self) -> None:
        self._keys: dict[str, None] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: str) -> None:
        self._keys[key] = None


class AnyOf:
    """A key is in it when it is in any of the given containers (a union without copying)."""

    def __init__(self, *containers: Container[str]) -> None:
        self._containers = containers

    def __contains__(self, key: object) -> bool:
        return any(key in c for c in self._containers)


class RandomTuner(Tuner):
    name = "random"
    description = "Uniformly random configs, never the same one twice."
    default_options: ClassVar[dict[str, Any]] = {}

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = resolve_options(type(self), options)
        self._seen = SeenSet()

    def ask(self, n: int) -> list[Config]:
        out = draw_unseen(self.space, self.rng, n, self._seen)
        for config in out:
            self._seen.add(self.space.key(config))
        return out

    def tell(self, observations: list[Observation]) -> None:
        for obs in observations:
            self._seen.add(self.space.key(obs.config))

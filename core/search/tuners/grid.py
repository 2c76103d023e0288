"""Exhaustive search: every grid point once, in index order (or a seeded shuffled order)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, ClassVar

from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.random_search import SeenSet, take_unseen
from tunelab.core.search.tuners.registry import resolve_options


class IndexPermutation:
    """A seeded bijection of [0, size) computed per index, so huge spaces need no table.

    A few rounds of an odd-multiplier affine map and an xor-shift (each a bijection on k-bit
    integers, 2**k >= size), cycle-walked until the result falls inside [0, size). Each index
    costs about two rounds on average; Python integers make any size work.
    """

    def __init__(self, size: int, seed: int, rounds: int = 3) -> None:
        if size < 1:
            raise ValueError(f"size must be positive; got {size}")
        self.size = size
        self.bits = max(1, (size - 1).bit_length())
        self.mask = (1 << self.bits) - 1
        self.shift = max(1, self.bits // 2)
        gen = random.Random(seed)
        self.keys = [(gen.getrandbits(self.bits) | 1, gen.getrandbits(self.bits)) for _ in range(rounds)]

    def _round_trip(self, x: int) -> int:
        for mul, add in self.keys:
            x = (x * mul + add) & self.mask
            x ^= x >> self.shift
        return x

    def __call__(self, index: int) -> int:
        if not 0 <= index < self.size:
            raise IndexError(index)
        x = self._round_trip(index)
        while x >= self.size:
            x = self._round_trip(x)
        return x


class GridTuner(Tuner):
    """Walks space.point(0), point(1), ... — in index order, so on a space larger than the budget
    it only ever sees the first corner of the grid. `shuffle=True` walks a seeded permutation of
    the indices instead (a systematic random search that still never repeats)."""

    name = "grid"
    description = "Every config once, in grid order (shuffle=True: a seeded random order)."
    default_options: ClassVar[dict[str, Any]] = {"shuffle": False}

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = resolve_options(type(self), options)
        self.cursor = 0  # the next position in the walk
        self._seen = SeenSet()
        size = space.size
        self._order = IndexPermutation(size, seed) if self.options["shuffle"] and size > 0 else None

    def _index(self, position: int) -> int:
        return self._order(position) if self._order is not None else position

    def ask(self, n: int) -> list[Config]:
        # A config measured already (told from elsewhere, e.g. a resumed session) is passed over.
        return take_unseen(self.space, self._walk(), n, self._seen)

    def _walk(self) -> Iterator[Config]:
        """The configs from the cursor on, moving the cursor past each one as it is handed out."""
        while self.cursor < self.space.size:
            config = self.space.point(self._index(self.cursor))
            self.cursor += 1
            yield config

    def tell(self, observations: list[Observation]) -> None:
        for obs in observations:
            self._seen.add(self.space.key(obs.config))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.cursor = int(state.get("cursor", 0))

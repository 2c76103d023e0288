"""The interface every search space offers to tuners and to the session.

Tuners see a space only through these methods, so one tuner works on both the template
(AutoTVM-style knobs) and the auto (Ansor-style sketches) spaces.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.records import Config, config_key  # config_key: its users import it from here too

if TYPE_CHECKING:
    from tunelab.core.target.info import TargetInfo


def divisors(n: int) -> list[int]:
    """Every divisor of ``n``, ascending: trial division up to sqrt(n), never a walk over the extent."""
    if n < 1:
        return []
    low, high = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            low.append(d)
            if d != n // d:
                high.append(n // d)
    return low + high[::-1]


class SearchSpace(ABC):
    kind: str  # "template" | "auto"
    target: TargetInfo  # what the space's schedules are built for

    def ir_module(self) -> Any:
        """The tvm.IRModule this space schedules: its workload at its shape, as "main"."""
        raise NotImplementedError(f"a {type(self).__name__} has no TVM module")

    def design_space_generator(self) -> Any:
        """A MetaSchedule space generator proposing this space's schedules, for MetaSchedule's own search
        strategies (the evolutionary tuner)."""
        raise NotImplementedError(f"a {type(self).__name__} has no MetaSchedule space generator")

    @property
    @abstractmethod
    def size(self) -> int:
        """Number of distinct configs (may be huge; exact integer)."""

    @abstractmethod
    def point(self, index: int) -> Config:
        """The config at a grid index in [0, size) (mixed-radix order; stable for a given space)."""

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Config:
        """A uniformly random config."""

    @abstractmethod
    def mutate(self, config: Config, rng: np.random.Generator) -> Config:
        """A config that differs from `config` in one knob (a neighbour)."""

    @abstractmethod
    def crossover(self, a: Config, b: Config, rng: np.random.Generator) -> Config:
        """A child config taking each knob from `a` or `b`."""

    def region(self, config: Config) -> int:
        """The part of the space ``config`` lies in that :meth:`mutate` and :meth:`crossover` never leave
        (an auto space's sketch); 0 in a space of one part (a template's)."""
        return 0

    @abstractmethod
    def knob_vector(self, config: Config) -> np.ndarray:
        """A fixed-length float vector of the config's knob values (cheap; for models and distances)."""

    @abstractmethod
    def features(self, configs: list[Config]) -> np.ndarray:
        """Cost-model features, shape (len(configs), d): schedule features of the built IR plus knobs."""

    @abstractmethod
    def schedule(self, config: Config) -> Any:
        """The tvm.s_tir.Schedule for a config (postprocessed, ready to build)."""

    @abstractmethod
    def check_config(self, config: Config) -> None:
        """Raise SpaceError with a clear reason when `config` is not a point of this space."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The space as editable data (what the editor shows and the store keeps)."""

    def key(self, config: Config) -> str:
        return config_key(config)

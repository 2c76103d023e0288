"""Test helpers: a small pure-Python search space and latency tables for the replay runner.

Kernel Tuner's SimulationRunner idea (tunelab.core.session.replay): strategies are tested against a
table of measurements, so every tuner test runs in seconds without TVM. The tables here are a
deterministic, plausible GEMM-like latency surface; `ReplayRunner.from_trials` builds one from a real
recorded session instead.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError
from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace, config_key
from tunelab.core.session.replay import ReplayRunner


class ToySpace(SearchSpace):
    """Named knobs, each with a list of candidate values (ints or strings); configs are
    {knob: value}. Grid order is itertools.product order (the last knob varies fastest)."""

    kind = "template"

    def __init__(self, knobs: dict[str, list[Any]]) -> None:
        if not knobs:
            raise SpaceError("a space needs at least one knob")
        for name, values in knobs.items():
            if not values:
                raise SpaceError(f"knob {name!r} has no candidates")
            if len({config_key({"v": v}) for v in values}) != len(values):
                raise SpaceError(f"knob {name!r} has repeated candidates")
        self.knobs = {name: list(values) for name, values in knobs.items()}
        self.names = list(self.knobs)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def point(self, index: int) -> Config:
        if not 0 <= index < self.size:
            raise SpaceError(f"grid index {index} is outside [0, {self.size})")
        config: Config = {}
        for name in reversed(self.names):
            values = self.knobs[name]
            index, digit = divmod(index, len(values))
            config[name] = values[digit]
        return {name: config[name] for name in self.names}

    def index_of(self, config: Config) -> int:
        index = 0
        for name in self.names:
            values = self.knobs[name]
            index = index * len(values) + values.index(config[name])
        return index

    def sample(self, rng: np.random.Generator) -> Config:
        return {name: values[int(rng.integers(len(values)))] for name, values in self.knobs.items()}

    def mutate(self, config: Config, rng: np.random.Generator) -> Config:
        movable = [name for name in self.names if len(self.knobs[name]) > 1]
        if not movable:
            return dict(config)
        name = movable[int(rng.integers(len(movable)))]
        values = self.knobs[name]
        current = values.index(config[name])
        new = int(rng.integers(len(values) - 1))
        return {**config, name: values[new if new < current else new + 1]}

    def crossover(self, a: Config, b: Config, rng: np.random.Generator) -> Config:
        pick = rng.random(len(self.names)) < 0.5
        return {name: (a if p else b)[name] for name, p in zip(self.names, pick, strict=True)}

    def knob_vector(self, config: Config) -> np.ndarray:
        return np.array([self.knobs[name].index(config[name]) for name in self.names], dtype=np.float64)

    def features(self, configs: list[Config]) -> np.ndarray:
        rows = []
        for config in configs:
            numeric = [
                math.log2(v) if isinstance(v, int) and v > 0 else 0.0 for v in (config[n] for n in self.names)
            ]
            rows.append(np.concatenate([self.knob_vector(config), numeric]))
        return np.array(rows, dtype=np.float64).reshape(len(configs), 2 * len(self.names))

    def schedule(self, config: Config) -> Any:
        raise NotImplementedError("ToySpace has no TVM schedule")

    def check_config(self, config: Config) -> None:
        if not isinstance(config, dict):
            raise SpaceError(f"a config is a dict of knob values; got {type(config).__name__}")
        if set(config) != set(self.names):
            raise SpaceError(f"config knobs {sorted(config)} are not the space's {sorted(self.names)}")
        for name in self.names:
            value = config[name]
            if type(value) not in (int, str) or value not in self.knobs[name]:
                raise SpaceError(f"{value!r} is not a candidate of knob {name!r}: {self.knobs[name]}")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "knobs": {name: list(v) for name, v in self.knobs.items()}}

    def all_configs(self) -> Iterable[Config]:
        for values in itertools.product(*self.knobs.values()):
            yield dict(zip(self.names, values, strict=True))


def tiny_space() -> ToySpace:
    """12 configs."""
    return ToySpace({"tile": [1, 2, 4], "order": ["ij", "ji", "ikj", "jki"]})


TILES = [1, 2, 4, 8, 16, 32, 64]


def gemm_space() -> ToySpace:
    """7 * 7 * 7 * 3 * 4 * 2 = 8232 configs, shaped like a CPU GEMM template."""
    return ToySpace(
        {
            "tile_i": TILES,
            "tile_j": TILES,
            "tile_k": TILES,
            "order": ["ijk", "ikj", "jik"],
            "unroll": [0, 16, 64, 512],
            "vectorize": [0, 1],
        }
    )


def gemm_latency(config: Config, rng: np.random.Generator) -> float | None:
    """A plausible latency surface: each tile best near a sweet spot (8, 16, 4), a best loop order
    and unroll, vectorizing helps only with a wide inner tile, 3% log-normal noise, and tiles too
    big for the cache fail (None), like a kernel that does not build."""
    ti, tj, tk = config["tile_i"], config["tile_j"], config["tile_k"]
    if ti * tj * tk > 8192:
        return None

    def tile(t: int, best: int) -> float:
        return 1.0 + 0.35 * (math.log2(t) - math.log2(best)) ** 2

    ms = 1.0 * tile(ti, 8) * tile(tj, 16) * tile(tk, 4)
    ms *= {"ijk": 1.06, "ikj": 1.0, "jik": 1.5}[config["order"]]
    ms *= {0: 1.25, 16: 1.0, 64: 1.04, 512: 1.4}[config["unroll"]]
    if config["vectorize"]:
        ms *= 0.75 if tj >= 8 else 1.15
    return ms * math.exp(rng.normal(0.0, 0.03))


def replay_from_function(
    space: ToySpace, latency: Callable[[Config, np.random.Generator], float | None], *, seed: int = 0
) -> ReplayRunner:
    """A runner replaying `latency` evaluated once on every config of a toy space."""
    rng = np.random.default_rng(seed)
    return ReplayRunner(space, {space.key(c): latency(c, rng) for c in space.all_configs()})


def tiny_replay() -> tuple[ToySpace, ReplayRunner]:
    space = tiny_space()
    order_ms = {"ij": 1.0, "ji": 1.4, "ikj": 0.8, "jki": 2.0}
    table = {space.key(c): c["tile"] * order_ms[c["order"]] for c in space.all_configs()}
    return space, ReplayRunner(space, table)


def gemm_replay(seed: int = 0) -> tuple[ToySpace, ReplayRunner]:
    space = gemm_space()
    return space, replay_from_function(space, gemm_latency, seed=seed)

"""The xgb tuner on a space of several sketches (``per_sketch``, ``sketch_trials``): the pool and the
batch do not follow the incumbent's sketch alone. On a planted landscape of three sketches, whose
latencies are a function of the config (no TVM): which sketches the model-picked slots of a batch go to,
early and late, and that a space of one part (a template) is searched exactly as before."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.core.replay import gemm_replay
from tunelab.core.records import Config
from tunelab.core.search.costmodel import CostModel
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation
from tunelab.core.search.tuners.registry import make_tuner

DECISIONS, CANDIDATES = 5, 6
BATCH = 8
EXPLOIT = math.ceil(BATCH * (1 - 0.2))  # xgb's model-picked slots of a batch (epsilon 0.2); the rest random


class ThreeSketches(SearchSpace):
    """Three sketches of five decisions with six candidates each; a config is {"sketch", "decisions"} as
    an auto space's. Latency: the sketch's base times exp of a weighted distance to its best decisions."""

    kind = "auto"

    def __init__(self, bases: tuple[float, float, float]) -> None:
        rng = np.random.default_rng(7)
        self.bases = bases
        self.best = rng.integers(0, CANDIDATES, size=(3, DECISIONS))
        self.weights = rng.uniform(0.05, 0.25, size=(3, DECISIONS))

    @property
    def size(self) -> int:
        return 3 * CANDIDATES**DECISIONS

    def point(self, index: int) -> Config:
        sketch, rest = divmod(index, CANDIDATES**DECISIONS)
        return {
            "sketch": sketch,
            "decisions": [(rest // CANDIDATES**i) % CANDIDATES for i in range(DECISIONS)],
        }

    def sample(self, rng: np.random.Generator) -> Config:
        return {
            "sketch": int(rng.integers(3)),
            "decisions": [int(x) for x in rng.integers(0, CANDIDATES, DECISIONS)],
        }

    def mutate(self, config: Config, rng: np.random.Generator) -> Config:
        decisions = list(config["decisions"])
        pos = int(rng.integers(DECISIONS))
        decisions[pos] = int(rng.choice([v for v in range(CANDIDATES) if v != decisions[pos]]))
        return {"sketch": config["sketch"], "decisions": decisions}

    def crossover(self, a: Config, b: Config, rng: np.random.Generator) -> Config:
        return a

    def region(self, config: Config) -> int:
        return int(config["sketch"])

    def knob_vector(self, config: Config) -> np.ndarray:
        return np.array([float(config["sketch"]), *map(float, config["decisions"])])

    def features(self, configs: list[Config]) -> np.ndarray:
        return np.stack([self.knob_vector(c) for c in configs])

    def schedule(self, config: Config) -> Any:
        raise NotImplementedError("a planted landscape builds nothing")

    def check_config(self, config: Config) -> None:
        pass

    def to_json(self) -> dict[str, Any]:
        return {"kind": "auto", "bases": list(self.bases)}

    def latency_ms(self, config: Config) -> float:
        s = int(config["sketch"])
        distance = np.abs(np.array(config["decisions"]) - self.best[s])
        return float(self.bases[s] * math.exp(self.weights[s] @ distance))


def xgb(space: SearchSpace, **options: Any):
    return make_tuner("xgb", space, seed=0, cost_model=CostModel(seed=0, nthread=1), **options)


def told(tuner, space: ThreeSketches, configs: list[Config]) -> None:
    tuner.tell([Observation(c, space.latency_ms(c)) for c in configs])


def sampled(space: SearchSpace, n: int, sketches: tuple[int, ...], seed: int = 1) -> list[Config]:
    """``n`` distinct random configs of the sketches named, in turn."""
    rng = np.random.default_rng(seed)
    out: dict[str, Config] = {}
    while len(out) < n:
        config = space.sample(rng)
        config["sketch"] = sketches[len(out) % len(sketches)]
        out[space.key(config)] = config
    return list(out.values())


def model_picked_sketches(tuner) -> list[int]:
    return [int(c["sketch"]) for c in tuner.ask(BATCH)[:EXPLOIT]]


@pytest.mark.parametrize("per_sketch", [1, 2])
def test_late_in_a_session_each_other_sketch_keeps_its_slots(per_sketch):
    """Sketch 0 twice as fast as the others through 80 measurements: the model rightly ranks it first.
    Without the option every model-picked slot goes to it; with it, each other sketch keeps per_sketch."""
    space = ThreeSketches(bases=(1.0, 2.0, 2.0))
    measured = sampled(space, 80, sketches=(0, 1, 2))
    before = xgb(space, per_sketch=0)
    told(before, space, measured)
    assert model_picked_sketches(before) == [0] * EXPLOIT

    after = xgb(space, per_sketch=per_sketch)
    told(after, space, measured)
    picks = model_picked_sketches(after)
    assert picks.count(1) == per_sketch and picks.count(2) == per_sketch, picks
    assert picks.count(0) == EXPLOIT - 2 * per_sketch


def test_early_in_a_session_the_sketches_share_the_batch_evenly():
    """Fewer than sketch_trials measured: each sketch other than the incumbent's gets an even share of the
    model-picked slots (7 // 3 = 2), whatever the model thinks of it; from sketch_trials on, per_sketch."""
    space = ThreeSketches(bases=(1.0, 2.0, 2.0))
    measured = sampled(space, 16, sketches=(0, 1, 2))
    tuner = xgb(space)  # sketch_trials 64
    told(tuner, space, measured)
    picks = model_picked_sketches(tuner)
    assert picks.count(1) == 2 and picks.count(2) == 2, picks

    late = xgb(space, sketch_trials=16)  # the same 16 measurements are enough for it
    told(late, space, measured)
    picks = model_picked_sketches(late)
    assert picks.count(1) == 1 and picks.count(2) == 1, picks


def test_a_template_space_is_searched_as_before():
    """A template space is one part: the options change no proposal."""
    space, runner = gemm_replay(seed=0)
    runs = []
    for options in ({"per_sketch": 0}, {}, {"per_sketch": 3, "sketch_trials": 1000}):
        tuner = xgb(space, **options)
        batches = []
        for _ in range(6):
            configs = tuner.ask(BATCH)
            batches.append([space.key(c) for c in configs])
            tuner.tell(runner.measure(configs))
        runs.append(batches)
    assert runs[0] == runs[1] == runs[2]

"""The rl tuner over an auto space: its agents' knobs are the sketch and each sketch's sampling decisions
(tunelab.core.search.tuners.knobs.SketchCodec), on a real MetaSchedule AutoSpace of GEMM 64^3 (LLVM).

The latencies here come from a known function of the decisions (the first candidate of every decision
and the first sketch fastest), so what the agents should learn is known; a real session of rl on an
auto space is in test_engine.py::test_every_tuner_on_both_spaces."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tunelab.core.errors import TunerError
from tunelab.core.search.costmodel import CostModel
from tunelab.core.search.space.auto import AutoSpace
from tunelab.core.search.tuners.base import Observation
from tunelab.core.search.tuners.knobs import UNUSED, SketchCodec, index_codec
from tunelab.core.search.tuners.registry import make_tuner, tuner_space_kinds
from tunelab.core.search.tuners.rl import _softmax
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload


@pytest.fixture(scope="module")
def space() -> AutoSpace:
    return AutoSpace(get_workload("gemm"), {"M": 64, "N": 64, "K": 64}, "float32", llvm_target())


def _latency(codec: SketchCodec, config) -> float:
    """1 ms plus 0.5 per sketch index plus, per decision the config uses, its candidate's rank (0..1)."""
    indices = codec.encode(config)
    assert indices is not None
    cost = 1.0 + 0.5 * indices[0]
    for k, i in enumerate(indices[1:], 1):
        if i != UNUSED:
            cost += i / max(1, len(codec.knobs[k].candidates) - 1)
    return cost


def _search(name: str, space: AutoSpace, seed: int, budget: int = 96, batch: int = 16):
    codec = SketchCodec(space)
    tuner = make_tuner(name, space, seed=seed, cost_model=CostModel(seed=seed, nthread=1))
    history: list[Observation] = []
    while len(history) < budget:
        observations = [Observation(c, _latency(codec, c)) for c in tuner.ask(batch)]
        tuner.tell(observations)
        history += observations
    return tuner, history


def test_the_sketch_codec_covers_every_decision_and_marks_other_sketches_unused(space):
    codec = index_codec(space, "rl")
    assert isinstance(codec, SketchCodec) and len(space.sketches) > 1
    assert codec.knobs[0].candidates == tuple(range(len(space.sketches)))
    rng = np.random.default_rng(0)
    for _ in range(60):
        config = space.sample(rng)
        indices = codec.encode(config)
        assert indices is not None and codec.decode(indices) == config
        used = codec.used(indices)
        assert used == indices  # an encoded config names only its own sketch's decisions
        # a random index vector decodes to a config of the space, its other sketches' knobs unused
        drawn = [int(rng.integers(len(k.candidates))) for k in codec.knobs]
        decoded = codec.decode(drawn)
        space.check_config(decoded)
        masked = codec.used(drawn)
        assert masked[0] == drawn[0] and codec.decode(masked) == decoded
        n_free = sum(1 for c in space.sketches[drawn[0]].candidates if c is not None and len(c) > 1)
        assert sum(1 for i in masked[1:] if i != UNUSED) == n_free
    assert codec.encode({"sketch": 99, "decisions": []}) is None
    assert codec.encode({**space.sample(rng), "decisions": []}) is None


@pytest.mark.slow
def test_rl_drives_an_auto_space_and_learns_its_fast_sketch(space):
    """Three seeds: the agents' policies favour the fastest sketch, and rl finds faster configs than a
    random search of the same budget and seed (in sum: one seed may be lucky for random)."""
    assert "auto" in tuner_space_kinds("rl")
    rl_best, random_best = [], []
    for seed in (0, 1, 2):
        tuner, history = _search("rl", space, seed)
        assert len({space.key(o.config) for o in history}) == len(history) == 96  # never twice
        sketch_policy = np.mean([_softmax(agent.logits[0]) for agent in tuner.agents], axis=0)
        assert sketch_policy[0] > 1.2 / len(space.sketches), sketch_policy
        rl_best.append(min(o.latency_ms for o in history))
        _, randomly = _search("random", space, seed)
        random_best.append(min(o.latency_ms for o in randomly))
    assert sum(rl_best) < sum(random_best), (rl_best, random_best)


def test_rl_state_on_an_auto_space_survives_a_resume(space):
    tuner, _ = _search("rl", space, seed=3, budget=32, batch=8)
    state = json.loads(json.dumps(tuner.state_dict()))
    fresh = make_tuner("rl", space, seed=3, cost_model=CostModel(seed=3, nthread=1))
    fresh.load_state_dict(state)
    for a, b in zip(tuner.agents, fresh.agents, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a.logits, b.logits, strict=True))
    assert any(np.any(lg != 0) for lg in fresh.agents[0].logits)


def test_an_auto_space_without_sketches_is_refused_in_one_line():
    from tests.core.replay import ToySpace

    class AutoToySpace(ToySpace):
        kind = "auto"

    with pytest.raises(TunerError, match="drives a template space's knobs"):
        make_tuner("rl", AutoToySpace({"tile": [1, 2]}), seed=0)

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
from tunelab.core.search.tuners.knobs import UNUSED, Knob, SketchCodec, index_codec
from tunelab.core.search.tuners.registry import make_tuner, tuner_space_kinds
from tunelab.core.search.tuners.rl import _softmax, candidate_features
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


def _search(name: str, space: AutoSpace, seed: int, budget: int = 96, batch: int = 16, **options):
    codec = SketchCodec(space)
    tuner = make_tuner(name, space, seed=seed, cost_model=CostModel(seed=seed, nthread=1), **options)
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


# --- the factors policy: a weight per tile factor, shared by every split that has it -------------------


def test_factor_features_are_the_candidates_and_the_factors_they_hold(space):
    codec = index_codec(space, "rl")
    split = next(
        k for k in codec.knobs if len(k.candidates) > 8 and isinstance(k.candidates[0], list | tuple)
    )
    table, factors = candidate_features(split, "table"), candidate_features(split, "factors")
    n = len(split.candidates)
    assert np.array_equal(table, np.eye(n)) and np.array_equal(factors[:, :n], np.eye(n))
    shared = factors[:, n:]
    assert shared.shape[1] > 0 and set(np.unique(shared)) == {0.0, 1.0}
    # each candidate holds one value per position, and no column is every candidate's (it would move nothing)
    positions = len(split.candidates[0])
    assert np.all(shared.sum(axis=1) <= positions) and np.all(shared.sum(axis=0) < n)
    # two splits sharing their inner factor share that column
    inner = [c[-1] for c in split.candidates]
    i, j = next((i, j) for i in range(n) for j in range(i + 1, n) if inner[i] == inner[j])
    assert np.dot(shared[i], shared[j]) >= 1
    sketch = codec.knobs[0]  # not a list of factors: its own weights only
    assert np.array_equal(candidate_features(sketch, "factors"), np.eye(len(sketch.candidates)))
    tiles = Knob("tile_j", ([1], [2], [4], [8]), True)  # a template's one-element tiles: nothing to share
    assert np.array_equal(candidate_features(tiles, "factors"), np.eye(4))


def _inner_factor_latency(codec: SketchCodec, fast_inner: dict[int, int]):
    """A latency that depends on each split's inner factor only: 1 ms, plus 1 ms for every split whose
    inner factor is not its knob's chosen fast one. A table policy must learn each of a split's candidates
    on its own; a factors policy learns the inner factor once."""

    def latency(config) -> float:
        indices = codec.encode(config)
        assert indices is not None
        cost = 1.0
        for k, fast in fast_inner.items():
            if indices[k] != UNUSED and codec.knobs[k].candidates[indices[k]][-1] != fast:
                cost += 1.0
        return cost

    return latency


@pytest.mark.slow
def test_the_factors_policy_learns_a_fast_inner_factor_the_table_policy_does_not(space):
    """Over three seeds the factors policy puts more probability on the splits with the fast inner factor
    than the table policy does, from the same measurements' worth of search."""
    codec = SketchCodec(space)
    splits = [k for k, knob in enumerate(codec.knobs) if k and isinstance(knob.candidates[0], list | tuple)]
    fast_inner = {}
    for k in splits:  # the inner factor fewest candidates have: the one a uniform policy favours least
        inner = [c[-1] for c in codec.knobs[k].candidates]
        fast_inner[k] = min(set(inner), key=lambda v: (inner.count(v), v))
    latency = _inner_factor_latency(codec, fast_inner)

    def mass_on_fast(policy: str, seed: int) -> float:
        tuner = make_tuner("rl", space, seed=seed, cost_model=CostModel(seed=seed, nthread=1), policy=policy)
        for _ in range(8):
            tuner.tell([Observation(c, latency(c)) for c in tuner.ask(12)])
        mass = []
        for k in splits:
            is_fast = np.array([c[-1] == fast_inner[k] for c in codec.knobs[k].candidates])
            mass.append(np.mean([_softmax(agent.logits[k])[is_fast].sum() for agent in tuner.agents]))
        return float(np.mean(mass))

    uniform = np.mean([np.mean([c[-1] == fast_inner[k] for c in codec.knobs[k].candidates]) for k in splits])
    table = [mass_on_fast("table", seed) for seed in range(3)]
    factors = [mass_on_fast("factors", seed) for seed in range(3)]
    assert sum(factors) > sum(table), (table, factors)
    assert np.mean(factors) > 1.5 * uniform, (uniform, factors)


def test_a_session_saved_before_the_policies_had_features_resumes_with_its_table_policy(space):
    """A store written before the option holds each agent's "logits" and no policy among the session's
    options: resumed under the factors default, its agents are the table policies it learnt."""
    tuner, _ = _search("rl", space, seed=4, budget=32, batch=8, policy="table")
    saved = json.loads(json.dumps(tuner.state_dict()))
    legacy = {
        **saved,
        "agents": [{"logits": a["weights"], "baseline": a["baseline"]} for a in saved["agents"]],
    }
    resumed = make_tuner("rl", space, seed=4, cost_model=CostModel(seed=4, nthread=1))
    assert resumed.policy == "factors"  # the default
    resumed.load_state_dict(legacy)
    assert resumed.policy == "table"
    for a, b in zip(tuner.agents, resumed.agents, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a.logits, b.logits, strict=True))
    assert any(np.any(lg) for lg in resumed.agents[0].logits)
    factored = make_tuner("rl", space, seed=4, cost_model=CostModel(seed=4, nthread=1), policy="factors")
    factored.load_state_dict(saved)  # a table's weights do not fit a factors policy: uniform again
    assert factored.policy == "factors"
    assert all(not np.any(lg) for agent in factored.agents for lg in agent.logits)


# --- the sketches: each keeps a share of the pool and of the batch (per_sketch, sketch_trials) --------


def _collapsed(space: AutoSpace, sketch: int, **options):
    """An rl tuner whose agents' sketch policies have settled on ``sketch`` (the most a policy can:
    its weights at their limit), told 72 measurements, ``sketch``'s the fastest, and its model fitted."""
    codec = SketchCodec(space)
    tuner = make_tuner("rl", space, seed=0, cost_model=CostModel(seed=0, nthread=1), **options)
    for agent in tuner.agents:
        agent.weights[0] = np.where(np.arange(len(space.sketches)) == sketch, 1.0, -1.0) * agent._limits[0]
    rng = np.random.default_rng(5)
    measured = []
    while len(measured) < 72:  # the sketches in turn, each decision uniform
        indices = [len(measured) % len(space.sketches)]
        indices += [int(rng.integers(len(knob.candidates))) for knob in codec.knobs[1:]]
        config = codec.decode(codec.used(indices))
        if space.key(config) not in {space.key(c) for c in measured}:
            measured.append(config)
    tuner.tell(
        [Observation(c, _latency(codec, c) * (0.5 if c["sketch"] == sketch else 1.0)) for c in measured]
    )
    return tuner


def test_each_other_sketch_keeps_a_slot_when_the_agents_have_settled_on_one(space):
    """The agents' sketch policies settled on sketch 1 (a conv's real 256-trial sessions did, on a slower
    sketch): without per_sketch every proposal of a batch is sketch 1's; with it each other sketch's
    predicted best is among the model's picks, and those draws did not come from the sketch policy."""
    before = _collapsed(space, sketch=1, per_sketch=0)
    # 8 * (1 - epsilon 0.1), rounded up: the whole batch of 8 is model-picked
    assert {c["sketch"] for c in before.ask(8)} == {1}
    after = _collapsed(space, sketch=1)  # 72 measured: past sketch_trials (64)
    picks = [c["sketch"] for c in after.ask(8)]
    assert picks.count(0) == 1 and picks.count(2) == 1, picks
    pool = after._pool()
    set_sketch = [(c, indices) for c, _, indices in pool if indices[0] == UNUSED]
    assert {c["sketch"] for c, _ in set_sketch} == {0, 2}
    assert all(c["sketch"] == 1 for c, _, indices in pool if indices[0] != UNUSED)


def test_early_in_a_session_the_sketches_share_the_batch_evenly(space):
    """Fewer than sketch_trials measured: each other sketch gets an even share of the model-picked slots
    (8 // 3 = 2), whatever the agents or the model think of it."""
    tuner = _collapsed(space, sketch=1, sketch_trials=100)
    picks = [c["sketch"] for c in tuner.ask(8)]  # all 8 model-picked (epsilon 0.1)
    assert picks.count(0) == 2 and picks.count(2) == 2, picks


def test_a_step_on_a_draw_whose_sketch_was_set_leaves_the_sketch_policy(space):
    """Measurements of draws whose sketch was set (the per_sketch draws) move the decisions' policies,
    never the sketch's: the agents did not choose that sketch."""
    tuner = _collapsed(space, sketch=1)
    before = [agent.weights[0].copy() for agent in tuner.agents]
    codec = SketchCodec(space)
    proposed = tuner.ask(8)
    owned = [c for c in proposed if tuner._owner.get(space.key(c), (0, [0]))[1][0] == UNUSED]
    assert owned, "a draw whose sketch was set is among the proposals"
    tuner.tell([Observation(c, 0.01 * _latency(codec, c)) for c in owned])  # far faster than anything
    assert all(np.array_equal(b, agent.weights[0]) for b, agent in zip(before, tuner.agents, strict=True))


def test_a_template_space_is_searched_by_rl_as_before():
    """A template space is one part: the sketch options change no proposal."""
    from tests.core.replay import gemm_replay

    space, runner = gemm_replay(seed=0)
    runs = []
    for options in ({"per_sketch": 0}, {}, {"per_sketch": 3, "sketch_trials": 1000}):
        tuner = make_tuner("rl", space, seed=0, cost_model=CostModel(seed=0, nthread=1), **options)
        batches = []
        for _ in range(6):
            configs = tuner.ask(8)
            batches.append([space.key(c) for c in configs])
            tuner.tell(runner.measure(configs))
        runs.append(batches)
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("tuner", ["rl", "xgb"])
@pytest.mark.parametrize("option", ["per_sketch", "sketch_trials"])
def test_a_negative_sketch_option_is_one_line(space, tuner, option):
    with pytest.raises(TunerError, match=rf"^{tuner}: {option} must be 0 or more; got -1$"):
        make_tuner(tuner, space, seed=0, **{option: -1})

"""The auto space holds the schedules MetaSchedule's ``MutateParallel`` proposes.

That mutator does not change a sampling decision: it rewrites the limit of the root block's
``meta_schedule.parallel`` annotation (an input of an ``Annotate`` instruction), which decides how many
outer loops are fused into the parallel loop. A config of decisions alone replays the sketch's own limit,
so such a proposal matched no config and was never measured (about 1 conv2d proposal in 80); a config now
carries the limit where it differs from the sketch's."""

from __future__ import annotations

import numpy as np
import pytest
import tvm_ffi

from tunelab.core.errors import SpaceError
from tunelab.core.search.space.auto import AutoSpace, parallel_limits
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def space() -> AutoSpace:
    # conv2d: its loop nest gives MutateParallel plans that fuse other loops than the sketch's limit does
    # (on GEMM 256^3 with 2 cores the 20 mutations tried all gave the same IR as the sketch's limit)
    conv = get_workload("conv2d_nchw")
    return AutoSpace(conv, conv.parse_shape(None, complete=True), "float32", llvm_target())


def _proposal(space: AutoSpace, trace):
    """The schedule MetaSchedule's search makes of a mutated trace: replayed, then post-processed."""
    from tvm.s_tir import Schedule

    sch = Schedule(space.mod)
    trace.apply_to_schedule(sch, remove_postproc=True)
    sch.enter_postproc()
    for postproc in space.postprocs:
        assert postproc.apply(sch)
    return sch


def _parallel_mutations(space: AutoSpace, wanted: int) -> list:
    """Traces MetaSchedule's real MutateParallel made from sampled configs of the space, each a schedule
    other than the one its decisions give with the sketch's own limit."""
    from tvm.s_tir import meta_schedule as ms

    mutator = ms.mutator.MutateParallel(max_jobs_per_core=16)
    mutator._initialize_with_tune_context(space.context)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(200):
        try:
            base = space.schedule(space.sample(rng))
        except InvalidSchedule:
            continue
        mutated = mutator.apply(base.trace)
        if mutated is None or parallel_limits(mutated) == parallel_limits(base.trace):
            continue
        if not tvm_ffi.structural_equal(_proposal(space, mutated).mod, base.mod):
            out.append(mutated)
            if len(out) == wanted:
                break
    return out


def test_a_parallel_mutation_decodes_to_the_config_that_replays_it(space: AutoSpace):
    mutations = _parallel_mutations(space, 3)
    assert len(mutations) == 3, "MutateParallel made no other schedule from 200 sampled configs"
    for trace in mutations:
        proposal = _proposal(space, trace)
        config = space.decode(proposal.trace, proposal.mod)
        assert config is not None, "the proposal matched no config of the space"
        assert config["parallel"] == parallel_limits(trace)
        assert config["parallel"] != space.sketches[config["sketch"]].base_parallel
        assert tvm_ffi.structural_equal(space.schedule(config).mod, proposal.mod)
        # without the limit, the same decisions replay another schedule: before, decode found no config
        plain = {"sketch": config["sketch"], "decisions": config["decisions"]}
        assert not tvm_ffi.structural_equal(space.schedule(plain).mod, proposal.mod)
        # the tuners' own moves keep it
        rng = np.random.default_rng(1)
        assert space.mutate(config, rng)["parallel"] == config["parallel"]
        assert space.crossover(config, config, rng)["parallel"] == config["parallel"]
        assert space.key(config) != space.key(plain)


def test_a_config_s_region_is_its_sketch_and_the_moves_keep_it(space: AutoSpace):
    """What the xgb tuner's per-sketch slots group by (SearchSpace.region)."""
    rng = np.random.default_rng(3)
    configs = [space.sample(rng) for _ in range(30)]
    assert {space.region(c) for c in configs} == {c["sketch"] for c in configs}
    for a, b in zip(configs, configs[1:], strict=False):
        assert space.region(space.mutate(a, rng)) == space.region(a)
        assert space.region(space.crossover(a, b, rng)) == space.region(a)


def test_a_config_without_a_limit_keeps_the_sketch_s(space: AutoSpace):
    config = space.point(0)
    assert "parallel" not in config
    sketch = space.sketches[config["sketch"]]
    assert parallel_limits(space.schedule(config).trace) == sketch.base_parallel
    same = {**config, "parallel": list(sketch.base_parallel)}
    assert tvm_ffi.structural_equal(space.schedule(same).mod, space.schedule(config).mod)


@pytest.mark.parametrize("bad", [[0], [-4], ["16"], [True], 16, [16, 16, 16, 16, 16]])
def test_a_bad_parallel_limit_is_one_clear_message(space: AutoSpace, bad):
    config = {**space.point(0), "parallel": bad}
    with pytest.raises(SpaceError, match="parallel-extent limit"):
        space.check_config(config)


def test_an_unknown_key_is_refused(space: AutoSpace):
    with pytest.raises(SpaceError, match="auto-space config"):
        space.check_config({**space.point(0), "vectorize": [8]})

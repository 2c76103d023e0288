"""The evolutionary tuner's options reach MetaSchedule: its cost model's warm-up (tune_tir's default
XGBModel ranks by random numbers below 100 samples; tunelab's uses its model from the first batch)."""

from __future__ import annotations

import pytest

from tunelab.core.errors import TunerError
from tunelab.core.search.space.auto import AutoSpace
from tunelab.core.search.tuners.evolutionary import EvolutionaryTuner
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def space() -> AutoSpace:
    return AutoSpace(get_workload("gemm"), {"M": 16, "N": 64, "K": 64}, "float32", llvm_target())


@pytest.mark.parametrize(("options", "warmup"), [({}, 0), ({"warmup_samples": 100}, 100)])
def test_the_cost_model_warm_up_is_the_tuners_option(space, options, warmup):
    tuner = EvolutionaryTuner(space, seed=0, population_size=16, **options)
    try:
        configs = tuner.ask(4)
        assert configs and all(space.check_config(c) is None for c in configs)
        assert tuner._model.num_warmup_samples == warmup
    finally:
        tuner.close()


def test_a_warm_up_that_is_not_an_integer_is_refused(space):
    with pytest.raises(TunerError, match="warmup_samples"):
        EvolutionaryTuner(space, seed=0, warmup_samples=1.5)

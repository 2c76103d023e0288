"""The evolutionary tuner's options reach MetaSchedule: its cost model's warm-up (tune_tir's default
XGBModel ranks by random numbers below 100 samples; tunelab's uses its model from the first batch)."""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.core.errors import TunerError
from tunelab.core.search.space.auto import AutoSpace
from tunelab.core.search.tuners.base import Observation
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


def test_the_cost_models_features_are_those_of_one_thread(space):
    """The search's cost model extracts on every core; each candidate's features are its own."""
    from tvm.s_tir import meta_schedule as ms

    tuner = EvolutionaryTuner(space, seed=0, population_size=16, search_threads=1)
    try:
        tuner.ask(4)
        cands = [c for _, c in tuner._pending]
        threaded = tuner._model.extractor.extract_from(tuner._ctx, cands)
        one = ms.feature_extractor.PerStoreFeature().extract_from(tuner._ctx, cands)
        assert tuner._ctx.num_threads == 1
        assert [f.numpy().tolist() for f in threaded] == [f.numpy().tolist() for f in one]
    finally:
        tuner.close()


def test_proposals_still_queued_are_not_reported_as_failures(space):
    """A batch asked for while proposals of the generation before still wait: those are reported to
    MetaSchedule once measured, not as failures when the next generation is made."""
    tuner = EvolutionaryTuner(space, seed=0, population_size=16, generation=4)
    try:
        first = tuner.ask(4)  # MetaSchedule proposes 4 per generation
        tuner.tell([Observation(c, 1.0 + i) for i, c in enumerate(first)])
        second = tuner.ask(3)  # a new generation of 4: one waits, not decoded yet
        assert len(second) == 3 and not tuner._queue and len(tuner._raw) == 1
        tuner.tell([Observation(c, 2.0 + i) for i, c in enumerate(second)])
        third = tuner.ask(3)  # the one left over (best first) and two of a new generation
        left = space.key(third[0])
        assert tuner._model.data_size == 7  # the 4 + 3 measured; the left-over one is still pending
        assert left in {k for k, _ in tuner._pending}
        tuner.tell([Observation(c, 3.0) for c in third])
        tuner.ask(3)  # two are left: a new generation, which reports the measured ones
        assert left not in {k for k, _ in tuner._pending}
        assert tuner._told[left] == 3.0
        assert tuner._model.data_size == 10
    finally:
        tuner.close()


def test_one_search_proposes_for_several_batches_once_the_model_has_a_generations_data(space):
    """A search costs about the same whatever it proposes: it proposes 64 (tune_tir's
    num_trials_per_iter). While fewer than 64 trials are measured each batch of 16 still comes from a
    search that knows every measurement (the young model learns most per batch); after that, batches
    of 16 take from one search four times."""
    tuner = EvolutionaryTuner(space, seed=0, population_size=16)
    searches: list[int] = []  # the measurements each search knew
    generate = tuner._generate

    def counted(**kwargs) -> bool:
        searches.append(len(tuner._told))
        return generate(**kwargs)

    tuner._generate = counted
    try:
        seen: set[str] = set()
        for _ in range(8):
            batch = tuner.ask(16)
            assert len(batch) == 16
            seen.update(space.key(c) for c in batch)
            tuner.tell([Observation(c, 1.0 + len(seen) % 7) for c in batch])
        assert tuner._generation == 64
        assert len(seen) == 128  # no proposal handed out twice
        # one search for each of the first four batches (a generation may repeat earlier proposals,
        # which are dropped: then one more), then one for the next four
        assert {0, 16, 32, 48} <= set(searches), searches
        assert len([told for told in searches if told >= 64]) <= 2, searches
    finally:
        tuner.close()
    big = EvolutionaryTuner(space, seed=0, population_size=16, generation=8)
    try:
        big.ask(20)  # a batch larger than the generation: the search proposes the batch
        assert big._generation == 20
    finally:
        big.close()
    with pytest.raises(TunerError, match="generation"):
        EvolutionaryTuner(space, seed=0, generation=-1)


def test_the_search_runs_on_every_core_unless_told_otherwise(space):
    from tunelab.core.target.info import cpu_core_count

    for threads, expected in ((0, cpu_core_count()), (1, 1)):
        tuner = EvolutionaryTuner(space, seed=0, population_size=16, search_threads=threads)
        try:
            tuner.ask(2)
            assert tuner._ctx.num_threads == expected
        finally:
            tuner.close()
    with pytest.raises(TunerError, match="search_threads"):
        EvolutionaryTuner(space, seed=0, search_threads=-1)


def test_one_search_thread_proposes_the_same_for_the_same_seed(space):
    """MetaSchedule's cost model ranks by np.random until it is trained: the tuner draws those from its
    seed, so two runs agree from the first proposal on (and the caller's np.random is left alone)."""

    def proposals() -> list[str]:
        tuner = EvolutionaryTuner(space, seed=7, population_size=32, search_threads=1)
        seen: list[str] = []
        try:
            for round_ in range(3):
                configs = tuner.ask(4)
                seen += [space.key(c) for c in configs]
                tuner.tell([Observation(c, 1.0 + sum(map(ord, space.key(c))) % 7 + round_) for c in configs])
        finally:
            tuner.close()
        return seen

    runs = []
    for outside_seed in (1, 2):  # whatever the caller's np.random holds
        np.random.seed(outside_seed)
        outside = np.random.get_state()[1].copy()
        runs.append(proposals())
        assert (np.random.get_state()[1] == outside).all()
    assert runs[0] == runs[1] and len(runs[0]) == 12

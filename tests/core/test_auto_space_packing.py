"""The auto space's input packing (MultiLevelTiling's ``pack_inputs``): a switch a person sees in the space
editor, off unless asked for, and real when on: every sketch copies each input's tile into a buffer of its
own, and they build and compute what NumPy computes."""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.core.errors import SpaceError
from tunelab.core.measure.runner import Measurer
from tunelab.core.records import MeasureOptions
from tunelab.core.search.space.auto import AutoSpace, default_auto_space
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow

SHAPE = {"M": 64, "N": 64, "K": 64}


def _space(pack: bool | None) -> AutoSpace:
    data = default_auto_space("llvm")
    for rule in data["rules"]:
        if rule["name"] == "MultiLevelTiling":
            if pack is None:
                rule["params"].pop("pack_inputs")  # a space stored before the switch existed
            else:
                rule["params"]["pack_inputs"] = pack
    return AutoSpace(get_workload("gemm"), SHAPE, "float32", llvm_target(), data)


def _copies(space: AutoSpace, sketch: int) -> bool:
    """Whether a sketch copies an input into a buffer of its own (a cache read)."""
    return any(inst.kind.name == "CacheRead" for inst in space.sketches[sketch].trace.insts)


def test_packing_is_off_by_default_and_in_stored_spaces_without_it():
    plain, legacy = _space(False), _space(None)
    assert legacy.rules == plain.rules and legacy.size == plain.size
    assert not any(_copies(plain, i) for i in range(len(plain.sketches)))


def test_packed_sketches_build_and_compute_the_reference():
    space = _space(True)
    packed = [i for i in range(len(space.sketches)) if _copies(space, i)]
    assert packed == list(range(len(space.sketches)))  # every tiled sketch copies its inputs' tiles
    rng = np.random.default_rng(0)
    schedules = []
    for sketch in packed[:2]:
        while True:
            config = space.sample(rng)
            if config["sketch"] != sketch:
                continue
            try:
                schedules.append(space.schedule(config))
                break
            except Exception:  # an invalid point of this sketch: sample another
                continue
    options = MeasureOptions(number=1, repeat=1, min_repeat_ms=1, cooldown_s=0)  # checked against NumPy
    measurer = Measurer(get_workload("gemm"), SHAPE, "float32", llvm_target(), options)
    try:
        results = measurer.measure(schedules)
    finally:
        measurer.close()
    assert [r.status for r in results] == ["ok"] * len(schedules), [r.error for r in results]


def test_a_packing_switch_that_is_not_a_boolean_is_refused():
    data = default_auto_space("llvm")
    for rule in data["rules"]:
        if rule["name"] == "MultiLevelTiling":
            rule["params"]["pack_inputs"] = "yes"
    with pytest.raises(SpaceError, match="pack_inputs must be true or false"):
        AutoSpace(get_workload("gemm"), SHAPE, "float32", llvm_target(), data)

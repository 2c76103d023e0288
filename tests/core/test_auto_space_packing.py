"""The auto space's input packing (MultiLevelTiling's ``pack_inputs``): a switch a person sees in the space
editor, "auto" by default (packed where every input is reused enough to pay for the copy), and real when
on: every sketch copies each input's tile into a buffer of its own, and they build and compute what NumPy
computes."""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.core.errors import SpaceError
from tunelab.core.measure.runner import Measurer, Problem
from tunelab.core.records import MeasureOptions
from tunelab.core.search.space.auto import AutoSpace, default_auto_space
from tunelab.core.search.space.factory import _space_data
from tunelab.core.search.space.packing import PACK_MIN_REUSE, choose_packing
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow

SHAPE = {"M": 64, "N": 64, "K": 64}


def _space(pack: bool | str | None, shape: dict[str, int] = SHAPE) -> AutoSpace:
    data = default_auto_space("llvm")
    for rule in data["rules"]:
        if rule["name"] == "MultiLevelTiling":
            if pack is None:
                rule["params"].pop("pack_inputs")  # a space stored before the switch existed
            else:
                rule["params"]["pack_inputs"] = pack
    return AutoSpace(get_workload("gemm"), shape, "float32", llvm_target(), data)


def _copies(space: AutoSpace, sketch: int) -> bool:
    """Whether a sketch copies an input into a buffer of its own (a cache read)."""
    return any(inst.kind.name == "CacheRead" for inst in space.sketches[sketch].trace.insts)


def test_auto_packs_where_the_least_reused_input_pays_for_its_copy():
    gemm, conv = get_workload("gemm"), get_workload("conv2d_nchw")
    square = choose_packing("auto", gemm, {"M": 1024, "N": 1024, "K": 1024})
    skinny = choose_packing("auto", gemm, {"M": 16, "N": 1024, "K": 1024})  # B's elements used 16 times
    resnet = choose_packing("auto", conv, conv.parse_shape(None, complete=True))
    assert (square.packs, square.min_reuse) == (True, 1024)
    assert (skinny.packs, skinny.min_reuse) == (False, 16)
    assert resnet.packs and resnet.min_reuse >= PACK_MIN_REUSE
    assert "used 16 times < 256" in skinny.words()
    assert choose_packing(True, gemm, {"M": 16, "N": 1024, "K": 1024}).packs  # a person's setting stands
    assert not choose_packing(False, gemm, {"M": 1024, "N": 1024, "K": 1024}).packs


def test_the_default_resolves_per_shape_and_says_so_in_the_space():
    small, large = _space("auto"), _space("auto", {"M": 256, "N": 256, "K": 256})
    assert small.rules == _space(None).rules  # "auto" is the default
    assert not any(_copies(small, i) for i in range(len(small.sketches)))
    assert all(_copies(large, i) for i in range(len(large.sketches)))
    assert small.to_json()["packing"] == {"setting": "auto", "packs": False, "min_reuse": 64.0}
    assert large.to_json()["packing"]["packs"] is True
    assert large.to_json()["rules"] == large.rules  # stored as "auto": reopened, it resolves the same


def test_a_stored_space_from_before_the_switch_is_rebuilt_unpacked():
    shape = {"M": 256, "N": 256, "K": 256}
    stored = _space(False, shape).to_json()
    for rule in stored["rules"]:
        rule["params"].pop("pack_inputs", None)  # what a session stored before pack_inputs holds
    rebuilt = AutoSpace(get_workload("gemm"), shape, "float32", llvm_target(), _space_data("auto", stored))
    assert not any(_copies(rebuilt, i) for i in range(len(rebuilt.sketches)))
    assert rebuilt.size == _space(False, shape).size


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
            except Exception:  # noqa: BLE001 - an invalid point of this sketch: sample another
                continue
    options = MeasureOptions(number=1, repeat=1, min_repeat_ms=1, cooldown_s=0)  # checked against NumPy
    measurer = Measurer(Problem(get_workload("gemm"), SHAPE, "float32", llvm_target()), options)
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
    with pytest.raises(SpaceError, match='pack_inputs must be true, false or "auto"'):
        AutoSpace(get_workload("gemm"), SHAPE, "float32", llvm_target(), data)

"""Small helpers over TVM's schedule objects shared by both spaces (and nothing Qt)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np


class InvalidSchedule(Exception):
    """TVM rejected this point of the space (illegal knob combination, GPU limits exceeded)."""


def _blocks(prim_func: Any) -> list[Any]:
    from tvm.s_tir import Schedule

    sch = Schedule(prim_func)
    return [sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))]


def find_main_block(prim_func: Any, preferred: str | None = None) -> str:
    """The block the templates tile: the named one, else the first block with a reduction axis."""
    blocks = _blocks(prim_func)
    names = [b.name_hint for b in blocks]
    if preferred and preferred in names:
        return preferred
    for block in blocks:
        if any(int(iv.iter_type) == 2 for iv in block.iter_vars):
            return str(block.name_hint)
    if not blocks:
        raise InvalidSchedule("the compute has no blocks to schedule")
    return str(blocks[-1].name_hint)


def block_axes(prim_func: Any, block_name: str) -> list[tuple[str, int, str]]:
    """(name, extent, "spatial" | "reduce") for each loop of the block, outermost first."""
    block = next(b for b in _blocks(prim_func) if b.name_hint == block_name)
    axes = []
    for iv in block.iter_vars:
        name = str(iv.var.name)
        name = name[2:] if name.startswith("v_") else name
        kind = "reduce" if int(iv.iter_type) == 2 else "spatial"
        axes.append((name, int(iv.dom.extent), kind))
    return axes


def light_tune_context(
    mod: Any,
    target: Any,
    *,
    space_generator: Any = None,
    search_strategy: Any = None,
    num_threads: int = 1,
    seed: int = 1,
) -> Any:
    """A TuneContext for feature extraction and postprocessors without importing tensor intrinsics.

    TuneContext.__init__ imports tvm.s_tir.tensor_intrin (about 11 s, TVM_NOTES 0). Spaces with no
    tensorize rules never need it, so this builds the same object through the FFI constructor.
    """
    import tvm
    from tvm.s_tir.meta_schedule import TuneContext, _ffi_api
    from tvm.s_tir.meta_schedule.logging import get_logger, get_logging_func

    if not isinstance(target, tvm.target.Target):
        target = tvm.target.Target(target)
    ctx = TuneContext.__new__(TuneContext)
    ctx.__init_handle_by_constructor__(
        _ffi_api.TuneContext,
        mod,
        target,
        space_generator,
        search_strategy,
        "main",
        num_threads,
        seed,
        get_logging_func(get_logger(__name__)),
    )
    _ffi_api.TuneContextInitialize(ctx)
    return ctx


def threaded_feature_extractor(mod: Any, target: Any, threads: int) -> Any:
    """MetaSchedule's PerStoreFeature, extracting on ``threads`` threads whatever TuneContext it is given.

    PerStoreFeature spreads a batch over its TuneContext's ``num_threads``. The evolutionary tuner's
    context has one thread (with more its search differs from run to run: threads take candidates
    in whatever order they finish), so its cost model ranked every generation (~512 candidates, five
    times per batch) on one core: about 40 % of a conv2d session's wall time on 2 cores. Each
    candidate's features come from its own IR alone, so more threads give the same numbers in the
    same order. ``mod`` and ``target``: those of the tuner's context (the target decides CPU or GPU
    features)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.feature_extractor import PerStoreFeature, PyFeatureExtractor

    context = light_tune_context(mod, target, num_threads=max(1, threads))
    inner = PerStoreFeature()

    @derived_object
    class ThreadedPerStoreFeature(PyFeatureExtractor):
        def extract_from(self, _context: Any, candidates: Any) -> Any:
            return inner.extract_from(context, candidates)

    return ThreadedPerStoreFeature()


@functools.lru_cache(maxsize=8)
def _feature_context(target_json: str) -> tuple[Any, Any]:
    import json

    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.script import tirx as T  # noqa: F401 - registers the parser used by IRModule

    target = tvm.target.Target(json.loads(target_json))

    ctx = light_tune_context(tvm.IRModule(), target)
    return ctx, ms.feature_extractor.PerStoreFeature()


def schedule_features(sch: Any, target: Any) -> np.ndarray:
    """MetaSchedule's per-store features of a schedule, summed and maxed into one 328-vector."""
    import json

    from tvm.s_tir import meta_schedule as ms

    ctx, extractor = _feature_context(json.dumps(target.json, sort_keys=True))
    args = ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"])
    feats = extractor.extract_from(ctx, [ms.MeasureCandidate(sch, args)])[0].numpy()
    if feats.size == 0:
        return np.zeros(328)
    return np.concatenate([feats.sum(0), feats.max(0)])

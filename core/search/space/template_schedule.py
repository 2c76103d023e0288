"""How a template config becomes a schedule: its splits, loop order and unroll, bound for the CPU or CUDA."""

from __future__ import annotations

import itertools
import math
from typing import Any

from tunelab.core.records import Config
from tunelab.core.search.space.scheduled import invalid_schedule
from tunelab.core.search.space.template_knobs import UNROLL_STEPS, Axis
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.search.space.wmma import apply_wmma
from tunelab.core.target.info import TargetInfo


def _split(
    sch: Any, loop: Any, extent: int, inner: list[int] | None, knob: dict[str, Any] | None = None
) -> list[Any]:
    """Split through sample_perfect_tile: with `inner` the decision is fixed; without it (the
    evolutionary search's sketches) MetaSchedule samples it, bounded by the knob's candidates."""
    if inner is None:
        assert knob is not None
        max_inner = max(c[-1] for c in knob["candidates"])
        decision = sch.sample_perfect_tile(loop, n=knob["parts"], max_innermost_factor=max_inner)
    else:
        factors = [extent // math.prod(inner), *inner]
        decision = sch.sample_perfect_tile(
            loop, n=len(factors), max_innermost_factor=max(factors[-1], 1), decision=factors
        )
    return list(sch.split(loop, decision))


def apply_template(
    prim_func: Any, block_name: str, axes: list[Axis], config: Config, target: TargetInfo, dtype: str = ""
) -> Any:
    """Build the schedule for one config; InvalidSchedule when TVM rejects the combination."""
    from tvm.s_tir import Schedule

    try:
        sch = Schedule(prim_func)
        apply_template_to(sch, block_name, axes, config, target, dtype=dtype)
        return sch
    except InvalidSchedule:
        raise
    except Exception as exc:  # noqa: BLE001 - TVM's ScheduleError: this knob combination is not a legal schedule
        raise invalid_schedule(exc) from None


def apply_template_to(
    sch: Any,
    block_name: str,
    axes: list[Axis],
    config: Config,
    target: TargetInfo,
    knobs: dict[str, dict[str, Any]] | None = None,
    dtype: str = "",
) -> None:
    """Apply a config to `sch`. With `knobs`, tile and unroll values missing from `config` are
    left for MetaSchedule to sample (the evolutionary search's sketches)."""
    main = sch.get_sblock(block_name)
    epilogue = _inline_others(sch, block_name)
    if config.get("tensor_core"):
        if epilogue:
            raise InvalidSchedule(
                "the tensor-core kernel writes its fragments straight to the output: no epilogue"
            )
        grid = apply_wmma(sch, main, axes, config, dtype, knobs, _split)
        _annotate_unroll(sch, grid, config, knobs)
        return
    loops = sch.get_loops(main)
    outer_s, inner_s, outer_r, inner_r, thread_s = [], [], [], [], []
    for axis, loop in zip(axes, loops, strict=True):
        name = f"tile_{axis.name}"
        inner = list(config[name]) if name in config else None
        parts = _split(sch, loop, axis.extent, inner, (knobs or {}).get(name))
        if axis.kind == "reduce":
            outer_r.append(parts[0])
            inner_r.append(parts[1])
        elif len(parts) == 3:
            outer_s.append(parts[0])
            thread_s.append(parts[1])
            inner_s.append(parts[2])
        else:
            outer_s.append(parts[0])
            inner_s.append(parts[1])
    groups = {"ro": outer_r, "ri": inner_r, "si": inner_s}
    ordered = [groups[g] for g in config["order"].split(",")]
    if target.kind == "cuda":
        _cuda(sch, main, epilogue, outer_s, thread_s, ordered, outer_r, config)
    else:
        _cpu(sch, main, epilogue, outer_s, ordered, config)
    _annotate_unroll(sch, sch.get_loops(main)[0], config, knobs)


def _annotate_unroll(sch: Any, anchor: Any, config: Config, knobs: dict[str, dict[str, Any]] | None) -> None:
    """The auto-unroll step on the kernel's outermost loop, recorded through sample_categorical."""
    steps = list((knobs or {}).get("unroll", {}).get("candidates", UNROLL_STEPS))
    if "unroll" not in config:
        step = sch.sample_categorical(candidates=steps, probs=[1 / len(steps)] * len(steps))
    elif config["unroll"] in steps:
        step = sch.sample_categorical(
            candidates=steps, probs=[1 / len(steps)] * len(steps), decision=steps.index(config["unroll"])
        )
    else:
        step = config["unroll"]
    sch.annotate(anchor, "pragma_auto_unroll_max_step", step)
    sch.annotate(anchor, "pragma_unroll_explicit", 1)


def _inline_others(sch: Any, block_name: str) -> list[Any]:
    """Inline every block but the main one (padding, bias add); return the output epilogue blocks left."""
    root = sch.get_sblock("root")
    left = []
    for block in sch.get_child_blocks(root):
        if sch.get(block).name_hint == block_name:
            continue
        try:
            sch.compute_inline(block)
        except Exception:  # noqa: BLE001 - an output block cannot be inlined into its consumers: it's the epilogue
            left.append(block)
    return left


def _cpu(
    sch: Any, main: Any, epilogue: list[Any], outer_s: list[Any], ordered: list[list[Any]], config: Config
) -> None:
    sch.reorder(*outer_s, *itertools.chain.from_iterable(ordered))
    if config["parallel"]:
        anchor = sch.fuse(*outer_s) if len(outer_s) > 1 else outer_s[0]
        sch.parallel(anchor)
    else:
        anchor = outer_s[-1]
    for block in epilogue:
        sch.reverse_compute_at(block, anchor)
    last_group = config["order"].split(",")[-1]
    if config["vectorize"] and last_group == "si" and ordered[-1]:
        sch.vectorize(ordered[-1][-1])
    _decompose(sch, main, ordered, config)


def _decompose(sch: Any, main: Any, ordered: list[list[Any]], config: Config) -> None:
    """Split the reduction's init out above its first reduction loop; an elementwise block has none."""
    reduce_loops = ordered_group(ordered, config, ("ro", "ri"))
    if reduce_loops:
        sch.decompose_reduction(main, reduce_loops[0])


def ordered_group(ordered: list[list[Any]], config: Config, names: tuple[str, ...]) -> list[Any]:
    groups = config["order"].split(",")
    return [loop for g, loops in zip(groups, ordered, strict=True) if g in names for loop in loops]


def _cuda(
    sch: Any,
    main: Any,
    epilogue: list[Any],
    outer_s: list[Any],
    thread_s: list[Any],
    ordered: list[list[Any]],
    outer_r: list[Any],
    config: Config,
) -> None:
    sch.reorder(*outer_s, *thread_s, *itertools.chain.from_iterable(ordered))
    bx = sch.fuse(*outer_s)
    tx = sch.fuse(*thread_s)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    n_threads = int(sch.get(tx).extent)
    if config["shared"] and outer_r:
        n_reads = len(sch.get(main).reads)
        for index in range(n_reads):
            staged = sch.cache_read(main, index, "shared")
            sch.compute_at(staged, outer_r[-1])
            anchor = sch.get(outer_r[-1])
            depth = 1 + next(d for d, loop in enumerate(sch.get_loops(main)) if sch.get(loop).same_as(anchor))
            copy_loops = sch.get_loops(staged)[depth:]
            fused = sch.fuse(*copy_loops)
            _, fetch = sch.split(fused, [None, n_threads])
            sch.bind(fetch, "threadIdx.x")
    # An epilogue (bias, ReLU) reading the result through global memory would need a global
    # scratch buffer, which CUDA kernels cannot allocate: with an epilogue the accumulator always
    # lives in registers and the epilogue is fused into the write-back.
    if config["local"] or epilogue:
        write_back = sch.cache_write(main, 0, "local")
        for block in epilogue:
            sch.reverse_compute_inline(block)
        sch.reverse_compute_at(write_back, tx)
    _decompose(sch, main, ordered, config)

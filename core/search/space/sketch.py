"""One auto-space sketch: its trace, each sampling decision's candidates, its parallel-extent limits."""

from __future__ import annotations

import functools
import math
from typing import Any

from tunelab.core.search.space.base import divisors

KNOB_KINDS = ("SamplePerfectTile", "SamplePartitionedTile", "SampleCategorical")
PARALLEL_KEY = "meta_schedule.parallel"  # the annotation whose limit MutateParallel changes
MAX_PARALLEL_LIMIT = 2**31 - 1  # the limit is an int32 immediate in the trace


@functools.lru_cache(maxsize=4096)
def tile_candidates(extent: int, parts: int, max_innermost: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered factorisation of `extent` into `parts` factors with the innermost <= max_innermost."""
    if parts == 1:
        return ((extent,),) if extent <= max_innermost else ()
    out: list[tuple[int, ...]] = []
    for d in divisors(extent):
        out.extend((d, *rest) for rest in tile_candidates(extent // d, parts - 1, max_innermost))
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def partitioned_candidates(extent: int, parts: int, pos: int, factor: int) -> tuple[tuple[int, ...], ...]:
    """What ``SamplePartitionedTile`` may draw: every ordered factorisation of ``extent`` into ``parts``
    factors whose factors from ``pos`` on multiply to a multiple of ``factor``."""
    return tuple(
        c for c in tile_candidates(extent, parts, extent) if math.prod(c[pos:]) % max(factor, 1) == 0
    )


class Sketch:
    """One design space: its trace and the candidates of each sampling decision."""

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        self.insts = [i for i in trace.insts if i.kind.name.startswith("Sample")]
        self.base_decisions = [plain_decision(trace.get_decision(i)) for i in self.insts]
        self.candidates: list[tuple[Any, ...] | None] = []  # None: fixed (compute location)
        for inst, decision in zip(self.insts, self.base_decisions, strict=True):
            if inst.kind.name == "SamplePerfectTile":
                n, max_inner = int(inst.attrs[0]), int(inst.attrs[1])
                extent = math.prod(decision)
                cands = tuple(
                    list(c) for c in tile_candidates(extent, n, max_inner if max_inner > 0 else extent)
                )
                self.candidates.append(cands or (list(decision),))
            elif inst.kind.name == "SamplePartitionedTile":  # the MMA tensor-core rule's spatial tiles
                n, pos, factor = (int(a) for a in inst.attrs[:3])
                cands = tuple(list(c) for c in partitioned_candidates(math.prod(decision), n, pos, factor))
                self.candidates.append(cands or (list(decision),))
            elif inst.kind.name == "SampleCategorical":
                self.candidates.append(tuple(range(len(inst.attrs[0]))))
            else:
                self.candidates.append(None)
        self.size = math.prod(len(c) for c in self.candidates if c is not None)
        self.signature = trace_signature(trace)
        self.base_parallel = parallel_limits(trace)
        self._traces: dict[tuple[int, ...], Any] = {tuple(self.base_parallel): trace}

    def trace_with(self, parallel: list[int] | None) -> Any:
        """The sketch's trace with these parallel-extent limits (None: the sketch's own)."""
        key = tuple(parallel) if parallel is not None else tuple(self.base_parallel)
        if key not in self._traces:
            self._traces[key] = _replace_parallel_limits(self.trace, list(key))
        return self._traces[key]


def _parallel_annotations(trace: Any) -> list[Any]:
    """The trace's ``Annotate(block, meta_schedule.parallel, limit)`` instructions before postprocessing."""
    out = []
    for inst in trace.insts:
        if inst.kind.name == "EnterPostproc":
            break
        if inst.kind.name == "Annotate" and len(inst.attrs) == 1 and str(inst.attrs[0]) == PARALLEL_KEY:
            out.append(inst)
    return out


def parallel_limits(trace: Any) -> list[int]:
    """The parallel-extent limit of each ``meta_schedule.parallel`` annotation, in program order."""
    return [int(inst.inputs[1]) for inst in _parallel_annotations(trace)]


def _replace_parallel_limits(trace: Any, limits: list[int]) -> Any:
    """The trace with its parallel annotations' limits replaced, as MutateParallel rewrites them."""
    import tvm
    from tvm.s_tir.schedule import Instruction, Trace

    limit_of = list(zip(_parallel_annotations(trace), limits, strict=True))
    insts = []
    decisions = {}
    for inst in trace.insts:
        new = inst
        for annotation, limit in limit_of:
            if inst.same_as(annotation):
                new = Instruction(
                    inst.kind, [inst.inputs[0], tvm.tirx.IntImm("int32", limit)], inst.attrs, inst.outputs
                )
        decision = trace.get_decision(inst)
        if decision is not None:
            decisions[new] = decision
        insts.append(new)
    return Trace(insts, decisions)


def trace_signature(trace: Any) -> list[str]:
    """What tells sketches apart: every instruction before postprocessing with its attributes and
    which earlier results it reads (sketches often differ only in the loop a block is moved to),
    plus the fixed compute-location decisions."""
    produced: list[Any] = []

    def ref(rv: Any) -> str:
        for pos, seen in enumerate(produced):
            if hasattr(rv, "same_as") and rv.same_as(seen):
                return f"%{pos}"
        return str(rv) if isinstance(rv, int | float | str) or rv is None else "?"

    sig = []
    for inst in trace.insts:
        if inst.kind.name == "EnterPostproc":
            break
        entry = inst.kind.name
        if not entry.startswith("Sample"):
            entry += f"{inst.attrs}"
        entry += "(" + ",".join(ref(x) for x in inst.inputs) + ")"
        if inst.kind.name == "SampleComputeLocation":
            entry += str(trace.get_decision(inst))
        sig.append(entry)
        produced.extend(inst.outputs)
    return sig


def plain_decision(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "__len__") and not isinstance(value, str):
        return [int(v) for v in value]
    return int(value)

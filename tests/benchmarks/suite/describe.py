"""A MetaSchedule schedule in words: what it tiles, parallelizes, vectorizes, unrolls, caches and packs.

Two sources, each for what it says exactly:

* the trace (its JSON, ``[instructions, decisions]``, as MetaSchedule's database and tunelab store it)
  says how each original loop was split (the sampled tile factors), which blocks were inlined, cached or
  computed at another loop, and the unroll step it chose;
* the scheduled IR (the trace applied to the workload's module) says which loops ended up parallel or
  vectorized and their extents, after the postprocessors fused them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScheduleFacts:
    """What a schedule does, as plain data (for the JSON) and in words (:meth:`words`)."""

    tiles: dict[str, list[int]] = field(default_factory=dict)  # "C.i" -> [4, 8, 32]
    parallel: list[tuple[str, int]] = field(default_factory=list)  # (loop, extent)
    vectorize: list[tuple[str, int]] = field(default_factory=list)
    unroll_max_step: int | None = None  # 0: none; None: the schedule does not say
    cache_writes: list[str] = field(default_factory=list)  # "C (global) at j.1"
    cache_reads: list[str] = field(default_factory=list)
    inlined: list[str] = field(default_factory=list)
    computed_at: list[str] = field(default_factory=list)  # "pad at C.i.1"
    packed: list[str] = field(default_factory=list)  # buffers whose layout is rewritten
    rfactor: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def words(self) -> str:
        """``"tiles i 4x8x32, j 2x64x8, k 256x4; parallel over 64 (i.0*j.0); vectorizes 8 (j.3); ..."``."""
        parts = []
        if self.tiles:
            shown = [f"{axis} {'x'.join(str(f) for f in fs)}" for axis, fs in self.tiles.items()]
            parts.append("tiles " + ", ".join(shown))
        if self.parallel:
            parts.append("parallel over " + ", ".join(f"{n} ({loop})" for loop, n in self.parallel))
        if self.vectorize:
            parts.append("vectorizes " + ", ".join(f"{n} ({loop})" for loop, n in self.vectorize))
        if self.unroll_max_step:
            parts.append(f"unrolls up to {self.unroll_max_step} steps")
        elif self.unroll_max_step == 0:
            parts.append("no unrolling")
        if self.cache_writes:
            parts.append("writes through a cache: " + ", ".join(self.cache_writes))
        if self.cache_reads:
            parts.append("reads through a cache: " + ", ".join(self.cache_reads))
        if self.packed:
            parts.append("packs " + ", ".join(self.packed) + " (layout rewrite)")
        if self.inlined:
            parts.append("inlines " + ", ".join(self.inlined))
        if self.computed_at:
            parts.append("computes " + ", ".join(self.computed_at))
        if self.rfactor:
            parts.append("rfactor on " + ", ".join(self.rfactor))
        return "; ".join(parts) or "the unscheduled loop nest"


def replayed(mod: Any, trace_json: Any) -> Any:
    """The schedule a stored trace (``trace.as_json()``, plain JSON, postprocessing included) makes of ``mod``."""
    from tvm.s_tir import Schedule, Trace

    sch = Schedule(mod)
    Trace.apply_json_to_schedule(trace_json, sch)
    return sch


def describe_schedule(mod: Any, trace_json: Any) -> ScheduleFacts:
    """The facts of the schedule ``trace_json`` (``trace.as_json()``, plain JSON) makes of ``mod``."""
    sch = replayed(mod, trace_json)
    facts = _trace_facts(mod, trace_json)
    parallel, vectorize = _loop_kinds(sch.mod["main"])
    return ScheduleFacts(**{**facts, "parallel": parallel, "vectorize": vectorize})


def _original_loops(mod: Any) -> dict[str, list[str]]:
    """Each block's loop variable names in the unscheduled module, outermost first."""
    from tvm.s_tir import Schedule

    sch = Schedule(mod)
    names: dict[str, list[str]] = {}
    for block in _blocks(sch.mod["main"].body):
        loops = sch.get_loops(sch.get_sblock(block))
        names[block] = [str(sch.get(loop).loop_var.name) for loop in loops]
    return names


def _trace_facts(mod: Any, trace_json: Any) -> dict[str, Any]:
    """Tiles, caches, inlining, compute locations, packing and the unroll step, read off the trace."""
    insts, decisions = trace_json
    decided = {int(i): d for i, d in decisions}
    loops = _original_loops(mod)
    blocks: dict[str, str] = {}  # block RV -> block name
    loop_names: dict[str, str] = {}  # loop RV -> a readable name ("j.1")
    values: dict[str, int] = {}  # sampled RV -> its value
    facts: dict[str, Any] = {
        "tiles": {},
        "cache_writes": [],
        "cache_reads": [],
        "inlined": [],
        "computed_at": [],
        "packed": [],
        "rfactor": [],
        "unroll_max_step": None,
    }
    seen_loops: set[str] = set()  # blocks whose original loops are named already
    postproc = False
    for index, (kind, inputs, attrs, outputs) in enumerate(insts):
        if kind == "EnterPostproc":
            postproc = True
        elif kind == "GetSBlock":
            blocks[outputs[0]] = str(attrs[0])
        elif kind == "GetLoops" and not postproc:
            name = blocks.get(inputs[0])
            # Only the first GetLoops of a block sees its original loops; later ones see split loops.
            if name in loops and name not in seen_loops and len(outputs) == len(loops[name]):
                seen_loops.add(name)
                for rv, loop in zip(outputs, loops[name], strict=True):
                    loop_names[rv] = f"{name}.{loop}" if len(loops) > 1 else loop
        elif kind == "SamplePerfectTile":
            for rv, value in zip(outputs, decided.get(index, ()), strict=False):
                values[rv] = int(value)
        elif kind == "SampleCategorical":
            candidates = attrs[0]
            if index in decided:
                values[outputs[0]] = int(candidates[int(decided[index])])
        elif kind == "Split":
            source = loop_names.get(inputs[0])
            factors = [values.get(f) if isinstance(f, str) else f for f in inputs[1:]]
            if source is not None and all(isinstance(f, int) for f in factors):
                facts["tiles"][source] = factors
            for level, rv in enumerate(outputs):
                loop_names[rv] = f"{source or '?'}.{level}"
        elif kind == "CacheWrite":
            facts["cache_writes"].append(f"{blocks.get(inputs[0], '?')} ({attrs[1]})")
            blocks[outputs[0]] = f"{blocks.get(inputs[0], '?')}_cache"
        elif kind == "CacheRead":
            facts["cache_reads"].append(f"{blocks.get(inputs[0], '?')} input {attrs[0]} ({attrs[1]})")
            blocks[outputs[0]] = f"{blocks.get(inputs[0], '?')}_read_cache"
        elif (
            kind == "ReverseComputeAt"
            and facts["cache_writes"]
            and blocks.get(inputs[0], "").endswith("_cache")
        ):
            facts["cache_writes"][-1] += f" written back at {loop_names.get(inputs[1], 'a tile loop')}"
        elif kind in ("ComputeAt", "ReverseComputeAt"):
            facts["computed_at"].append(f"{blocks.get(inputs[0], '?')} at {loop_names.get(inputs[1], '?')}")
        elif kind in ("ComputeInline", "ReverseComputeInline"):
            facts["inlined"].append(blocks.get(inputs[0], "?"))
        elif kind in ("TransformLayout", "LayoutTransform"):
            facts["packed"].append(f"{blocks.get(inputs[0], '?')} buffer {attrs[0] if attrs else '?'}")
        elif kind == "RFactor":
            facts["rfactor"].append(loop_names.get(inputs[0], "?"))
        elif kind == "Annotate":
            key = attrs[0] if attrs else ""
            value = inputs[1] if len(inputs) > 1 else None
            value = values.get(value, value) if isinstance(value, str) else value
            if key in ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit") and isinstance(
                value, int
            ):
                facts["unroll_max_step"] = value
            elif key == "pragma_auto_unroll_max_step" and isinstance(value, int):
                facts["unroll_max_step"] = value
            elif key == "meta_schedule.layout_rewrite_preproc":
                facts["packed"].append(blocks.get(inputs[0], "?"))
    return facts


def _blocks(stmt: Any) -> list[str]:
    """The names of the blocks under ``stmt`` (the root block left out), in program order."""
    names: list[str] = []

    def visit(node: Any) -> None:
        block = getattr(node, "block", None)
        if block is not None and hasattr(block, "name_hint"):
            if block.name_hint != "root":
                names.append(str(block.name_hint))
            visit(block.body)
            return
        for child in _children(node):
            visit(child)

    visit(stmt)
    return names


def _children(node: Any) -> list[Any]:
    seq = getattr(node, "seq", None)
    if seq is not None:
        return list(seq)
    out = []
    for attr in ("body", "then_case", "else_case"):
        child = getattr(node, attr, None)
        if child is not None:
            out.append(child)
    return out


def _loop_kinds(func: Any) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """((loop, extent) of the parallel loops, of the vectorized loops) of a scheduled PrimFunc."""
    from tvm.tirx import ForKind

    parallel: list[tuple[str, int]] = []
    vectorize: list[tuple[str, int]] = []

    def visit(node: Any) -> None:
        kind = getattr(node, "kind", None)
        if kind is not None and hasattr(node, "loop_var"):
            entry = (_readable(str(node.loop_var.name)), int(node.extent))
            if int(kind) == ForKind.PARALLEL:
                parallel.append(entry)
            elif int(kind) == ForKind.VECTORIZED:
                vectorize.append(entry)
        block = getattr(node, "block", None)
        if block is not None and hasattr(block, "name_hint"):
            visit(block.body)
            if getattr(block, "init", None) is not None:
                visit(block.init)
            return
        for child in _children(node):
            visit(child)

    visit(func.body)
    return _unique(parallel), _unique(vectorize)


def _readable(name: str) -> str:
    """``i_0_j_0_fused`` -> ``i.0*j.0``: the split levels a loop fuses (a reduction's init loop reads
    as the loop it initialises)."""
    name = name.replace("_init", "")
    fused = name.endswith("_fused")
    while name.endswith("_fused"):
        name = name[: -len("_fused")]
    parts = name.split("_")
    if fused and len(parts) % 2 == 0 and all(p.isdigit() for p in parts[1::2]):
        return "*".join(f"{parts[i]}.{parts[i + 1]}" for i in range(0, len(parts), 2))
    head, _, tail = name.rpartition("_")
    return f"{head}.{tail}" if head and tail.isdigit() else name


def _unique(entries: list[tuple[str, int]]) -> list[tuple[str, int]]:
    seen: list[tuple[str, int]] = []
    for entry in entries:
        if entry not in seen:
            seen.append(entry)
    return seen

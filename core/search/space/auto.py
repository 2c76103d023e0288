"""The auto space: Ansor-style sketches derived from the compute by MetaSchedule's rules.

The space is the set of sketches MetaSchedule's post-order-apply generator produces for the
target with the enabled rules, and, inside each sketch, every random decision the sketch makes
(tile sizes through ``SamplePerfectTile``, unroll steps and the like through ``SampleCategorical``).
Compute-location decisions stay as the sketch sampled them.

The editable data names each rule with ``enabled`` and its main limits, e.g.
``{"name": "MultiLevelTiling", "enabled": true, "params": {"structure": "SSRSRS",
"max_innermost_factor": 64}}``. A config is ``{"sketch": 1, "decisions": [[4, 8, 2, 1], 2, ...]}``:
one value per sampling instruction of that sketch, in program order. A config may also hold
``"parallel": [16]``, the parallel-extent limit of each ``meta_schedule.parallel`` annotation where it
differs from the sketch's: MetaSchedule's ``MutateParallel`` changes that limit, which is an input of
an ``Annotate`` instruction, not a sampling decision, so decisions alone cannot say which schedule it
proposed (without it about 1 conv2d proposal in 80 matched no config and was never measured).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError, shown
from tunelab.core.records import Config, is_auto_config
from tunelab.core.search.space.base import SearchSpace, divisors
from tunelab.core.search.space.checks import entry_list, is_int_in
from tunelab.core.search.space.mma import mma_groups, mma_rule, permuted_layout_check
from tunelab.core.search.space.packing import AUTO, PackingChoice, choose_packing
from tunelab.core.search.space.tvm_context import (
    InvalidSchedule,
    block_axes,
    find_main_block,
    light_tune_context,
    schedule_features,
)
from tunelab.core.target.info import TargetInfo
from tunelab.core.workloads.dtypes import split_dtype

# The rules MetaSchedule uses by default (tvm src/s_tir/meta_schedule/schedule_rule/schedule_rule.cc),
# with the limits a person most often changes. The tensor-core rule (MultiLevelTilingTensorCore, with
# MetaSchedule's wmma intrinsics, 16x16x16, operands staged in dynamic shared memory) derives sketches
# only for float16 inputs (``float16`` and ``float16:float32``) on a GPU of sm_70 or later; elsewhere it
# is kept in the list and builds nothing. Its f16f16f32 kernels build with one pass turned off
# (tunelab.core.target.build). Before it, the MMA tensor-core rule (MultiLevelTilingTensorCoreMMA:
# MetaSchedule's m16n8k8 ``mma.sync`` path with ``ldmatrix`` and a ``cp.async`` pipeline,
# tunelab.core.search.space.mma) derives sketches of a plain matrix multiply (GEMM) for float16 and
# bfloat16 inputs on sm_80 or later; a
# block it tiles is left alone by the wmma rule, so on Ampere and Hopper the wmma rule takes what the MMA
# rule cannot (and everything once the MMA rule is disabled). A space stored before the MMA rule existed
# lists no such rule and keeps its wmma sketches.
DEFAULT_RULES: dict[str, list[dict[str, Any]]] = {
    "llvm": [
        {"name": "AutoInline", "enabled": True, "params": {}},
        {
            "name": "AddRFactor",
            "enabled": True,
            "params": {"max_jobs_per_core": 16, "max_innermost_factor": 64},
        },
        {
            "name": "MultiLevelTiling",
            "enabled": True,
            # "auto": packed where every input is reused enough to pay for the copy (space/packing.py)
            "params": {"structure": "SSRSRS", "max_innermost_factor": 64, "pack_inputs": "auto"},
        },
        {
            "name": "ParallelizeVectorizeUnroll",
            "enabled": True,
            "params": {
                "max_jobs_per_core": 16,
                "max_vectorize_extent": 64,
                "unroll_max_steps": [0, 16, 64, 512],
            },
        },
        {"name": "RandomComputeLocation", "enabled": True, "params": {}},
    ],
    "cuda": [
        {
            "name": "MultiLevelTilingTensorCoreMMA",
            "enabled": True,
            "params": {"structure": "SSSRRSRS", "max_innermost_factor": 4, "software_pipeline": True},
        },
        {
            "name": "MultiLevelTilingTensorCore",
            "enabled": True,
            "params": {"structure": "SSSRRSRS", "max_innermost_factor": 4, "software_pipeline": False},
        },
        {
            "name": "MultiLevelTiling",
            "enabled": True,
            "params": {"structure": "SSSRRSRS", "max_innermost_factor": 64, "shared_staging": True},
        },
        {"name": "AutoInline", "enabled": True, "params": {}},
        {
            "name": "CrossThreadReduction",
            "enabled": True,
            "params": {"thread_extents": [4, 8, 16, 32, 64, 128, 256, 512]},
        },
        {
            "name": "ParallelizeVectorizeUnroll",
            "enabled": True,
            "params": {"unroll_max_steps": [0, 16, 64, 512, 1024]},
        },
        {
            "name": "AutoBind",
            "enabled": True,
            "params": {"max_threadblocks": 256, "thread_extents": [32, 64, 128, 256, 512, 1024]},
        },
    ],
}
STRUCTURES = {"llvm": ("SSRSRS", "SRSRS", "SSRS", "SSRSRSS"), "cuda": ("SSSRRSRS", "SSRRSRS", "SSSRRS")}
MAX_SKETCHES = 64
BOOL_LIMITS = ("shared_staging", "pack_inputs", "software_pipeline")
TENSOR_CORE_MIN_SM = 70  # WMMA needs Volta or later
KNOB_KINDS = ("SamplePerfectTile", "SamplePartitionedTile", "SampleCategorical")
PARALLEL_KEY = "meta_schedule.parallel"  # the annotation whose limit MutateParallel changes
MAX_PARALLEL_LIMIT = 2**31 - 1  # the limit is an int32 immediate in the trace


def default_auto_space(target_kind: str) -> dict[str, Any]:
    return {
        "kind": "auto",
        "target_kind": target_kind,
        "rules": [{**r, "params": dict(r["params"])} for r in DEFAULT_RULES[target_kind]],
    }


def _int_list(name: str, key: str, value: Any, lo: int, hi: int) -> list[int]:
    if not isinstance(value, list) or not value or not all(is_int_in(v, lo, hi) for v in value):
        raise SpaceError(f"rule {name}: {key} must be a non-empty list of integers between {lo} and {hi}")
    return value


def _int(name: str, key: str, value: Any, lo: int, hi: int) -> int:
    if not is_int_in(value, lo, hi):
        raise SpaceError(f"rule {name}: {key} must be an integer between {lo} and {hi}, not {shown(value)}")
    return value


def _last_line(exc: BaseException) -> str:
    """The last line of a TVM error (where it says what is wrong), or its type when it says nothing."""
    lines = str(exc).strip().splitlines()
    return lines[-1][:300] if lines else type(exc).__name__


def check_rules(data: dict[str, Any], target_kind: str) -> list[dict[str, Any]]:
    """Check an edited rule list; raise SpaceError with the reason."""
    rules = entry_list(data, "rules", "an auto space")
    defaults = {r["name"]: r for r in DEFAULT_RULES[target_kind]}
    seen = set()
    cleaned = []
    for rule in rules:
        name = rule.get("name") if isinstance(rule, dict) else None
        if not isinstance(name, str) or name not in defaults:
            raise SpaceError(
                f"unknown sketch rule {shown(name)} for {target_kind}; rules are {sorted(defaults)}"
            )
        if name in seen:
            raise SpaceError(f"sketch rule {name} is listed twice")
        seen.add(name)
        given = rule.get("params") or {}
        if not isinstance(given, dict):
            raise SpaceError(f"rule {name}: params must be a JSON object of limits, not {shown(given)}")
        params = {**defaults[name]["params"], **given}
        unknown = set(params) - set(defaults[name]["params"])
        if unknown:
            raise SpaceError(
                f"rule {name}: unknown limit(s) {shown(sorted(unknown), 120)}; "
                f"limits are {sorted(defaults[name]['params'])}"
            )
        for key, value in params.items():
            if key == "structure":
                if value not in STRUCTURES[target_kind]:
                    raise SpaceError(
                        f"rule {name}: structure {shown(value)} is not one of {list(STRUCTURES[target_kind])}"
                    )
            elif key in ("unroll_max_steps", "thread_extents"):
                _int_list(name, key, value, 0 if key == "unroll_max_steps" else 1, 4096)
            elif key == "pack_inputs":
                if not isinstance(value, bool) and value != AUTO:
                    raise SpaceError(f'rule {name}: {key} must be true, false or "auto", not {shown(value)}')
            elif key in BOOL_LIMITS:
                if not isinstance(value, bool):
                    raise SpaceError(f"rule {name}: {key} must be true or false, not {shown(value)}")
            else:
                _int(name, key, value, 1, 4096)
        enabled = rule.get("enabled", True)
        if not isinstance(enabled, bool):
            raise SpaceError(f"rule {name}: enabled must be true or false")
        cleaned.append({"name": name, "enabled": enabled, "params": params})
    if not any(r["enabled"] for r in cleaned):
        raise SpaceError("enable at least one sketch rule")
    return cleaned


def tensor_core_groups(dtype: str, arch: str | None) -> list[dict[str, str]]:
    """MetaSchedule's wmma intrinsic groups for these dtypes on this GPU (B as K x N and as N x K), or
    none: inputs other than float16, or an arch before sm_70. Importing the intrinsics registers them
    (the slow tensor-intrinsic import, paid only here)."""
    inputs, acc = split_dtype(dtype)
    digits = "".join(ch for ch in str(arch or "") if ch.isdigit())
    if (
        inputs != "float16"
        or acc not in ("float16", "float32")
        or not digits
        or int(digits) < TENSOR_CORE_MIN_SM
    ):
        return []
    from tvm.s_tir.tensor_intrin import cuda as intrinsics

    return [
        intrinsics.get_wmma_intrin_group(
            load_scope="shared.dyn", store_scope="shared.dyn", in_dtype=inputs, out_dtype=acc, trans_b=trans_b
        )
        for trans_b in (False, True)
    ]


def build_rules(
    rules: list[dict[str, Any]],
    target_kind: str,
    dtype: str = "float32",
    arch: str | None = None,
    plain_matmul: bool = True,
) -> list[Any]:
    """MetaSchedule's rules for the edited list. ``plain_matmul``: the compute's main block is an
    ``(i, j, k)`` matrix multiply, the only block MetaSchedule's MMA path tiles in TVM 0.27 (a
    convolution's MMA sketch derives, but none of 300 random draws of the ResNet 3x3 layer passed
    VerifyGPUCode on sm_90; its wmma sketches build)."""
    from tvm.s_tir.meta_schedule import schedule_rule as sr

    built = []
    for rule in rules:
        if not rule["enabled"]:
            continue
        p = rule["params"]
        name = rule["name"]
        if name == "MultiLevelTilingTensorCoreMMA":
            groups = mma_groups(dtype, arch) if target_kind == "cuda" and plain_matmul else []
            if groups:
                built.append(mma_rule(p, groups))
        elif name == "MultiLevelTilingTensorCore":
            groups = tensor_core_groups(dtype, arch) if target_kind == "cuda" else []
            if groups:
                built.append(
                    sr.MultiLevelTilingTensorCore(
                        intrin_groups=groups,
                        structure=p["structure"],
                        tile_binds=["blockIdx.y", "blockIdx.x", "threadIdx.y"],
                        max_innermost_factor=p["max_innermost_factor"],
                        vector_load_lens=[1, 2, 3, 4, 8, 16],
                        reuse_read=sr.ReuseType(req="must", levels=[4], scope="shared.dyn"),
                        reuse_write=sr.ReuseType(req="must", levels=[2], scope="shared.dyn"),
                        use_software_pipeline=p["software_pipeline"],
                    )
                )
        elif name == "AutoInline":
            cuda = target_kind == "cuda"
            built.append(sr.InlineConstantScalars())
            built.append(
                sr.AutoInline(
                    into_producer=cuda,
                    into_consumer=True,
                    inline_const_tensor=True,
                    disallow_if_then_else=not cuda,
                    require_injective=not cuda,
                    require_ordered=not cuda,
                    disallow_op=None if cuda else ["tirx.exp"],
                )
            )
        elif name == "AddRFactor":
            built.append(
                sr.AddRFactor(
                    max_jobs_per_core=p["max_jobs_per_core"], max_innermost_factor=p["max_innermost_factor"]
                )
            )
        elif name == "MultiLevelTiling":
            if target_kind == "cuda":
                read = sr.ReuseType(req="must", levels=[4], scope="shared") if p["shared_staging"] else None
                built.append(
                    sr.MultiLevelTiling(
                        structure=p["structure"],
                        tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
                        max_innermost_factor=p["max_innermost_factor"],
                        vector_load_lens=[1, 2, 3, 4, 8, 16],
                        reuse_read=read,
                        reuse_write=sr.ReuseType(req="must", levels=[3], scope="local"),
                    )
                )
            else:
                # pack_inputs: each input's tile is copied into a buffer of its own at the outermost tile
                # level, as BLAS packs its panels: the inner loops then stride through a tile-sized
                # row instead of the whole matrix's (at N = 1024 a 4 KiB stride, which maps every row
                # to the same cache sets). MetaSchedule takes a read cache as "must" only (not "may"),
                # so the switch is the person's or, with "auto", the shape's (AutoSpace resolves it
                # before building the rules), not the search's.
                packs = p.get("pack_inputs")
                if packs == AUTO:
                    raise ValueError(
                        'pack_inputs "auto" must be resolved for the problem before building rules'
                    )
                read = sr.ReuseType(req="must", levels=[1], scope="global") if packs else None
                built.append(
                    sr.MultiLevelTiling(
                        structure=p["structure"],
                        max_innermost_factor=p["max_innermost_factor"],
                        reuse_read=read,
                        reuse_write=sr.ReuseType(req="may", levels=[1, 2], scope="global"),
                    )
                )
        elif name == "ParallelizeVectorizeUnroll":
            if target_kind == "cuda":
                built.append(
                    sr.ParallelizeVectorizeUnroll(
                        max_jobs_per_core=-1,
                        max_vectorize_extent=-1,
                        unroll_max_steps=p["unroll_max_steps"],
                        unroll_explicit=True,
                    )
                )
            else:
                built.append(
                    sr.ParallelizeVectorizeUnroll(
                        max_jobs_per_core=p["max_jobs_per_core"],
                        max_vectorize_extent=p["max_vectorize_extent"],
                        unroll_max_steps=p["unroll_max_steps"],
                        unroll_explicit=True,
                    )
                )
        elif name == "RandomComputeLocation":
            built.append(sr.RandomComputeLocation())
        elif name == "CrossThreadReduction":
            built.append(sr.CrossThreadReduction(thread_extents=p["thread_extents"]))
        elif name == "AutoBind":
            built.append(
                sr.AutoBind(max_threadblocks=p["max_threadblocks"], thread_extents=p["thread_extents"])
            )
    return built


def default_postprocs(target_kind: str, tensor_core: bool = False) -> list[Any]:
    """MetaSchedule's postprocessors for the target, spelled out: "from-target" would also build the
    x86 tensorize rules, which need the tensor intrinsics (an 11 s import) even when unused. With
    ``tensor_core``, RewriteTensorize turns the tensor-core sketches' marked blocks into intrinsics."""
    from tvm.s_tir.meta_schedule import postproc as pp

    if target_kind == "cuda":
        return [
            pp.DisallowDynamicLoop(),
            pp.RewriteCooperativeFetch(),
            pp.RewriteUnboundBlock(max_threadblocks=256),
            pp.RewriteParallelVectorizeUnroll(),
            pp.RewriteReductionBlock(),
            # the MMA path's staged tiles must fit its permuted layout (space/mma.py) or the build fails;
            # before VerifyGPUCode, which lowers the module: this check only reads it
            *([permuted_layout_check()] if tensor_core else []),
            pp.VerifyGPUCode(),
            *([pp.RewriteTensorize(vectorize_init_loop=True)] if tensor_core else []),
        ]
    return [
        pp.DisallowDynamicLoop(),
        pp.RewriteParallelVectorizeUnroll(),
        pp.RewriteReductionBlock(),
        pp.RewriteLayout(),
    ]


def default_mutators(target_kind: str) -> dict[Any, float]:
    from tvm.s_tir.meta_schedule import mutator as mu

    if target_kind == "cuda":
        return {mu.MutateTileSize(): 0.9, mu.MutateUnroll(): 0.08, mu.MutateThreadBinding(): 0.02}
    return {
        mu.MutateTileSize(): 0.9,
        mu.MutateComputeLocation(): 0.05,
        mu.MutateUnroll(): 0.03,
        mu.MutateParallel(max_jobs_per_core=16): 0.02,
    }


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
        self.base_decisions = [_plain(trace.get_decision(i)) for i in self.insts]
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
        self.signature = _signature(trace)
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


def _signature(trace: Any) -> list[str]:
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


def _plain_matmul(prim_func: Any) -> bool:
    """Whether the compute's main block is ``C[i, j] += A[i, k] * B[k, j]``-shaped: two spatial axes and
    one reduction (see :func:`build_rules`)."""
    axes = block_axes(prim_func, find_main_block(prim_func))
    return [kind for _, _, kind in axes] == ["spatial", "spatial", "reduce"]


def _postproc_name(postproc: Any) -> str:
    """A postprocessor's name for a rejection; the one Python postprocessor (space/mma.py) comes back from
    TVM as a generic ``_PyPostproc``."""
    name = type(postproc).__name__
    return "PermutedLayoutCheck (an MMA tile's staged rows)" if name == "_PyPostproc" else name


def _plain(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "__len__") and not isinstance(value, str):
        return [int(v) for v in value]
    return int(value)


def _packing_choice(
    rules: list[dict[str, Any]], workload: Any, shape: dict[str, int]
) -> PackingChoice | None:
    """What the CPU MultiLevelTiling rule's ``pack_inputs`` means for this problem (None: no such limit)."""
    for rule in rules:
        if rule["name"] == "MultiLevelTiling" and "pack_inputs" in rule["params"]:
            return choose_packing(rule["params"]["pack_inputs"], workload, shape)
    return None


def _resolved(rules: list[dict[str, Any]], packing: PackingChoice | None) -> list[dict[str, Any]]:
    """The rules with ``pack_inputs`` as the boolean it resolved to (the stored rules keep "auto")."""
    if packing is None:
        return rules
    return [
        {**r, "params": {**r["params"], "pack_inputs": packing.packs}}
        if r["name"] == "MultiLevelTiling"
        else r
        for r in rules
    ]


def _with_parallel_of(source: Config, config: Config) -> Config:
    """``config`` with ``source``'s parallel-extent limits, where it has its own."""
    return {**config, "parallel": list(source["parallel"])} if "parallel" in source else config


class AutoSpace(SearchSpace):
    kind = "auto"

    def __init__(
        self,
        workload: Any,
        shape: dict[str, int],
        dtype: str,
        target: TargetInfo,
        data: dict[str, Any] | None = None,
    ) -> None:
        import tvm
        from tvm.s_tir import meta_schedule as ms

        self.workload = workload
        self.shape = dict(shape)
        self.dtype = dtype
        self.target = target
        self.rules = check_rules(data if data is not None else default_auto_space(target.kind), target.kind)
        self.mod = tvm.IRModule({"main": workload.prim_func(shape, dtype)})
        arch = target.json.get("arch") if target.kind == "cuda" else None
        self.packing = _packing_choice(self.rules, workload, shape)
        sch_rules = build_rules(
            _resolved(self.rules, self.packing), target.kind, dtype, arch, _plain_matmul(self.mod["main"])
        )
        self.tensor_core = any(type(r).__name__ == "MultiLevelTilingTensorCore" for r in sch_rules)
        self.space_generator = ms.space_generator.PostOrderApply(
            sch_rules=sch_rules,
            postprocs=default_postprocs(target.kind, self.tensor_core),
            mutator_probs=default_mutators(target.kind),
        )
        self.context = light_tune_context(self.mod, target.tvm_target(), space_generator=self.space_generator)
        try:
            spaces = self.context.generate_design_space()
        except Exception as exc:  # noqa: BLE001 - MetaSchedule's rules raise TVMError or Python errors alike
            raise SpaceError(
                f"MetaSchedule could not derive sketches with these rules: {_last_line(exc)}"
            ) from None
        if not spaces:
            raise SpaceError("the enabled rules derive no sketch for this compute")
        self.sketches = [Sketch(s.trace) for s in spaces[:MAX_SKETCHES]]
        self.postprocs = list(self.space_generator.postprocs)
        self._max_knobs = max(
            sum(len(c) if isinstance(c, list) else 1 for c in s.base_decisions if c is not None)
            for s in self.sketches
        )
        self._features_cache: dict[str, np.ndarray] = {}

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "auto",
            "target_kind": self.target.kind,
            "rules": self.rules,
            "sketches": [{"size": s.size, "decisions": len(s.insts)} for s in self.sketches],
            **({"packing": self.packing.to_json()} if self.packing else {}),
        }

    @property
    def size(self) -> int:
        return sum(s.size for s in self.sketches)

    def point(self, index: int) -> Config:
        if not 0 <= index < self.size:
            raise SpaceError(f"grid index {index} is outside the space (size {self.size})")
        sketch_index = 0
        while index >= self.sketches[sketch_index].size:
            index -= self.sketches[sketch_index].size
            sketch_index += 1
        sketch = self.sketches[sketch_index]
        decisions = list(sketch.base_decisions)
        for pos in reversed(range(len(decisions))):
            cands = sketch.candidates[pos]
            if cands is None:
                continue
            index, k = divmod(index, len(cands))
            decisions[pos] = cands[k]
        return {"sketch": sketch_index, "decisions": decisions}

    def sample(self, rng: np.random.Generator) -> Config:
        weights = np.array([float(s.size) for s in self.sketches])
        i = int(rng.choice(len(self.sketches), p=weights / weights.sum())) if len(self.sketches) > 1 else 0
        sketch = self.sketches[i]
        decisions = [
            c[int(rng.integers(len(c)))] if c is not None else d
            for c, d in zip(sketch.candidates, sketch.base_decisions, strict=True)
        ]
        return {"sketch": i, "decisions": decisions}

    def mutate(self, config: Config, rng: np.random.Generator) -> Config:
        sketch = self.sketches[config["sketch"]]
        free = [p for p, c in enumerate(sketch.candidates) if c is not None and len(c) > 1]
        if not free:
            return _with_parallel_of(
                config, {"sketch": config["sketch"], "decisions": list(config["decisions"])}
            )
        pos = free[int(rng.integers(len(free)))]
        cands = sketch.candidates[pos] or ()  # free positions have candidates
        choices = [c for c in cands if c != config["decisions"][pos]]
        decisions = list(config["decisions"])
        decisions[pos] = choices[int(rng.integers(len(choices)))]
        return _with_parallel_of(config, {"sketch": config["sketch"], "decisions": decisions})

    def crossover(self, a: Config, b: Config, rng: np.random.Generator) -> Config:
        if a["sketch"] != b["sketch"]:
            return _with_parallel_of(a, {"sketch": a["sketch"], "decisions": list(a["decisions"])})
        mixed = [x if rng.random() < 0.5 else y for x, y in zip(a["decisions"], b["decisions"], strict=True)]
        return _with_parallel_of(a, {"sketch": a["sketch"], "decisions": mixed})

    def knob_vector(self, config: Config) -> np.ndarray:
        values = [float(config["sketch"])]
        for d in config["decisions"]:
            if isinstance(d, list):
                values.extend(math.log2(max(f, 1)) for f in d)
            elif d is not None:
                values.append(float(d))
        values += [0.0] * (self._max_knobs + 1 - len(values))
        return np.asarray(values[: self._max_knobs + 1], dtype=np.float64)

    def features(self, configs: list[Config]) -> np.ndarray:
        rows = []
        for config in configs:
            key = self.key(config)
            if key not in self._features_cache:
                try:
                    ir = schedule_features(self.schedule(config), self.target)
                except InvalidSchedule:
                    ir = np.zeros(328)
                self._features_cache[key] = np.concatenate([ir, self.knob_vector(config)])
            rows.append(self._features_cache[key])
        return np.stack(rows) if rows else np.zeros((0, 0))

    def check_config(self, config: Config) -> None:
        if not isinstance(config, dict) or not is_auto_config(config):
            raise SpaceError(
                'an auto-space config is {"sketch": i, "decisions": [...]} (and optionally "parallel": [...])'
            )
        i = config["sketch"]
        if not isinstance(i, int) or not 0 <= i < len(self.sketches):
            raise SpaceError(
                f"sketch {shown(i)} does not exist; the space has {len(self.sketches)} sketch(es)"
            )
        sketch = self.sketches[i]
        decisions = config["decisions"]
        if not isinstance(decisions, list) or len(decisions) != len(sketch.insts):
            raise SpaceError(f"sketch {i} takes {len(sketch.insts)} decisions")
        for pos, (value, cands) in enumerate(zip(decisions, sketch.candidates, strict=True)):
            if cands is not None and value not in cands:
                raise SpaceError(
                    f"sketch {i}, decision {pos} ({sketch.insts[pos].kind.name}): {shown(value)} is not allowed"
                )
        if "parallel" in config:
            limits = config["parallel"]
            if (
                not isinstance(limits, list)
                or len(limits) != len(sketch.base_parallel)
                or not all(is_int_in(v, 1, MAX_PARALLEL_LIMIT) for v in limits)
            ):
                raise SpaceError(
                    f'sketch {i}\'s "parallel" is {len(sketch.base_parallel)} parallel-extent limit(s), '
                    f"each an integer from 1 to {MAX_PARALLEL_LIMIT}; got {shown(limits)}"
                )

    def schedule(self, config: Config) -> Any:
        self.check_config(config)
        return self.replay(config["sketch"], config["decisions"], config.get("parallel"))

    def replay(self, sketch_index: int, decisions: list[Any], parallel: list[int] | None = None) -> Any:
        from tvm.s_tir import Schedule

        sketch = self.sketches[sketch_index]
        trace = sketch.trace_with(parallel)
        order = iter(decisions)  # the provider sees the sampling instructions in program order

        def provide(inst: Any, _inputs: Any, _attrs: Any, decision: Any) -> Any:
            if inst.kind.name.startswith("Sample"):
                value = next(order)
                return decision if value is None else value
            return decision

        sch = Schedule(self.mod)
        try:
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provide)
            sch.enter_postproc()
            for postproc in self.postprocs:
                if not postproc.apply(sch):
                    raise InvalidSchedule(f"postprocessor {_postproc_name(postproc)} rejected the schedule")
        except InvalidSchedule:
            raise
        except Exception as exc:  # noqa: BLE001 - a postprocessor or trace replay failing in any way: an invalid schedule
            raise InvalidSchedule(str(exc).strip().splitlines()[-1][:300]) from None
        return sch

    def ir_module(self) -> Any:
        return self.mod

    def design_space_generator(self) -> Any:
        return self.space_generator

    def decode(self, trace: Any, mod: Any = None) -> Config | None:
        """The config of a schedule MetaSchedule proposed (its sampling decisions), or None if no
        sketch fits. MetaSchedule simplifies the traces it evolves, so with `mod` (the proposed
        schedule's IR) the sketch is the one whose replay gives exactly that IR."""
        import tvm_ffi

        insts = [i for i in trace.insts if i.kind.name.startswith("Sample")]
        decisions = [_plain(trace.get_decision(i)) for i in insts]
        kinds = [i.kind.name for i in insts]
        signature = _signature(trace)
        parallel = parallel_limits(trace)
        fits: list[Config] = []
        for index, sketch in enumerate(self.sketches):
            if [i.kind.name for i in sketch.insts] != kinds:
                continue
            config: Config = {"sketch": index, "decisions": decisions}
            if parallel != sketch.base_parallel:
                config["parallel"] = parallel
            try:
                self.check_config(config)
            except SpaceError:
                continue
            fits.append(config)
        for config in fits:
            if mod is None:
                if self.sketches[config["sketch"]].signature == signature:
                    return config
                continue
            try:
                if tvm_ffi.structural_equal(self.schedule(config).mod, mod):
                    return config
            except InvalidSchedule:
                continue
        return None

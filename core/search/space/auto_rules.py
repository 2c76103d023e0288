"""The auto space's sketch rules: the defaults, the check of an edited list, MetaSchedule's objects for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tunelab.core.errors import SpaceError, shown
from tunelab.core.search.space.checks import entry_list, is_int_in
from tunelab.core.search.space.mma import mma_groups, mma_rule, permuted_layout_check, tensor_core_rule
from tunelab.core.search.space.packing import AUTO
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
BOOL_LIMITS = ("shared_staging", "pack_inputs", "software_pipeline")
TENSOR_CORE_MIN_SM = 70  # WMMA needs Volta or later


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


@dataclass(frozen=True)
class _Problem:
    """What a rule's MetaSchedule object depends on besides its limits."""

    target_kind: str
    dtype: str
    arch: str | None
    plain_matmul: bool

    @property
    def cuda(self) -> bool:
        return self.target_kind == "cuda"


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

    problem = _Problem(target_kind, dtype, arch, plain_matmul)
    built = []
    for rule in rules:
        builder = _BUILDERS.get(rule["name"])
        if rule["enabled"] and builder is not None:
            built.extend(builder(sr, rule["params"], problem))
    return built


def _tensor_core_mma(sr: Any, p: dict[str, Any], problem: _Problem) -> list[Any]:
    groups = mma_groups(problem.dtype, problem.arch) if problem.cuda and problem.plain_matmul else []
    return [mma_rule(p, groups)] if groups else []


def _tensor_core_wmma(sr: Any, p: dict[str, Any], problem: _Problem) -> list[Any]:
    groups = tensor_core_groups(problem.dtype, problem.arch) if problem.cuda else []
    return [tensor_core_rule(p, groups, write_staged=True)] if groups else []


def _auto_inline(sr: Any, p: dict[str, Any], problem: _Problem) -> list[Any]:
    cuda = problem.cuda
    return [
        sr.InlineConstantScalars(),
        sr.AutoInline(
            into_producer=cuda,
            into_consumer=True,
            inline_const_tensor=True,
            disallow_if_then_else=not cuda,
            require_injective=not cuda,
            require_ordered=not cuda,
            disallow_op=None if cuda else ["tirx.exp"],
        ),
    ]


def _add_rfactor(sr: Any, p: dict[str, Any], problem: _Problem) -> list[Any]:
    return [
        sr.AddRFactor(
            max_jobs_per_core=p["max_jobs_per_core"], max_innermost_factor=p["max_innermost_factor"]
        )
    ]


def _multi_level_tiling(sr: Any, p: dict[str, Any], problem: _Problem) -> list[Any]:
    if problem.cuda:
        read = sr.ReuseType(req="must", levels=[4], scope="shared") if p["shared_staging"] else None
        return [
            sr.MultiLevelTiling(
                structure=p["structure"],
                tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
                max_innermost_factor=p["max_innermost_factor"],
                vector_load_lens=[1, 2, 3, 4, 8, 16],
                reuse_read=read,
                reuse_write=sr.ReuseType(req="must", levels=[3], scope="local"),
            )
        ]
    # pack_inputs: each input's tile is copied into a buffer of its own at the outermost tile
    # level, as BLAS packs its panels: the inner loops then stride through a tile-sized
    # row instead of the whole matrix's (at N = 1024 a 4 KiB stride, which maps every row
    # to the same cache sets). MetaSchedule takes a read cache as "must" only (not "may"),
    # so the switch is the person's or, with "auto", the shape's (AutoSpace resolves it
    # before building the rules), not the search's.
    packs = p.get("pack_inputs")
    if packs == AUTO:
        raise ValueError('pack_inputs "auto" must be resolved for the problem before building rules')
    read = sr.ReuseType(req="must", levels=[1], scope="global") if packs else None
    return [
        sr.MultiLevelTiling(
            structure=p["structure"],
            max_innermost_factor=p["max_innermost_factor"],
            reuse_read=read,
            reuse_write=sr.ReuseType(req="may", levels=[1, 2], scope="global"),
        )
    ]


def _parallelize_vectorize_unroll(sr: Any, p: dict[str, Any], problem: _Problem) -> list[Any]:
    # on CUDA nothing is parallelised or vectorised by this rule: -1 turns those parts off
    return [
        sr.ParallelizeVectorizeUnroll(
            max_jobs_per_core=-1 if problem.cuda else p["max_jobs_per_core"],
            max_vectorize_extent=-1 if problem.cuda else p["max_vectorize_extent"],
            unroll_max_steps=p["unroll_max_steps"],
            unroll_explicit=True,
        )
    ]


# Each rule's builder: (schedule_rule module, the rule's limits, the problem) -> MetaSchedule's objects.
_BUILDERS: dict[str, Callable[[Any, dict[str, Any], _Problem], list[Any]]] = {
    "MultiLevelTilingTensorCoreMMA": _tensor_core_mma,
    "MultiLevelTilingTensorCore": _tensor_core_wmma,
    "AutoInline": _auto_inline,
    "AddRFactor": _add_rfactor,
    "MultiLevelTiling": _multi_level_tiling,
    "ParallelizeVectorizeUnroll": _parallelize_vectorize_unroll,
    "RandomComputeLocation": lambda sr, p, problem: [sr.RandomComputeLocation()],
    "CrossThreadReduction": lambda sr, p, problem: [
        sr.CrossThreadReduction(thread_extents=p["thread_extents"])
    ],
    "AutoBind": lambda sr, p, problem: [
        sr.AutoBind(max_threadblocks=p["max_threadblocks"], thread_extents=p["thread_extents"])
    ],
}


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

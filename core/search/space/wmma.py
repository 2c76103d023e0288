"""The template space's tensor-core path: a matrix multiply on CUDA's WMMA fragments (16 x 16 x 16).

A template for a float16-input matrix multiply (GEMM, batch matmul: ``C[..., i, j] += A[..., i, k] *
B[..., k, j]``, every one of i, j and k a multiple of 16) on a GPU of sm_70 or later gets four more knobs:

- ``tensor_core``: on, the kernel below; off, the template's plain CUDA kernel (the other knobs).
- ``wmma_i`` and ``wmma_j``: ``[warps, fragments]`` along that axis, in 16-element fragments: a thread
  block holds ``warps_i x warps_j`` warps, each accumulating ``fragments_i x fragments_j`` fragments
  of the output in registers (``wmma.accumulator``); the rest of the axis is the grid.
- ``wmma_k``: ``[fragments]`` of the reduction staged in shared memory per step: each step the block's
  threads copy an ``(warps_i * fragments_i * 16) x (wmma_k * 16)`` tile of A and the matching tile of B
  into shared memory (vectorized, cooperatively), and each warp loads its fragments from there.

The kernel is the one TVM's tensor-core tutorials build, with MetaSchedule's own WMMA intrinsics
(``tvm.s_tir.tensor_intrin.cuda``: load, fill, mma_sync and store, float16 in, float16 or float32
accumulated). With ``tensor_core`` on, the plain kernel's knobs (tiles, order, shared, local) are not
used, and with it off the ``wmma_*`` knobs are not: :func:`inert_knobs` names them, so that configs that
build the same kernel share one key (tunelab.core.search.space.template.TemplateSpace.key).
"""

from __future__ import annotations

from typing import Any

from tunelab.core.search.space.base import divisors
from tunelab.core.workloads.dtypes import split_dtype

FRAGMENT = 16  # WMMA's m16n16k16: every fragment is 16 x 16, every step of k 16 deep
MIN_SM = 70  # Volta: the first GPUs with tensor cores
MAX_WARPS = 8  # per axis; a block of at most 8 x 8 warps would be 2048 threads: VerifyGPUCode refuses more
MAX_FRAGMENTS = 8  # per warp and axis: 8 x 8 float32 accumulator fragments are 512 registers per thread
MAX_K_FRAGMENTS = 8
FETCH_VECTOR = 4  # float16 lanes per thread in the cooperative copy into shared memory
KNOB_NAMES = ("tensor_core", "wmma_i", "wmma_j", "wmma_k")
PLAIN_KNOBS = ("order", "shared", "local")  # besides the tiles: what the tensor-core kernel ignores


def arch_number(arch: Any) -> int:
    digits = "".join(ch for ch in str(arch or "") if ch.isdigit())
    return int(digits) if digits else 0


def wmma_axes(axes: list[Any], dtype: str, target: Any) -> tuple[Any, Any, Any] | None:
    """The (i, j, k) axes of a template the tensor-core kernel fits, or None: a CUDA target of sm_70 or
    later, float16 inputs accumulated in float16 or float32, the block's axes ``[batch..., i, j, k]``
    with i, j and k multiples of 16."""
    if getattr(target, "kind", None) != "cuda" or arch_number(target.json.get("arch")) < MIN_SM:
        return None
    inputs, acc = split_dtype(dtype)
    if inputs != "float16" or acc not in ("float16", "float32"):
        return None
    spatial = [a for a in axes if a.kind == "spatial"]
    reduce = [a for a in axes if a.kind == "reduce"]
    if len(reduce) != 1 or len(spatial) < 2 or axes[-1] is not reduce[0]:
        return None
    i, j, k = spatial[-2], spatial[-1], reduce[0]
    if any(a.extent % FRAGMENT for a in (i, j, k)):
        return None
    return i, j, k


def wmma_knobs(axes: tuple[Any, Any, Any]) -> list[dict[str, Any]]:
    """The four knobs (module docstring) for a template whose axes :func:`wmma_axes` found."""
    i, j, k = axes

    def warp_tiles(axis: Any) -> list[list[int]]:
        fragments = axis.extent // FRAGMENT
        return [
            [w, f]
            for w in divisors(fragments)
            if w <= MAX_WARPS
            for f in divisors(fragments // w)
            if f <= MAX_FRAGMENTS
        ]

    steps = [[c] for c in divisors(k.extent // FRAGMENT) if c <= MAX_K_FRAGMENTS]

    def split(name: str, axis: Any, parts: int, candidates: list[list[int]]) -> dict[str, Any]:
        return {"name": name, "type": "split", "axis": axis.name, "parts": parts, "fragment": FRAGMENT,
                "candidates": candidates}  # fmt: skip

    return [
        {"name": "tensor_core", "type": "choice", "candidates": [True, False]},
        split("wmma_i", i, 3, warp_tiles(i)),
        split("wmma_j", j, 3, warp_tiles(j)),
        split("wmma_k", k, 2, steps),
    ]


def inert_knobs(config: dict[str, Any], names: list[str]) -> list[str]:
    """The knobs of ``names`` a config's kernel does not use (empty for a template without a tensor_core knob)."""
    if "tensor_core" not in config:
        return []
    if config["tensor_core"]:
        return [n for n in names if n.startswith("tile_") or n in PLAIN_KNOBS]
    return [n for n in names if n in KNOB_NAMES[1:]]


def intrinsics(dtype: str) -> dict[str, str]:
    """MetaSchedule's WMMA intrinsic names for these dtypes: inputs from shared memory, output to global.
    Importing the intrinsics registers them (the slow tensor-intrinsic import: paid when a tensor-core
    kernel is first built)."""
    from tvm.s_tir.tensor_intrin import cuda

    inputs, acc = split_dtype(dtype)
    return cuda.get_wmma_intrin_group(
        load_scope="shared", store_scope="global", in_dtype=inputs, out_dtype=acc, trans_b=False
    )


def apply_wmma(
    sch: Any,
    main: Any,
    axes: list[Any],
    config: dict[str, Any],
    dtype: str,
    knobs: dict[str, dict[str, Any]] | None,
    split: Any,
) -> Any:
    """Schedule the matrix multiply ``main`` on WMMA fragments (module docstring); returns the grid's loop.
    ``split`` is the template's split, which records each factor through ``sample_perfect_tile`` (fixed
    by ``config``, or sampled within ``knobs``' candidates for the evolutionary search's sketches)."""
    names = intrinsics(dtype)
    loops = sch.get_loops(main)
    batch, (i, j, k) = loops[:-3], loops[-3:]
    extents = {a.name: a.extent for a in axes}
    i_axis, j_axis, k_axis = axes[-3], axes[-2], axes[-1]
    i0, i1 = sch.split(i, [None, FRAGMENT])
    j0, j1 = sch.split(j, [None, FRAGMENT])
    k0, k1 = sch.split(k, [None, FRAGMENT])

    def tile(name: str, loop: Any, axis_name: str) -> list[Any]:
        inner = list(config[name]) if name in config else None
        return split(sch, loop, extents[axis_name] // FRAGMENT, inner, (knobs or {}).get(name))

    bi, wi, fi = tile("wmma_i", i0, i_axis.name)
    bj, wj, fj = tile("wmma_j", j0, j_axis.name)
    ko, ki = tile("wmma_k", k0, k_axis.name)
    sch.reorder(*batch, bi, bj, wi, wj, ko, ki, fi, fj, i1, j1, k1)
    block_x = sch.fuse(*batch, bi, bj)
    sch.bind(block_x, "blockIdx.x")
    warp = sch.fuse(wi, wj)
    sch.bind(warp, "threadIdx.y")
    n_warps = int(sch.get(warp).extent)

    accumulator = sch.cache_write(main, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, warp)
    for index, scope, intrin in (
        (0, "wmma.matrix_a", names["load_a"]),
        (1, "wmma.matrix_b", names["load_b"]),
    ):
        shared = sch.cache_read(main, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx, lanes = sch.split(fused, [None, n_warps, 32, FETCH_VECTOR])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(lanes)
        fragment = sch.cache_read(main, index, scope)
        sch.compute_at(fragment, ki)
        sch.tensorize(_fragment_loop(sch, fragment), intrin)
    init = sch.decompose_reduction(main, ko)
    sch.tensorize(sch.get_loops(init)[-2], names["init"])
    sch.tensorize(i1, names["compute"])
    sch.tensorize(_fragment_loop(sch, accumulator), names["store"])
    return block_x


def _fragment_loop(sch: Any, block: Any) -> Any:
    """Split a copy block's two inner loops into 16 x 16 fragments; the loop the intrinsic replaces."""
    rows, cols = sch.get_loops(block)[-2:]
    rows_o, rows_i = sch.split(rows, [None, FRAGMENT])
    cols_o, cols_i = sch.split(cols, [None, FRAGMENT])
    sch.reorder(rows_o, cols_o, rows_i, cols_i)
    return rows_i

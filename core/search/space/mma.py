"""The auto space's warp-level MMA path: ``mma.sync`` fed by ``ldmatrix``, operands staged by ``cp.async``.

MetaSchedule's ``MultiLevelTilingTensorCore`` has two ways to use tensor cores. With WMMA intrinsics
(tunelab.core.search.space.wmma, 16x16x16 fragments) it builds what Volta could run. With the m16n8k8
intrinsics whose compute is named ``mma_sync_*`` it takes its MMA path (the rule tells the two apart by
that name): A and B are copied from global into dynamic shared memory with ``cp.async`` in a
multi-stage software pipeline (``software_pipeline_async_stages``), read into registers with
``ldmatrix`` from a permuted (bank-conflict free) layout, and multiplied with ``mma.sync.m16n8k8``.
This is how its ``cuda-tensorcore`` default rules reach vendor-class GEMMs on Ampere and Hopper.

TVM 0.27 registers the float16 intrinsics of that path. The bfloat16 ones (``mma.sync`` takes bf16 with
float32 accumulation since sm_80) are registered here from TVM's own generators, under the names the
rule's naming wants (the compute's must start with ``mma_sync``).

Two limits of the path that MetaSchedule's sampling does not know, and that would otherwise only show as
failed builds: the permuted shared-memory layout needs each staged tile's rows to hold a multiple of 32
elements (``Permuted SLayout ... is not supported since its second dimension is not divisible by 32``),
which :class:`PermutedLayoutCheck` enforces as a postprocessor, so the search never proposes such a
schedule and the space's own draws reject it.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from tunelab.core.workloads.dtypes import split_dtype

MIN_SM = 80  # cp.async (the pipeline's global-to-shared copy) is Ampere's; ldmatrix and mma.sync are older
MMA_K = 8  # the m16n8k8 intrinsic's reduction depth: one step of the split reduction loop
AUTO_TENSORIZE = "meta_schedule.auto_tensorize"
ROW_ELEMENTS = 32  # what the permuted shared-memory layout needs a staged tile's row to be a multiple of
_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}
# (inputs, accumulator) the path builds: float16 in float16 or float32, bfloat16 in float32
SUPPORTED = (("float16", "float32"), ("float16", "float16"), ("bfloat16", "float32"))


def arch_number(arch: Any) -> int:
    digits = "".join(ch for ch in str(arch or "") if ch.isdigit())
    return int(digits) if digits else 0


def mma_groups(dtype: str, arch: str | None) -> list[dict[str, str]]:
    """The m16n8k8 intrinsic group for these dtypes on this GPU (one: B as K x N, what the rule's MMA path
    reads), or none: other dtypes, or an arch before sm_80. Importing the intrinsics registers them."""
    inputs, acc = split_dtype(dtype)
    if (inputs, acc) not in SUPPORTED or arch_number(arch) < MIN_SM:
        return []
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - registers TVM's own m16n8k8 intrinsics

    if inputs == "bfloat16":
        _register_bfloat16()
    i, a = _SHORT[inputs], _SHORT[acc]
    return [
        {
            "init": f"mma_init_m16n8k8_{a}",
            "load_a": f"mma_load_m16n8k8_{i}_A_shared_dyn",
            "load_b": f"mma_load_m16n8k8_{i}_B_shared_dyn",
            "compute": f"mma_sync_m16n8k8_{i}{i}{a}",
            "store": f"mma_store_m16n8k8_{a}_global",
        }
    ]


@functools.cache
def _register_bfloat16() -> None:
    """The bfloat16 loads and multiply of the m16n8k8 path, from TVM's generators (once per process;
    a name some other code registered first is left as it is)."""
    from tvm.s_tir import TensorIntrin
    from tvm.s_tir.tensor_intrin import cuda

    wanted = {
        "mma_load_m16n8k8_bf16_A_shared_dyn": lambda: cuda.get_mma_load_intrin(
            32, 32, 8, "bfloat16", "shared.dyn", False, False
        ),
        "mma_load_m16n8k8_bf16_B_shared_dyn": lambda: cuda.get_mma_load_intrin(
            32, 32, 8, "bfloat16", "shared.dyn", True, False
        ),
        "mma_sync_m16n8k8_bf16bf16f32": lambda: cuda.get_mma_sync_intrin(
            16, 8, 8, "bfloat16", "float32", False
        ),
    }
    for name, make in wanted.items():
        if TensorIntrin.get(name, allow_missing=True) is None:
            TensorIntrin.register(name, *make())


def mma_rule(params: dict[str, Any], groups: list[dict[str, str]]) -> Any:
    """MetaSchedule's MMA tensor-core rule as its ``cuda-tensorcore`` defaults build it, with the limits
    a person edits: the tiling structure, the innermost factor and the software pipeline."""
    # the MMA path writes the accumulator straight from registers (m16n8k8.matrixC)
    return tensor_core_rule(params, groups, write_staged=False)


def tensor_core_rule(params: dict[str, Any], groups: list[dict[str, str]], *, write_staged: bool) -> Any:
    """MetaSchedule's tensor-core tiling rule (``MultiLevelTilingTensorCore``) as its ``cuda-tensorcore``
    defaults build it for ``groups`` (WMMA's or MMA's intrinsics), with the limits a person edits; the
    output is staged in shared memory when ``write_staged`` (WMMA's fragments), else written from registers."""
    from tvm.s_tir.meta_schedule import schedule_rule as sr

    return sr.MultiLevelTilingTensorCore(
        intrin_groups=groups,
        structure=params["structure"],
        tile_binds=["blockIdx.y", "blockIdx.x", "threadIdx.y"],
        max_innermost_factor=params["max_innermost_factor"],
        vector_load_lens=[1, 2, 3, 4, 8, 16],
        reuse_read=sr.ReuseType(req="must", levels=[4], scope="shared.dyn"),
        reuse_write=sr.ReuseType(req="must" if write_staged else "no", levels=[2], scope="shared.dyn"),
        use_software_pipeline=params["software_pipeline"],
    )


def staged_rows_fit(trace: Any) -> bool:
    """Whether the A tiles an MMA sketch's schedule stages in shared memory have rows of a multiple of
    :data:`ROW_ELEMENTS` elements. Read off the trace: the rule splits the reduction with the one
    ``SamplePerfectTile`` between its ``mma_sync`` annotation and its first ``ReadAt``, and stages at its
    outermost tile, so a row holds the inner factors times the intrinsic's k. (B's rows are the j tile,
    which ``SamplePartitionedTile`` keeps a multiple of 32; a trace of another rule has nothing to check.)"""
    in_mma = False
    for inst in trace.insts:
        name = inst.kind.name
        if name == "Annotate" and str(inst.attrs[0]) == AUTO_TENSORIZE:
            in_mma = str(inst.inputs[1]).startswith("mma_sync")
        elif name == "ReadAt":
            in_mma = False
        elif in_mma and name == "SamplePerfectTile":
            inner = math.prod(int(f) for f in trace.get_decision(inst)[1:])
            if inner * MMA_K % ROW_ELEMENTS:
                return False
    return True


@functools.cache
def _postproc_class() -> type:
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.postproc import PyPostproc

    @derived_object
    class PermutedLayoutCheck(PyPostproc):
        """Rejects an MMA schedule whose staged tiles the permuted layout cannot hold (module docstring)."""

        def _initialize_with_tune_context(self, context: Any) -> None:
            pass

        def apply(self, sch: Any) -> bool:
            return staged_rows_fit(sch.trace)

        def clone(self) -> Any:
            return _postproc_class()()

    return PermutedLayoutCheck


def permuted_layout_check() -> Any:
    """A MetaSchedule postprocessor (module docstring): place it before RewriteTensorize."""
    return _postproc_class()()

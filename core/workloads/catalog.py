"""The catalog of operators tunelab can tune: the registry by name, and the lookup (custom and tir ones too).

The operators themselves live by family: the matrix multiplies in :mod:`tunelab.core.workloads.matmul`, the
convolutions in :mod:`tunelab.core.workloads.conv`; each holds its TE definition, shapes, NumPy reference, FLOP
and byte counts.

Each operator is a :class:`Workload` instance in the :data:`WORKLOADS` registry, keyed by its CLI name:

==================  ==========================================  =======================  ============
name                what it computes                            parameters               main block
==================  ==========================================  =======================  ============
gemm                ``C[i,j] = sum_k A[i,k] * B[k,j]``            M, N, K                  ``C``
dense_bias          ``max(A @ B^T + bias, 0)`` (B is (N, K))      M, N, K, relu (0/1)      ``C``
batch_matmul        ``C[b,i,j] = sum_k A[b,i,k] * B[b,k,j]``      B, M, N, K               ``C``
conv2d_nchw         NCHW input, KCRS weight, NKPQ output          N C H W K R S stride     ``conv``
                                                                  pad dilation
conv2d_nhwc         NHWC input, RSCK weight, NPQK output          (same as conv2d_nchw)    ``conv``
conv2d_nchwc        channel-blocked: NCHW[ic]c input,             (same as conv2d_nchw)    ``conv``
                    OIHW[ic]i[oc]o weight, NKPQ[oc]k output       ic oc
depthwise_conv2d    NCHW input, (C, multiplier, R, S) weight,     N C H W R S stride pad   ``conv``
                    output channels C * multiplier                multiplier
==================  ==========================================  =======================  ============

A workload called ``custom`` is built from a person's own file; see :mod:`tunelab.core.workloads.custom` for its format
(``get_workload("custom", source)`` or ``load_custom_workload(source)``).

Conventions shared by every workload:

* ``tensors(shape, dtype)`` returns ``[inputs..., output]``; inputs are placeholders named ``A``, ``B`` (then
  ``bias`` for dense_bias). The main reduction is a ``te.compute`` whose name (the TIR block name, also
  ``Workload.main_block``) is listed above; the convolutions pad in a separate block named ``pad`` (always
  present, a plain copy when pad=0), dense_bias adds the bias in a block ``bias_add`` and, when relu=1, clamps in a
  block ``relu``.
* Reductions accumulate in the input dtype, except for the mixed dtype ``float16:float32`` of GEMM, batch matmul
  and the convolutions (float16 inputs summed in float32 into a float32 output, as tensor cores compute).
  ``reference`` computes in float64 and casts to the workload's output dtype, so it is the "true" answer;
  ``tolerance(dtype, shape)`` allows for the rounding of a reduction of that length.
* A *shape* is a ``dict[str, int]`` holding every parameter; ``parse_shape`` turns ``"M=512,N=256"``, a dict, a
  preset name or ``None`` into one, filling defaults and checking it.
"""

from __future__ import annotations

import functools

from tunelab.core.errors import WorkloadError, shown
from tunelab.core.workloads.base import Workload
from tunelab.core.workloads.conv import (  # block_output and the unblocks: their users import them from here
    Conv2dNCHW,
    Conv2dNCHWc,
    Conv2dNHWC,
    DepthwiseConv2d,
    block_output,
    unblock_input,
    unblock_weight,
)
from tunelab.core.workloads.matmul import BatchMatmul, DenseBias, Gemm
from tunelab.core.workloads.tir import TIR_NAME

__all__ = [
    "WORKLOADS",
    "block_output",
    "get_workload",
    "list_workloads",
    "load_custom_workload",
    "unblock_input",
    "unblock_weight",
]

WORKLOADS: dict[str, Workload] = {
    wl.name: wl
    for wl in (
        Gemm(),
        DenseBias(),
        BatchMatmul(),
        Conv2dNCHW(),
        Conv2dNHWC(),
        Conv2dNCHWc(),
        DepthwiseConv2d(),
    )
}

CUSTOM_NAME = "custom"


def list_workloads() -> list[Workload]:
    """The built-in workloads in registry order (``custom`` needs a file, so it is not listed)."""
    return list(WORKLOADS.values())


def get_workload(name: str, custom_source: str | None = None) -> Workload:
    """The workload called ``name``; ``"custom"`` is built from ``custom_source`` (the text of a workload file)."""
    key = str(name).strip()
    if key == CUSTOM_NAME:
        if custom_source is None:
            raise WorkloadError(
                "custom: a workload file is needed; give the text of a Python file that defines PARAMS, compute() "
                "and reference()"
            )
        return load_custom_workload(custom_source)
    if key == TIR_NAME:  # an imported PrimFunc the catalog does not know, kept as TVMScript
        if custom_source is None:
            raise WorkloadError("tir: the PrimFunc's TVMScript is needed (an imported session keeps it)")
        return _tir_workload(custom_source)
    wl = WORKLOADS.get(key)
    if wl is None:
        known = ", ".join([*WORKLOADS, CUSTOM_NAME])
        raise WorkloadError(f"unknown workload {shown(key)}; known workloads are {known}")
    return wl


@functools.lru_cache(maxsize=16)
def _tir_workload(source: str) -> Workload:
    from tunelab.core.workloads.tir import TIRWorkload

    return TIRWorkload(source)  # type: ignore[return-value]  # the Workload interface, duck-typed


def load_custom_workload(source: str, name: str = CUSTOM_NAME, *, vet: bool = True) -> Workload:
    """A workload built from the text of a custom workload file (format: :mod:`tunelab.core.workloads.custom`).

    The file is loaded in a time-limited child process first (``vet``; once per process and file), so a
    file that hangs or ends its process is a WorkloadError before it runs here; then it runs here once
    per process (the workload is kept for the same text and name)."""
    from tunelab.core.workloads.custom import CustomWorkload

    if not isinstance(source, str):
        return CustomWorkload(source, name=name, vet=vet)  # raises the type's message
    key = (source, name)
    wl = _CUSTOM_LOADED.get(key)
    if wl is None:
        wl = CustomWorkload(source, name=name, vet=vet)
        if len(_CUSTOM_LOADED) >= 8:
            _CUSTOM_LOADED.pop(next(iter(_CUSTOM_LOADED)))
        _CUSTOM_LOADED[key] = wl
    return wl


# Custom workloads loaded in this process (source, name) -> workload: the person's file runs here once.
_CUSTOM_LOADED: dict[tuple[str, str], Workload] = {}

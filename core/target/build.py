"""The pass options a scheduled module needs to build, whoever builds it (runner, compile, export).

Tensor-core kernels that accumulate in another dtype than their inputs (float16 inputs, float32
accumulator: MetaSchedule's wmma f16f16f32 intrinsics) fail to build in TVM 0.27 with ``Check failed:
source_buffer->dtype.WithLanes(1) == scalar_dtype (T.float16 vs. T.float32) : tvm_access_ptr element
type must match the source buffer``. StorageRewrite lets the float32 staging buffer of the output reuse
the shared memory of a float16 input tile whose lifetime has ended, and the wmma store's access pointer
then names a float16 buffer with a float32 element type, which 0.27's new check refuses. With
``tirx.disable_storage_rewrite`` every sampled GEMM 256³ f16f16f32 schedule that passed VerifyGPUCode
built and nvcc compiled (6 of 6, each with ``wmma.mma.sync`` in its PTX), against 1 of 6 without it.
Kernels whose dtypes agree (fp16 in, fp16 out) build either way, and nothing else is changed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

STORAGE_REWRITE_OFF = "tirx.disable_storage_rewrite"
TENSOR_CORE_MARKS = ("wmma.", "m16n8k", "mma_sync")


def uses_tensor_cores(mod: Any) -> bool:
    """Whether a scheduled module keeps tensor-core fragments or intrinsics (read off its TVMScript)."""
    try:
        text = mod.script()
    except Exception:  # noqa: BLE001 - a module that cannot print is built as it is
        return False
    return any(mark in text for mark in TENSOR_CORE_MARKS)


def build_options(mod: Any, target: Any) -> dict[str, Any]:
    """The PassContext config this module needs beyond the current one's (empty for most)."""
    kind = str(getattr(getattr(target, "kind", None), "name", "") or "")
    if kind == "cuda" and uses_tensor_cores(mod):
        return {STORAGE_REWRITE_OFF: True}
    return {}


@contextlib.contextmanager
def build_scope(mod: Any, target: Any) -> Iterator[None]:
    """Build ``mod`` for ``target`` inside this: the current pass context, plus :func:`build_options`."""
    import tvm

    extra = build_options(mod, target)
    if not extra:
        yield
        return
    current = tvm.transform.PassContext.current()
    config = {**{str(k): v for k, v in current.config.items()}, **extra}
    with tvm.transform.PassContext(
        opt_level=current.opt_level,
        required_pass=list(current.required_pass),
        disabled_pass=list(current.disabled_pass),
        config=config,
    ):
        yield

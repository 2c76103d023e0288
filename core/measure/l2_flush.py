"""Flushing a GPU's L2 cache between timed runs, as Triton's ``do_bench`` does.

A kernel whose inputs and output fit in L2 (50 MB on an H100 or H200) finds them there from the previous
run when it is timed back to back, and measures faster than it runs on data that arrives cold, as it
does inside a model. With the flush, each timed sample is one launch after a kernel that streams a
scratch buffer twice the L2's size through it (``B[i] = A[i] + 1``), issued as TVM's ``time_evaluator``
preprocessing step so the flush is not timed: the CUDA-event timer (TVM's ``runtime.timer.cuda``) starts
after it.

``MeasureOptions.l2_flush``: ``auto`` flushes where the problem's bytes fit in L2 (beyond it the data
cannot stay cached anyway), ``on`` always, ``off`` never. CPU targets are never flushed this way (their
option is ``cache_flush``).
"""

from __future__ import annotations

from typing import Any

FLUSH_FUNC = "tunelab.l2_flush_cuda"
L2_FLUSH_MODES = ("auto", "on", "off")
FALLBACK_L2_BYTES = 50 * 1024 * 1024  # an H100/H200's, where the device does not say
CUDA_DEVICE_TYPE = 2  # DLPack's kDLCUDA

_installed: dict[int, Any] = {}  # device id -> (kernel, scratch tensors), one per process and GPU


def is_cuda(device: Any) -> bool:
    try:
        return int(device.dlpack_device_type()) == CUDA_DEVICE_TYPE
    except Exception:  # noqa: BLE001 - a device TVM cannot describe is not a GPU to flush
        return False


def l2_bytes(device: Any) -> int:
    size = getattr(device, "l2_cache_size_bytes", None)
    try:
        return int(size) if size else FALLBACK_L2_BYTES
    except (TypeError, ValueError):
        return FALLBACK_L2_BYTES


def wants_flush(mode: str, device: Any, data_bytes: float) -> bool:
    """Whether timed runs on ``device`` get an L2 flush before each sample under ``mode``."""
    if mode == "off" or not is_cuda(device):
        return False
    return mode == "on" or data_bytes <= l2_bytes(device)


def flush_module(n_floats: int) -> Any:
    """``B[i] = A[i] + 1`` over ``n_floats`` float32, for CUDA (built, not loaded: works without a GPU)."""
    import tvm
    from tvm import te

    a = te.placeholder((n_floats,), "float32", name="A")
    b = te.compute((n_floats,), lambda i: a[i] + 1.0, name="B")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a, b])}))
    block = sch.get_sblock("B") if hasattr(sch, "get_sblock") else sch.get_block("B")
    (i,) = sch.get_loops(block)
    outer, inner = sch.split(i, [None, 256])
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
    return tvm.compile(sch.mod, tvm.target.Target({"kind": "cuda", "arch": "sm_70"}))


def install_flush(device: Any) -> str:
    """Register :data:`FLUSH_FUNC` (once per process and GPU) for ``time_evaluator``'s ``f_preproc``;
    it runs the flush kernel on scratch buffers twice the L2's size and ignores the kernel's arguments."""
    import numpy as np
    import tvm

    if device.index not in _installed:
        n = max(2 * l2_bytes(device) // 4, 1 << 20)
        n -= n % 256
        module = flush_module(n)
        scratch = [tvm.runtime.tensor(np.zeros(n, "float32"), device) for _ in range(2)]
        _installed[device.index] = (module, scratch)

    def flush(*_args: Any) -> None:
        module, (a, b) = _installed[device.index]
        module["main"](a, b)

    tvm.register_global_func(FLUSH_FUNC, flush, override=True)
    return FLUSH_FUNC

"""The vendor kernels on a GPU: cuBLAS / cuDNN through PyTorch, or the matrix products through CuPy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.trust.baselines_cpu import VendorCall
from tunelab.core.workloads.dtypes import split_dtype

if TYPE_CHECKING:
    from tunelab.core.workloads.base import Workload


def _torch_kernel(
    name: str,
    s: dict[str, int],
    inputs: Sequence[np.ndarray],
    out_shape: tuple[int, ...],
) -> tuple[Callable[[], None], Callable[[], np.ndarray], Callable[[], None], str] | None:
    """(call, fetch the output, sync, library) through PyTorch on the GPU (cuBLAS / cuDNN); None if
    PyTorch or a GPU is missing."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    # float32 stays float32: TF32 would round the inputs to 10 mantissa bits, which no tunelab float32
    # kernel does (the figure would compare different arithmetic)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    t = [torch.from_numpy(np.ascontiguousarray(x)).to(dev) for x in inputs]
    F = torch.nn.functional
    out: dict[str, Any] = {}
    lib = f"PyTorch {torch.__version__} (cuBLAS)"
    cudnn = f"PyTorch {torch.__version__} (cuDNN {torch.backends.cudnn.version()})"
    pad, stride, dil = s.get("pad", 0), s.get("stride", 1), s.get("dilation", 1)
    if name in ("gemm", "batch_matmul"):
        c = torch.empty(out_shape, dtype=t[0].dtype, device=dev)

        def run() -> None:
            torch.matmul(t[0], t[1], out=c)

        out["c"] = c
    elif name == "dense_bias":
        c = torch.empty(out_shape, dtype=t[0].dtype, device=dev)
        wt = t[1].t()

        def run() -> None:
            torch.addmm(t[2], t[0], wt, out=c)
            if s["relu"]:
                c.relu_()

        out["c"] = c
    elif name == "conv2d_nchw":

        def run() -> None:
            out["c"] = F.conv2d(t[0], t[1], stride=stride, padding=pad, dilation=dil)

        lib = cudnn
    elif name == "conv2d_nhwc":
        x = t[0].permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
        w = t[1].permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)

        def run() -> None:
            out["c"] = F.conv2d(x, w, stride=stride, padding=pad, dilation=dil).permute(0, 2, 3, 1)

        lib = cudnn + ", channels_last"
    elif name == "depthwise_conv2d":
        C, m = s["C"], s["multiplier"]
        w = t[1].reshape(C * m, 1, s["R"], s["S"])

        def run() -> None:
            out["c"] = F.conv2d(t[0], w, stride=stride, padding=pad, groups=C)

        lib = cudnn
    else:
        return None
    return run, (lambda: out["c"].cpu().numpy()), torch.cuda.synchronize, lib


def _cupy_kernel(
    name: str,
    s: dict[str, int],
    inputs: Sequence[np.ndarray],
    out_shape: tuple[int, ...],
) -> tuple[Callable[[], None], Callable[[], np.ndarray], Callable[[], None], str] | None:
    """The matrix products through CuPy (cuBLAS); None without CuPy, a GPU, or for convolutions."""
    if name not in ("gemm", "batch_matmul", "dense_bias"):
        return None
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # noqa: BLE001 - ImportError, or a CUDA runtime without a usable device
        return None
    g = [cp.asarray(x) for x in inputs]
    c = cp.empty(out_shape, dtype=g[0].dtype)
    if name == "dense_bias":
        wt = g[1].T

        def run() -> None:
            cp.matmul(g[0], wt, out=c)
            cp.add(c, g[2], out=c)
            if s["relu"]:
                cp.maximum(c, 0, out=c)
    else:

        def run() -> None:
            cp.matmul(g[0], g[1], out=c)

    return run, (lambda: cp.asnumpy(c)), cp.cuda.Device().synchronize, f"CuPy {cp.__version__} (cuBLAS)"


def gpu_vendor_call(
    wl: Workload, shape: dict[str, int], dtype: str, inputs: Sequence[np.ndarray], out_shape: tuple[int, ...]
) -> VendorCall | None:
    """The workload's vendor kernel on the GPU (PyTorch, else CuPy); None where neither runs it."""
    made = _torch_kernel(wl.name, shape, inputs, out_shape) or _cupy_kernel(wl.name, shape, inputs, out_shape)
    if made is None:
        return None
    run, fetch, sync, library = made
    method = {"gemm": "matmul", "batch_matmul": "matmul", "dense_bias": "addmm"}.get(wl.name, "conv2d")
    in_dtype, out_dtype = split_dtype(dtype)
    judged = dtype
    if in_dtype != out_dtype:
        # cuBLAS / cuDNN on float16 inputs accumulate in float32 (tensor cores) but write float16:
        # the output's rounding is the library's, so it is judged at float16's tolerance
        library += f" ({in_dtype} output, float32 accumulation)"
        judged = in_dtype
    return VendorCall(run, fetch, sync, method, library, {}, judged)

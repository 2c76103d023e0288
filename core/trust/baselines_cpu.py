"""The vendor kernels on the CPU: NumPy's BLAS (im2col for convolutions) or PyTorch's CPU convolutions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tunelab.core.workloads.dtypes import split_dtype

if TYPE_CHECKING:
    from tunelab.core.workloads.base import Workload


class VendorCall(NamedTuple):
    """A vendor kernel ready to time: the call, its output, the sync after it (None on the CPU), what
    it does, the library, the BLAS's figures (on the CPU) and the dtype whose tolerance judges it."""

    run: Callable[[], None]
    fetch: Callable[[], np.ndarray]
    sync: Callable[[], None] | None
    method: str
    library: str
    info: dict[str, Any]
    judged_dtype: str


def blas_info() -> dict[str, Any]:
    """NumPy's BLAS as threadpoolctl reports it: library, version, kernel (architecture), threads."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {"library": "unknown", "note": "threadpoolctl is not installed"}
    blas = [pool for pool in threadpool_info() if pool.get("user_api") == "blas"]
    # SciPy or scikit-learn may bring a BLAS of their own into the process: NumPy's is the one used here.
    blas.sort(key=lambda pool: "numpy" not in str(pool.get("filepath", "")).lower())
    if not blas:
        return {"library": "unknown", "note": "threadpoolctl found no BLAS in this process"}
    pool = blas[0]
    return {
        "library": pool.get("internal_api"),
        "version": pool.get("version"),
        "kernel": pool.get("architecture"),
        "threads": pool.get("num_threads"),
        "threading_layer": pool.get("threading_layer"),
        "path": pool.get("filepath"),
    }


def blas_description(info: dict[str, Any] | None = None) -> str:
    """``"NumPy + openblas 0.3.31 (SkylakeX kernel, 2 threads)"``."""
    info = info or blas_info()
    parts = [p for p in (info.get("library"), info.get("version")) if p]
    detail = [
        f"{info['kernel']} kernel" if info.get("kernel") else None,
        f"{info['threads']} threads" if info.get("threads") else None,
    ]
    extra = ", ".join(d for d in detail if d)
    return "NumPy + " + " ".join(parts or ["BLAS"]) + (f" ({extra})" if extra else "")


def _conv_out(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _windows(xp: np.ndarray, axes: tuple[int, int], s: dict[str, int], P: int, Q: int) -> np.ndarray:
    """Receptive fields of an already padded input: the two window axes (R, S) are appended."""
    dil, stride = s.get("dilation", 1), s["stride"]
    eh, ew = dil * (s["R"] - 1) + 1, dil * (s["S"] - 1) + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=axes)[..., ::dil, ::dil]
    index: list[Any] = [slice(None)] * win.ndim
    index[axes[0]] = slice(0, (P - 1) * stride + 1, stride)
    index[axes[1]] = slice(0, (Q - 1) * stride + 1, stride)
    return win[tuple(index)]


def _numpy_kernel(
    name: str, s: dict[str, int], inputs: Sequence[np.ndarray], out: np.ndarray
) -> tuple[Callable[[], None], str] | None:
    """(a call that writes ``out``, what it does) for a workload through NumPy's BLAS; None if none."""
    if name in ("gemm", "batch_matmul"):
        a, b = inputs

        def run() -> None:
            np.matmul(a, b, out=out)

        return run, "np.matmul"
    if name == "dense_bias":
        a, w, bias = inputs
        wt = w.T

        def run() -> None:
            np.matmul(a, wt, out=out)
            np.add(out, bias, out=out)
            if s["relu"]:
                np.maximum(out, 0, out=out)

        return run, "np.matmul(A, B.T) + bias" + (" + relu" if s["relu"] else "")
    if name == "conv2d_nchwc":
        return _numpy_blocked_conv(s, inputs, out)
    if name in ("conv2d_nchw", "conv2d_nhwc", "depthwise_conv2d"):
        a, w = inputs
        pad = s["pad"]
        dil = s.get("dilation", 1)
        P = _conv_out(s["H"], s["R"], s["stride"], pad, dil)
        Q = _conv_out(s["W"], s["S"], s["stride"], pad, dil)
        N, C, R, S = s["N"], s["C"], s["R"], s["S"]
        wmat: np.ndarray  # the weights as a matrix, and the output as the product's shape: per layout
        out2: np.ndarray
        if name == "conv2d_nchw":
            K = s["K"]
            wmat = w.reshape(K, C * R * S)
            out2 = out.reshape(N, K, P * Q)

            def run() -> None:
                xp = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else a
                col = _windows(xp, (2, 3), s, P, Q)  # N C P Q R S
                col = col.transpose(0, 1, 4, 5, 2, 3).reshape(N, C * R * S, P * Q)  # the im2col copy
                np.matmul(wmat, col, out=out2)

            return run, "im2col + np.matmul"
        if name == "conv2d_nhwc":
            K = s["K"]
            wmat = w.reshape(R * S * C, K)
            out2 = out.reshape(N * P * Q, K)

            def run() -> None:
                xp = np.pad(a, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else a
                col = _windows(xp, (1, 2), s, P, Q)  # N P Q C R S
                col = col.transpose(0, 1, 2, 4, 5, 3).reshape(N * P * Q, R * S * C)
                np.matmul(col, wmat, out=out2)

            return run, "im2col + np.matmul"
        m = s["multiplier"]
        wmat = w.reshape(C, m, R * S).transpose(0, 2, 1)  # C, RS, m
        out5 = out.reshape(N, C, m, P, Q)

        def run() -> None:
            xp = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else a
            col = _windows(xp, (2, 3), s, P, Q)  # N C P Q R S
            col = col.transpose(1, 0, 2, 3, 4, 5).reshape(C, N * P * Q, R * S)
            res = np.matmul(col, wmat)  # C, NPQ, m
            out5[...] = res.reshape(C, N, P, Q, m).transpose(1, 0, 4, 2, 3)

        return run, "im2col + batched np.matmul per channel"
    return None


def _numpy_blocked_conv(
    s: dict[str, int], inputs: Sequence[np.ndarray], out: np.ndarray
) -> tuple[Callable[[], None], str]:
    """conv2d_nchwc through NumPy: the input unblocked to NCHW, im2col + np.matmul, the result blocked again.
    The weight is unblocked once, as a library prepacks a constant weight; the activation copies are timed:
    NumPy has no blocked layout, so they are part of its way."""
    from tunelab.core.workloads.catalog import block_output, unblock_input, unblock_weight

    plain_shape = {k: v for k, v in s.items() if k not in ("ic", "oc")}
    a, w = inputs
    nchw_in = np.empty((s["N"], s["C"], s["H"], s["W"]), a.dtype)
    nchw_out = np.empty((s["N"], s["K"], *out.shape[2:4]), out.dtype)
    made = _numpy_kernel(
        "conv2d_nchw", plain_shape, [nchw_in, np.ascontiguousarray(unblock_weight(w))], nchw_out
    )
    assert made is not None  # conv2d_nchw always has one
    nchw_conv = made[0]

    def run() -> None:
        nchw_in[...] = unblock_input(a)
        nchw_conv()
        out[...] = block_output(nchw_out, s["oc"])

    return run, "unblock + im2col + np.matmul + block"


def _torch_cpu_conv(
    name: str, s: dict[str, int], inputs: Sequence[np.ndarray], out: np.ndarray
) -> tuple[Callable[[], None], str, str] | None:
    """(a call that writes ``out``, what it does, the library) through PyTorch's CPU convolution; None
    without PyTorch or for a workload that is no convolution."""
    if name not in ("conv2d_nchw", "conv2d_nhwc", "conv2d_nchwc", "depthwise_conv2d"):
        return None
    try:
        import torch
    except ImportError:
        return None
    if name == "conv2d_nchwc":
        return _onednn_blocked_conv(torch, s, inputs, out)
    F = torch.nn.functional
    pad, stride, dil = s["pad"], s["stride"], s.get("dilation", 1)
    x, w = (torch.from_numpy(np.ascontiguousarray(t)) for t in inputs)
    groups = 1
    if name == "conv2d_nhwc":
        # channels_last is NHWC in memory: oneDNN's own layout for it, without a transposing copy
        x = x.permute(0, 3, 1, 2)
        w = w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        target = torch.from_numpy(out).permute(0, 3, 1, 2)
    else:
        target = torch.from_numpy(out)
        if name == "depthwise_conv2d":
            groups = s["C"]
            w = w.reshape(s["C"] * s["multiplier"], 1, s["R"], s["S"])

    def run() -> None:
        with torch.no_grad():
            target.copy_(F.conv2d(x, w, stride=stride, padding=pad, dilation=dil, groups=groups))

    backend = "oneDNN" if torch.backends.mkldnn.is_available() else "native"
    library = f"PyTorch {torch.__version__} CPU ({backend}, {torch.get_num_threads()} threads)"
    return run, "torch.nn.functional.conv2d", library


def _onednn_blocked_conv(
    torch: Any, s: dict[str, int], inputs: Sequence[np.ndarray], out: np.ndarray
) -> tuple[Callable[[], None], str, str] | None:
    """conv2d_nchwc through oneDNN with activations and weight in oneDNN's own blocked layouts, as a
    network kept in mkldnn tensors (``Tensor.to_mkldnn``) runs layer after layer: no reorder is
    timed, as none is in tunelab's blocked kernel. None where PyTorch has no oneDNN.

    The weight is prepacked once (``torch._C._nn.mkldnn_reorder_conv2d_weight``). The input is put into the layout
    oneDNN's convolution writes (and so reads without a reorder) by a 1x1 convolution with the identity
    weight; the timed call leaves its result in that layout, as the next layer would read it, and the
    first call also copies it into ``out`` for the correctness check."""
    from tunelab.core.workloads.catalog import block_output, unblock_input, unblock_weight

    if not torch.backends.mkldnn.is_available() or inputs[0].dtype != np.float32:
        return None  # oneDNN's float convolutions are float32 (and bfloat16); NumPy's path takes the rest
    conv = torch.mkldnn_convolution
    pad, stride, dil = s["pad"], s["stride"], s.get("dilation", 1)
    a, w = inputs
    C = s["C"]
    with torch.no_grad():
        x = torch.from_numpy(np.ascontiguousarray(unblock_input(a))).to_mkldnn()
        weight = torch.from_numpy(np.ascontiguousarray(unblock_weight(w))).to_mkldnn()
        packed = torch._C._nn.mkldnn_reorder_conv2d_weight(
            weight, [pad, pad], [stride, stride], [dil, dil], 1
        )
        eye = torch.eye(C, dtype=x.dtype).reshape(C, C, 1, 1).to_mkldnn()
        eye = torch._C._nn.mkldnn_reorder_conv2d_weight(eye, [0, 0], [1, 1], [1, 1], 1)
        x_blocked = conv(x, eye, None, [0, 0], [1, 1], [1, 1], 1)
    copied: list[bool] = []

    def run() -> None:
        with torch.no_grad():
            y = conv(x_blocked, packed, None, [pad, pad], [stride, stride], [dil, dil], 1)
        if not copied:
            out[...] = block_output(y.to_dense().numpy(), s["oc"])
            copied.append(True)

    library = f"PyTorch {torch.__version__} CPU (oneDNN, blocked layouts, {torch.get_num_threads()} threads)"
    return run, "torch.mkldnn_convolution on mkldnn tensors", library


def cpu_vendor_kernel(
    name: str, s: dict[str, int], inputs: Sequence[np.ndarray], out: np.ndarray
) -> tuple[Callable[[], None], str, str] | None:
    """(a call that writes ``out``, what it does, the library) for a workload on the CPU: PyTorch's
    convolution where it is installed, else NumPy's BLAS; None where neither has the operator."""
    made = _torch_cpu_conv(name, s, inputs, out)
    if made is not None:
        return made
    numpy_made = _numpy_kernel(name, s, inputs, out)
    if numpy_made is None:
        return None
    return numpy_made[0], numpy_made[1], blas_description()


def cpu_vendor_call(
    wl: Workload, shape: dict[str, int], dtype: str, inputs: Sequence[np.ndarray], out_shape: tuple[int, ...]
) -> VendorCall | None:
    """The workload's vendor kernel on the CPU, writing a fresh output; None where there is none."""
    in_dtype, out_dtype = split_dtype(dtype)
    out = np.zeros(out_shape, dtype=out_dtype)
    vendor_inputs = inputs
    info: dict[str, Any] = {}
    if in_dtype != out_dtype:  # no CPU library multiplies float16 into float32: widen the inputs
        vendor_inputs = [np.ascontiguousarray(x.astype(out_dtype)) for x in inputs]
    made_cpu = cpu_vendor_kernel(wl.name, shape, vendor_inputs, out)
    if made_cpu is None:
        return None
    run, method, library = made_cpu
    if library.startswith("NumPy"):  # the BLAS's kernel and threads belong to its figure
        info = blas_info()
        library = blas_description(info)
    if vendor_inputs is not inputs:
        library += f" ({in_dtype} inputs widened to {out_dtype})"

    def fetch() -> np.ndarray:
        return out

    return VendorCall(run, fetch, None, method, library, info, dtype)

"""Vendor baselines: the same operator through a vendor library, so a session can say "x of vendor".

On the CPU the vendor is NumPy's BLAS (OpenBLAS, MKL, Accelerate: whatever NumPy links; threadpoolctl
names it and its kernel):

* ``gemm``, ``batch_matmul``: ``np.matmul(A, B, out=C)``;
* ``dense_bias``: ``np.matmul(A, B.T, out=C)``, then the bias add and the ReLU in place;
* ``conv2d_nchw`` / ``conv2d_nhwc``: im2col (pad, gather the receptive fields into a matrix) plus one
  ``np.matmul`` with the weight matrix. NumPy has no convolution, so this im2col + GEMM path stands in
  for a vendor convolution on the CPU; the gather is timed with it, as a library would pay for it;
* ``conv2d_nchwc``: the input unblocked to NCHW, the NCHW path, the result blocked again (all timed);
* ``depthwise_conv2d``: im2col plus a batched ``np.matmul`` per channel (tiny matrices: a weak baseline).

Where PyTorch is installed (the optional ``baselines`` extra) the convolutions go through its CPU
``conv2d`` instead (oneDNN where PyTorch was built with it): a real vendor convolution, which the im2col +
GEMM path only stands in for. ``conv2d_nchwc`` (float32) runs on mkldnn tensors in oneDNN's own blocked
layouts, as a network kept in mkldnn tensors runs, so neither side pays a reorder. Without
PyTorch the NumPy path stays; :func:`cpu_vendor_kernel` says which.

On a GPU (target kind ``cuda``) the vendor is cuBLAS / cuDNN through PyTorch (``torch.matmul``,
``torch.nn.functional.conv2d``) or, for the matrix products only, CuPy; each path runs only where the
package is installed and sees a GPU. A custom workload has no vendor counterpart.

Timing follows ``time_evaluator`` (:func:`tunelab.core.measure.timing.time_callable`): ``warmup``
untimed calls, then ``repeat`` samples, each the mean of ``number`` calls, ``number`` grown until one
sample takes ``min_repeat_ms``; the figure is the median.
The output is checked against the workload's NumPy reference. Baselines are stored per (machine,
workload, shape, dtype, target kind) and measured once: :func:`baseline_for`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.core.measure.timing import SPIN_SETTLE_S, time_callable
from tunelab.core.records import MeasureOptions, SessionRecord, VendorBaseline
from tunelab.core.stats import median
from tunelab.core.telemetry.neighbours import BUSY_SHARE, NeighbourWatch
from tunelab.core.workloads.dtypes import split_dtype

if TYPE_CHECKING:
    from tunelab.core.store import Store

CPU_WORKLOADS = (
    "gemm",
    "batch_matmul",
    "dense_bias",
    "conv2d_nchw",
    "conv2d_nhwc",
    "conv2d_nchwc",
    "depthwise_conv2d",
)


# A tuned kernel against a vendor library on the same problem: beyond these, a figure was disturbed
# (986.91x vendor was NumPy timed among busy neighbours), not a kernel 1000 times faster.
PLAUSIBLE_X = (0.02, 50.0)


@dataclass(frozen=True)
class VendorComparison:
    """A session's best kernel (of one shape, ``task``) against the vendor library on the same problem."""

    baseline: VendorBaseline
    cached: bool  # the baseline came from the store
    session_id: int
    task: int
    session_best_ms: float | None
    session_gflops: float | None
    # vendor time / session best time: 0.5 means the tuned kernel runs at half the vendor's speed,
    # 1.2 that it is 20 % faster; None while the session has no result.
    x_of_vendor: float | None

    def to_json(self) -> dict[str, Any]:
        """The baseline's JSON with the session's side after it."""
        return {
            **self.baseline.to_json(),
            "cached": self.cached,
            "session_id": self.session_id,
            "task": self.task,
            "session_best_ms": self.session_best_ms,
            "session_gflops": self.session_gflops,
            "x_of_vendor": self.x_of_vendor,
            "doubt": self.doubt,
        }

    @property
    def doubt(self) -> str | None:
        """Why this ratio should not be believed as it stands (None: nothing against it): the vendor
        was timed while other processes used the cores, or the ratio is outside what a tuned kernel
        and a vendor library plausibly differ by (:data:`PLAUSIBLE_X`). Either way: measure it again."""
        reasons = []
        neighbours = self.baseline.measure.get("neighbours") or {}
        if (neighbours.get("share") or 0.0) >= BUSY_SHARE:
            pids = ", ".join(f"pid {p}" for p in (neighbours.get("busy_pids") or [])[:3])
            reasons.append(
                f"the vendor was timed while other processes took {neighbours['share']:.0%} of the cores"
                + (f" ({pids})" if pids else "")
            )
        x = self.x_of_vendor
        if x is not None and not PLAUSIBLE_X[0] <= x <= PLAUSIBLE_X[1]:
            reasons.append(
                f"{x:.2f}x is outside {PLAUSIBLE_X[0]:g}-{PLAUSIBLE_X[1]:g}x, what a tuned kernel and a "
                f"vendor library plausibly differ by: one of the two figures was likely disturbed"
            )
        return "; ".join(reasons) or None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VendorComparison:
        return cls(
            baseline=VendorBaseline.from_json(data),
            cached=data["cached"],
            session_id=data["session_id"],
            task=data["task"],
            session_best_ms=data["session_best_ms"],
            session_gflops=data["session_gflops"],
            x_of_vendor=data["x_of_vendor"],
        )


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


# ------------------------------------------------------------------------------------------ CPU paths


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


# ------------------------------------------------------------------------------------------ GPU paths


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


# ------------------------------------------------------------------------------------------ measuring


def measure_baseline(
    workload: str,
    shape: dict[str, int],
    dtype: str,
    target_kind: str = "llvm",
    options: MeasureOptions | None = None,
    *,
    seed: int = 0,
) -> VendorBaseline | None:
    """Measure one problem through the vendor library for ``target_kind``; None where there is none."""
    from tunelab.core.workloads.catalog import get_workload

    wl = get_workload(workload)
    shape = wl.parse_shape(shape)
    dtype = wl.check_dtype(dtype)
    opts = options or MeasureOptions()
    inputs = wl.make_inputs(shape, dtype, seed)
    out_shape = tuple(wl.output_shape(shape))
    in_dtype, out_dtype = split_dtype(dtype)
    rtol, atol = wl.tolerance(dtype, shape)
    info: dict[str, Any] = {}
    if target_kind == "cuda":
        made = _torch_kernel(wl.name, shape, inputs, out_shape) or _cupy_kernel(
            wl.name, shape, inputs, out_shape
        )
        if made is None:
            return None
        run, fetch, sync, library = made
        method = {"gemm": "matmul", "batch_matmul": "matmul", "dense_bias": "addmm"}.get(wl.name, "conv2d")
        if in_dtype != out_dtype:
            # cuBLAS / cuDNN on float16 inputs accumulate in float32 (tensor cores) but write float16:
            # the output's rounding is the library's, so it is judged at float16's tolerance
            library += f" ({in_dtype} output, float32 accumulation)"
            rtol, atol = wl.tolerance(in_dtype, shape)
    else:
        out = np.zeros(out_shape, dtype=out_dtype)
        vendor_inputs = inputs
        made_cpu = None
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
        sync = None

        def fetch() -> np.ndarray:
            return out

    run()
    if sync is not None:
        sync()
    got = np.asarray(fetch())
    expected = wl.reference(inputs, shape, dtype)
    err = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))) if got.size else 0.0
    correct = got.shape == expected.shape and bool(np.allclose(got, expected, rtol=rtol, atol=atol))
    time.sleep(
        SPIN_SETTLE_S
    )  # the reference's BLAS threads spin on: timed among them, the vendor ran 2.2x slower
    with NeighbourWatch() as watch:  # a vendor figure timed among busy neighbours is not this machine's
        samples = time_callable(
            run,
            number=opts.number,
            repeat=opts.repeat,
            min_repeat_ms=opts.min_repeat_ms,
            warmup=opts.warmup,
            sync=sync,
        )
    median_ms = median(samples) or 0.0  # time_callable takes at least one sample: never None
    flops = float(wl.flops(shape))
    return VendorBaseline(
        workload=wl.name,
        shape=shape,
        dtype=dtype,
        target_kind=target_kind,
        library=library,
        method=method,
        median_ms=median_ms,
        samples_ms=tuple(samples),
        gflops=flops / (median_ms * 1e-3) / 1e9 if median_ms > 0 else None,
        correct=correct,
        max_abs_err=err,
        measure={
            "number": opts.number,
            "repeat": opts.repeat,
            "min_repeat_ms": opts.min_repeat_ms,
            "warmup": opts.warmup,
            "settle_s": SPIN_SETTLE_S,
            "neighbours": watch.load.to_json() if watch.load is not None else None,
        },
        measured_at=time.time(),
        blas=info or None,
    )


def task_figures(
    store: Store, record: SessionRecord, task: int = 0
) -> tuple[dict[str, int], float, float | None]:
    """(shape, FLOP per call, best ms) of one shape (task) of a session; task 0 is its primary shape.

    A session that tunes several shapes keeps a best per shape; the session's own ``best_ms`` is the
    fastest over all of them, which is not comparable with one shape's baseline.
    """
    from tunelab.core.errors import StoreError, TunelabError

    try:
        tasks = store.tasks(record.id)
    except StoreError:  # a record that is not (or no longer) in this store: its own figures
        tasks = []
    if not tasks:
        return dict(record.shape), float(record.flops), record.best_ms
    if not 0 <= task < len(tasks):
        raise TunelabError(
            f"session {record.id} tunes {len(tasks)} shape(s); the task must be 0..{len(tasks) - 1}"
        )
    t = tasks[task]
    return dict(t.shape), float(t.flops), t.best_ms


def baseline_for(
    store: Store, record: SessionRecord, *, remeasure: bool = False, task: int = 0
) -> VendorComparison | None:
    """The session's problem through the vendor library, measured once per machine and kept in the store,
    against the session's best; ``task`` picks one shape of a session that tunes several (0: the
    primary one).

    None where no vendor path exists (a custom workload, or no PyTorch/CuPy for a GPU target).
    """
    if record.custom_source is not None or record.workload not in CPU_WORKLOADS:
        return None
    shape, flops, best_ms = task_figures(store, record, task)
    if record.hostname is not None and record.hostname != store.hostname:
        # A store tuned on another machine: its vendor figure is that machine's; timing the vendor here
        # would compare other hardware.
        kept = store.baseline(record.workload, shape, record.dtype, record.target_kind, record.hostname)
        if kept is None:
            raise TunelabError(
                f"session {record.id} ran on {record.hostname}, where its vendor was never measured "
                "(timing it on this machine would compare other hardware)"
            )
        return _comparison(record, task, kept, True, flops, best_ms)
    entry = None if remeasure else store.baseline(record.workload, shape, record.dtype, record.target_kind)
    if entry is not None and "settle_s" not in entry.measure:
        entry = None  # timed right after the NumPy reference, among its spinning threads: measured again
    cached = entry is not None
    if entry is None:
        options = MeasureOptions.from_json(
            {k: v for k, v in record.measure.items() if k in ("number", "repeat", "min_repeat_ms", "warmup")}
        )
        entry = measure_baseline(
            record.workload, shape, record.dtype, record.target_kind, options, seed=record.seed
        )
        if entry is None:
            return None
        store.put_baseline(entry)
    return _comparison(record, task, entry, cached, flops, best_ms)


def _comparison(
    record: SessionRecord, task: int, entry: VendorBaseline, cached: bool, flops: float, best_ms: float | None
) -> VendorComparison:
    return VendorComparison(
        baseline=entry,
        cached=cached,
        session_id=record.id,
        task=task,
        session_best_ms=best_ms,
        session_gflops=flops / (best_ms * 1e-3) / 1e9 if best_ms else None,
        x_of_vendor=entry.median_ms / best_ms if best_ms else None,
    )

"""The roofline of this machine, and where each session's best kernel sits under it.

Two micro-benchmarks, measured once per (machine, target kind) and kept in the store
(``machine_profile``), together under :data:`BUDGET_S` seconds:

* peak FLOP/s per dtype (float32 and float64): the best of several large ``np.matmul`` calls, the
  compute-bound probe; the BLAS and its kernel are reported (threadpoolctl);
* memory bandwidth: the best of a multi-threaded copy (``b = a``, 2 streams) and add (``c = a + b``,
  3 streams) over arrays far larger than the caches, in GB/s (10^9 bytes).

On a GPU target the same two probes run through PyTorch or CuPy where installed (``torch.matmul``,
``Tensor.copy_``).

A workload's arithmetic intensity is ``flops / bytes_moved`` (every input read once, the output
written once: the least traffic any schedule needs), and its roofline bound is
``min(peak, intensity * bandwidth)``. :func:`roofline_for` sets a session's best GFLOP/s against it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
from tunelab.core.records import SessionRecord

if TYPE_CHECKING:
    from tunelab.core.store.database import Store

DTYPES = ("float32", "float64")
BUDGET_S = 3.0  # the whole profile (all probes) stays under this
PEAK_N = 1024  # matmul size for the compute probe (grown where a call is too short to time well)
PEAK_PASSES = 2  # compute probes per dtype, interleaved; the best is kept
STREAM_BYTES = 64 << 20  # bytes per array in the bandwidth probe (beyond any L3)
PROFILE_VERSION = 1


def _best_rate(fn: Callable[[], None], work: float, deadline: float, reps: int = 30) -> tuple[float, int]:
    """(best work/s over up to ``reps`` timed calls, at least one, until ``deadline`` (perf_counter),
    calls timed); one untimed warm-up call first."""
    fn()
    best = 0.0
    n = 0
    while n < reps:
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        n += 1
        if dt > 0:
            best = max(best, work / dt)
        if time.perf_counter() >= deadline:
            break
    return best, n


def cpu_peak_gflops(dtype: str, budget_s: float = 0.8) -> dict[str, Any]:
    """Best GFLOP/s of a square ``np.matmul`` in ``dtype`` (NumPy's BLAS), set-up included in ``budget_s``."""
    deadline = time.perf_counter() + budget_s
    rng = np.random.default_rng(0)
    n = PEAK_N
    while True:
        a = rng.uniform(-1, 1, (n, n)).astype(dtype)
        b = rng.uniform(-1, 1, (n, n)).astype(dtype)
        c = np.empty((n, n), dtype=dtype)
        t = time.perf_counter()
        np.matmul(a, b, out=c)
        first = time.perf_counter() - t
        # Grow while a call is too short to time well and a bigger one (8x the work) still fits.
        if first >= 0.005 or n >= 4 * PEAK_N or time.perf_counter() + 40 * first > deadline:
            break
        n *= 2
    rate, reps = _best_rate(lambda: np.matmul(a, b, out=c), 2.0 * n**3, deadline)
    return {"gflops": rate / 1e9, "n": n, "reps": reps}


def cpu_bandwidth_gbs(budget_s: float = 0.8, nbytes: int = STREAM_BYTES, threads: int | None = None) -> dict[str, Any]:
    """Best GB/s of a copy and of an add over ``nbytes`` arrays, split over ``threads`` threads
    (NumPy releases the GIL in both); set-up included in ``budget_s``."""
    from tunelab.core.target.info import cpu_core_count

    start = time.perf_counter()
    threads = threads or cpu_core_count()
    n = nbytes // 8
    a = np.full(n, 1.0)  # np.full writes every page: no first-touch faults inside the timing
    b = np.full(n, 2.0)
    c = np.full(n, 0.0)
    chunks = [slice(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    pool = ThreadPoolExecutor(threads)
    try:
        def copy() -> None:
            list(pool.map(lambda s: np.copyto(b[s], a[s]), chunks))

        def add() -> None:
            list(pool.map(lambda s: np.add(a[s], b[s], out=c[s]), chunks))

        half = start + budget_s / 2 if time.perf_counter() < start + budget_s / 2 else time.perf_counter()
        copy_rate, copy_reps = _best_rate(copy, 2.0 * nbytes, half)
        add_rate, add_reps = _best_rate(add, 3.0 * nbytes, start + budget_s)
    finally:
        pool.shutdown()
    return {"gbs": max(copy_rate, add_rate) / 1e9, "copy_gbs": copy_rate / 1e9, "add_gbs": add_rate / 1e9,
            "bytes_per_array": nbytes, "threads": threads, "reps": copy_reps + add_reps}


def _gpu_probes(dtypes: Sequence[str], budget_s: float) -> dict[str, Any] | None:
    """Peak (matmul) and bandwidth (device copy) through PyTorch, else CuPy; None without either."""
    try:
        import torch

        if torch.cuda.is_available():
            dev = torch.device("cuda")
            peaks = {}
            per = budget_s / (len(dtypes) + 1)
            for dt in dtypes:
                n = 8192 if dt != "float64" else 4096
                a = torch.rand((n, n), device=dev, dtype=getattr(torch, dt))
                b = torch.rand((n, n), device=dev, dtype=getattr(torch, dt))

                def mm(a: Any = a, b: Any = b) -> None:
                    torch.matmul(a, b)
                    torch.cuda.synchronize()

                peaks[dt] = _best_rate(mm, 2.0 * n**3, time.perf_counter() + per)[0] / 1e9
            src = torch.empty(1 << 28, device=dev, dtype=torch.float32)  # 1 GiB
            dst = torch.empty_like(src)

            def copy() -> None:
                dst.copy_(src)
                torch.cuda.synchronize()

            bw = _best_rate(copy, 2.0 * src.numel() * 4, time.perf_counter() + per)[0] / 1e9
            return {"peak_gflops": peaks, "bandwidth_gbs": bw,
                    "detail": {"library": f"PyTorch {torch.__version__}", "device": torch.cuda.get_device_name(0),
                               "tf32": bool(torch.backends.cuda.matmul.allow_tf32)}}
    except ImportError:
        pass
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # ImportError, or no usable CUDA device
        return None
    peaks = {}
    per = budget_s / (len(dtypes) + 1)
    sync = cp.cuda.Device().synchronize
    for dt in dtypes:
        n = 8192 if dt != "float64" else 4096
        a = cp.random.rand(n, n).astype(dt)
        b = cp.random.rand(n, n).astype(dt)

        def mm(a: Any = a, b: Any = b) -> None:
            cp.matmul(a, b)
            sync()

        peaks[dt] = _best_rate(mm, 2.0 * n**3, time.perf_counter() + per)[0] / 1e9
    src = cp.empty(1 << 28, dtype=cp.float32)
    dst = cp.empty_like(src)

    def copy() -> None:
        dst[...] = src
        sync()

    bw = _best_rate(copy, 2.0 * src.size * 4, time.perf_counter() + per)[0] / 1e9
    return {"peak_gflops": peaks, "bandwidth_gbs": bw, "detail": {"library": f"CuPy {cp.__version__}"}}


def measure_machine_profile(target_kind: str = "llvm", dtypes: Sequence[str] = DTYPES,
                            budget_s: float = BUDGET_S) -> dict[str, Any] | None:
    """Run the probes now; None for a GPU target without PyTorch or CuPy (or without a GPU).

    ``{"target_kind", "peak_gflops": {dtype: GFLOP/s}, "bandwidth_gbs", "detail": {...}, "elapsed_s",
    "measured_at"}``. On the CPU, float16 is not probed (NumPy has no float16 BLAS): its roofline
    uses the float32 peak.
    """
    import socket

    started = time.perf_counter()
    if target_kind == "cuda":
        probed = _gpu_probes(list(dtypes), budget_s * 0.9)
        if probed is None:
            return None
        detail = probed["detail"]
        peaks, bandwidth = probed["peak_gflops"], probed["bandwidth_gbs"]
    else:
        from tunelab.core.trust.baselines import blas_description, blas_info

        cpu_dtypes = [d for d in dtypes if d != "float16"]
        deadline = started + budget_s * 0.6  # set-up, and each probe may overrun its share by one call
        # Two interleaved passes, the better of each kept: one pass in five came out at half the float32
        # peak here (as if BLAS had one core), which would put tuned kernels "above the roofline".
        probes: dict[str, dict[str, Any]] = {}
        order = [d for _ in range(PEAK_PASSES) for d in cpu_dtypes]
        for i, d in enumerate(order):
            share = (deadline - time.perf_counter()) / (len(order) - i + 1)
            probe = cpu_peak_gflops(d, max(share, 0.05))
            if d not in probes or probe["gflops"] > probes[d]["gflops"]:
                probes[d] = probe
        stream = cpu_bandwidth_gbs(max(deadline - time.perf_counter(), 0.1))
        info = blas_info()
        peaks = {d: p["gflops"] for d, p in probes.items()}
        bandwidth = stream["gbs"]
        detail = {"blas": info, "kernel": blas_description(info), "peak_probe": probes, "bandwidth_probe": stream}
    return {"target_kind": target_kind, "hostname": socket.gethostname(), "peak_gflops": peaks,
            "bandwidth_gbs": bandwidth, "detail": detail, "version": PROFILE_VERSION,
            "elapsed_s": round(time.perf_counter() - started, 3), "measured_at": time.time()}


def machine_profile(store: Store, target_kind: str = "llvm", *, dtypes: Sequence[str] = DTYPES,
                    remeasure: bool = False) -> dict[str, Any] | None:
    """This machine's profile for ``target_kind`` from the store, measured (and stored) the first time,
    or again for ``remeasure`` or a dtype not yet probed. None where it cannot be measured."""
    profile = None if remeasure else store.machine_profile(target_kind)
    wanted = [d for d in dtypes if not (target_kind != "cuda" and d == "float16")]
    if profile is not None and all(d in profile["peak_gflops"] for d in wanted):
        return dict(profile, cached=True)
    fresh = measure_machine_profile(target_kind, sorted(set(wanted) | set(DTYPES)))
    if fresh is None:
        return None
    store.put_machine_profile(fresh)
    return dict(fresh, cached=False)


def roofline_for(store: Store, record: SessionRecord, *, remeasure: bool = False, task: int = 0) -> dict[str, Any]:
    """Where the session's best kernel (of shape ``task``; 0 is the primary one) sits under this
    machine's roofline.

    ``{"peak_gflops", "bandwidth_gbs", "intensity" (FLOP/byte), "ridge_intensity", "bound_gflops",
    "bound_by" ("compute" | "memory"), "achieved_gflops", "fraction" (achieved / bound), "dtype",
    "peak_dtype", "kernel", "note", "cached", "measured_at"}``; the figures are None where the
    machine could not be profiled (a GPU without PyTorch/CuPy) or the session has no result yet.
    """
    from tunelab.core.trust.baselines import task_figures
    from tunelab.core.workloads.catalog import get_workload

    wl = get_workload(record.workload, record.custom_source)
    shape, _, best_ms = task_figures(store, record, task)
    flops = float(wl.flops(shape))
    moved = float(wl.bytes_moved(shape, record.dtype))
    intensity = flops / moved if moved else None
    achieved = flops / (best_ms * 1e-3) / 1e9 if best_ms else None
    out: dict[str, Any] = {"session_id": record.id, "task": task, "workload": record.workload, "shape": shape,
                           "dtype": record.dtype, "target_kind": record.target_kind, "flops": flops,
                           "bytes_moved": moved, "intensity": intensity, "peak_gflops": None,
                           "bandwidth_gbs": None, "ridge_intensity": None, "bound_gflops": None, "bound_by": None,
                           "achieved_gflops": achieved, "fraction": None, "peak_dtype": None,
                           "kernel": None, "note": None, "cached": None, "measured_at": None}
    profile = machine_profile(store, record.target_kind, dtypes=(record.dtype,), remeasure=remeasure)
    if profile is None:
        out["note"] = f"no way to profile a {record.target_kind} machine here (needs PyTorch or CuPy and a GPU)"
        return out
    peaks = profile["peak_gflops"]
    peak_dtype = record.dtype if record.dtype in peaks else "float32"
    if peak_dtype != record.dtype:
        out["note"] = f"no {record.dtype} probe on this target (NumPy has no {record.dtype} BLAS): the float32 peak stands in"
    peak = peaks.get(peak_dtype)
    bandwidth = profile["bandwidth_gbs"]
    detail = profile.get("detail") or {}
    out.update(peak_gflops=peak, bandwidth_gbs=bandwidth, peak_dtype=peak_dtype,
               kernel=detail.get("kernel") or detail.get("library"), cached=profile.get("cached"),
               measured_at=profile.get("measured_at"))
    if peak and bandwidth and intensity:
        memory_bound = intensity * bandwidth
        out["bound_gflops"] = min(peak, memory_bound)
        out["bound_by"] = "memory" if memory_bound < peak else "compute"
        out["ridge_intensity"] = peak / bandwidth
        if achieved:
            out["fraction"] = achieved / out["bound_gflops"]
            if out["fraction"] > 1.0:
                above = ("the session beats the measured roofline: the probes probably ran on a busy machine "
                         "(or the kernel runs from cache); measure again with remeasure=True "
                         "(tunelab roofline --remeasure)")
                out["note"] = f"{out['note']}; {above}" if out["note"] else above
    return out

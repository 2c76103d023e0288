"""The roofline's micro-benchmarks: peak FLOP/s per dtype and memory bandwidth, on the CPU or a GPU."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any, Self, cast

import numpy as np

from tunelab.core.measure.timing import time_callable
from tunelab.core.target.host_cpu import vector_bits

BUDGET_S = 3.0  # the whole profile (all probes) stays under this


PEAK_N = 1024  # matmul size for the compute probe (grown to 2048 where a call is too short to time well)


PEAK_PASSES = 4  # BLAS compute probes per dtype, interleaved; the best is kept


FMA_CHAINS = 12  # independent vector accumulators per thread in the FMA probe (latency x throughput)


FMA_CALL_S = 0.01  # the FMA probe's iterations are grown until one call lasts this long


STREAM_BYTES = 64 << 20  # bytes per array in the bandwidth probe (beyond any L3)


class _FieldsJson:
    """A probe's JSON mapping: its dataclass fields as they are, in their order."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(cast(Any, self))}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cast(Any, cls)(**{f.name: data[f.name] for f in fields(cast(Any, cls))})


@dataclass(frozen=True)
class PeakProbe(_FieldsJson):
    """The compute probe of one dtype: the best GFLOP/s of ``reps`` timed ``n`` x ``n`` matmuls."""

    gflops: float
    n: int
    reps: int


@dataclass(frozen=True)
class BandwidthProbe(_FieldsJson):
    """The bandwidth probe: the better of a copy and an add over ``bytes_per_array`` arrays, in GB/s."""

    gbs: float
    copy_gbs: float
    add_gbs: float
    bytes_per_array: int
    threads: int
    reps: int


def _best_rate(fn: Callable[[], Any], work: float, deadline: float, reps: int = 30) -> tuple[float, int]:
    """(best work/s over up to ``reps`` timed calls, at least one, until ``deadline`` (perf_counter),
    calls timed); one untimed warm-up call first."""
    samples_ms = time_callable(fn, number=1, repeat=reps, min_repeat_ms=0.0, warmup=1, deadline=deadline)
    # The best call, not the median: a probe asks what the machine can do, and every disturbance slows.
    best = max((work / (ms * 1e-3) for ms in samples_ms if ms > 0), default=0.0)
    return best, len(samples_ms)


def cpu_peak_gflops(dtype: str, budget_s: float = 0.8, threads: int | None = None) -> PeakProbe:
    """Best GFLOP/s of a square ``np.matmul`` in ``dtype`` (NumPy's BLAS, with ``threads`` threads, by
    default one per core), set-up included in ``budget_s``."""
    from tunelab.core.target.info import cpu_core_count

    threads = threads or cpu_core_count()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return _cpu_peak_gflops(dtype, budget_s)
    with threadpool_limits(limits=threads, user_api="blas"):
        return _cpu_peak_gflops(dtype, budget_s)


def _cpu_peak_gflops(dtype: str, budget_s: float) -> PeakProbe:
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
        if first >= 0.005 or n >= 2 * PEAK_N or time.perf_counter() + 40 * first > deadline:
            break
        n *= 2
    rate, reps = _best_rate(lambda: np.matmul(a, b, out=c), 2.0 * n**3, deadline)
    return PeakProbe(gflops=rate / 1e9, n=n, reps=reps)


@dataclass(frozen=True)
class FmaProbe(_FieldsJson):
    """The FMA probe of one dtype: the best GFLOP/s of ``reps`` calls of a TVM kernel in which each of
    ``threads`` threads runs ``chains`` independent ``lanes``-wide ``acc = acc * a + b`` chains for
    ``iters`` iterations; ``fma_in_asm``: the built code holds FMA instructions (vfmadd, fmla)."""

    gflops: float
    threads: int
    chains: int
    lanes: int
    iters: int
    reps: int
    fma_in_asm: bool
    build_s: float


@functools.lru_cache(maxsize=8)
def _fma_kernel(target_text: str, dtype: str) -> tuple[Any, int, int, bool]:
    """(the built FMA kernel ``main(out, iters)``, threads, lanes, FMA instructions in its asm) for a
    TVM target (as JSON text); built once per process."""
    import tvm
    from tvm.script import tirx as T

    target_json = json.loads(target_text)
    threads = int(target_json.get("num-cores") or 1)
    lanes = vector_bits(target_json) // (64 if dtype == "float64" else 32)
    chains = FMA_CHAINS
    width = chains * lanes
    # Constants, not loaded values: a load inside the loop may alias the accumulators' stores, which
    # keeps them in memory; with none, LLVM keeps every chain in a register.
    mul = tvm.tirx.const(0.9999, dtype)
    add = tvm.tirx.const(0.0001, dtype)

    @T.prim_func
    def fma(out: T.Buffer((threads, width), dtype), iters: T.int32) -> None:  # type: ignore[valid-type]
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for t in T.parallel(threads):
            acc = T.alloc_buffer((width,), dtype, scope="local")
            for j in T.vectorized(width):
                acc[j] = T.Cast(dtype, j + t)
            for _ in range(iters):
                for c in T.unroll(chains):
                    for lane in T.vectorized(lanes):
                        acc[c * lanes + lane] = acc[c * lanes + lane] * mul + add
            for j in range(width):
                out[t, j] = acc[j]

    lib = tvm.compile(tvm.IRModule({"main": fma}), target=tvm.target.Target(target_json))
    try:
        asm = (lib.mod if hasattr(lib, "mod") else lib).inspect_source("asm")
        has_fma = any(op in asm for op in ("vfmadd", "fmla", "vfma"))
    except Exception:  # noqa: BLE001 - no asm to read: the figure still stands, unchecked
        has_fma = False
    return lib["main"], threads, lanes, has_fma


def fma_peak_gflops(dtype: str, budget_s: float = 0.5, target: dict[str, Any] | None = None) -> FmaProbe:
    """Best GFLOP/s of the FMA-chain kernel (:func:`_fma_kernel`) in ``dtype`` for ``target`` (a TVM
    target as JSON; by default this host's, ``resolve_target("llvm")``), build included in
    ``budget_s``. Raises where TVM cannot build or run it."""
    import tvm

    from tunelab.core.target.info import resolve_target

    start = time.perf_counter()
    deadline = start + budget_s
    target_json = target or resolve_target("llvm").json
    fn, threads, lanes, has_fma = _fma_kernel(json.dumps(target_json, sort_keys=True), dtype)
    build_s = time.perf_counter() - start
    out = tvm.runtime.tensor(np.zeros((threads, FMA_CHAINS * lanes), dtype), tvm.cpu())
    iters = 1 << 14
    while True:  # grow until one call lasts FMA_CALL_S (or no bigger one fits)
        t = time.perf_counter()
        fn(out, iters)
        took = time.perf_counter() - t
        if took >= FMA_CALL_S or time.perf_counter() + 8 * took > deadline:
            break
        iters *= 2 if took >= FMA_CALL_S / 16 else 8
    flops = 2.0 * threads * FMA_CHAINS * lanes * iters
    rate, reps = _best_rate(lambda: fn(out, iters), flops, deadline)
    return FmaProbe(
        gflops=rate / 1e9,
        threads=threads,
        chains=FMA_CHAINS,
        lanes=lanes,
        iters=iters,
        reps=reps,
        fma_in_asm=has_fma,
        build_s=round(build_s, 3),
    )


def cpu_bandwidth_gbs(
    budget_s: float = 0.8, nbytes: int = STREAM_BYTES, threads: int | None = None
) -> BandwidthProbe:
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
    return BandwidthProbe(
        gbs=max(copy_rate, add_rate) / 1e9,
        copy_gbs=copy_rate / 1e9,
        add_gbs=add_rate / 1e9,
        bytes_per_array=nbytes,
        threads=threads,
        reps=copy_reps + add_reps,
    )


def _gpu_probes(
    dtypes: Sequence[str], budget_s: float
) -> tuple[dict[str, float], float, dict[str, Any]] | None:
    """(peak GFLOP/s per dtype (matmul), bandwidth GB/s (device copy), detail) through PyTorch, else CuPy;
    None without either."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False  # a float32 peak of float32 arithmetic
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
            return (
                peaks,
                bw,
                {
                    "library": f"PyTorch {torch.__version__}",
                    "device": torch.cuda.get_device_name(0),
                    "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                },
            )
    except ImportError:
        pass
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # noqa: BLE001 - ImportError, or no usable CUDA device
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

    def copy_cupy() -> None:
        dst[...] = src
        sync()

    bw = _best_rate(copy_cupy, 2.0 * src.size * 4, time.perf_counter() + per)[0] / 1e9
    return peaks, bw, {"library": f"CuPy {cp.__version__}"}


def _cpu_probes(
    cpu_dtypes: list[str], budget_s: float
) -> tuple[float, dict[str, float], float, dict[str, Any]]:
    """When the clock started (after the imports), the CPU's peaks (BLAS passes and FMA kernel, the
    larger), bandwidth and the probes' detail, within ``budget_s``."""
    from tunelab.core.trust.baselines import blas_description, blas_info

    try:
        import tvm  # noqa: F401  (imported before the clock starts: a once-per-process cost)
    except ImportError:
        pass
    started = time.perf_counter()
    # Shares of the budget: BLAS passes 40 %, FMA kernel (build included) 15 %, bandwidth 20 %; the
    # rest is slack, as each probe may overrun its share by one call.
    blas_deadline = started + budget_s * 0.4
    # Interleaved passes, the best of each dtype kept: single passes came out at 105-170 GFLOP/s
    # here (as if BLAS had one core for a while), which put tuned kernels "above the roofline".
    probes: dict[str, PeakProbe] = {}
    order = [d for _ in range(PEAK_PASSES) for d in cpu_dtypes]
    for i, d in enumerate(order):
        share = (blas_deadline - time.perf_counter()) / (len(order) - i)
        probe = cpu_peak_gflops(d, max(share, 0.05))
        if d not in probes or probe.gflops > probes[d].gflops:
            probes[d] = probe
    fma: dict[str, FmaProbe] = {}
    fma_error = None
    fma_deadline = started + budget_s * 0.55
    for i, d in enumerate(cpu_dtypes):
        share = (fma_deadline - time.perf_counter()) / (len(cpu_dtypes) - i)
        try:
            fma[d] = fma_peak_gflops(d, max(share, 0.05))
        except Exception as exc:  # noqa: BLE001 - TVM missing or unable to build for this host: the BLAS alone
            why = str(exc).splitlines()[0][:200] if str(exc) else ""
            fma_error = f"FMA probe failed ({type(exc).__name__}: {why}); the peak is the BLAS probe alone"
            break
    stream = cpu_bandwidth_gbs(max(started + budget_s * 0.75 - time.perf_counter(), 0.1))
    info = blas_info()
    peaks = {d: max(p.gflops, fma[d].gflops if d in fma else 0.0) for d, p in probes.items()}
    bandwidth = stream.gbs
    detail = {
        "blas": info,
        "kernel": blas_description(info),
        "peak_probe": {d: p.to_json() for d, p in probes.items()},
        "fma_probe": {d: p.to_json() for d, p in fma.items()},
        "peak_source": {
            d: "fma" if d in fma and fma[d].gflops > probes[d].gflops else "blas" for d in probes
        },
        "bandwidth_probe": stream.to_json(),
    }
    if fma_error:
        detail["fma_error"] = fma_error
    return started, peaks, bandwidth, detail

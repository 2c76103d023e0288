"""The roofline of this machine, and where each session's best kernel sits under it.

Two micro-benchmarks, measured once per (machine, target kind) and kept in the store
(``machine_profile``), together under :data:`BUDGET_S` seconds:

* peak FLOP/s per dtype (float32 and float64): the larger of two independent probes, the best of many
  large ``np.matmul`` calls (BLAS threads = cores, several interleaved passes; the BLAS and its kernel
  are reported, threadpoolctl) and a TVM kernel of independent FMA chains kept in registers
  (:func:`fma_peak_gflops`; the BLAS alone where TVM cannot build it, said in the detail);
* memory bandwidth: the best of a multi-threaded copy (``b = a``, 2 streams) and add (``c = a + b``,
  3 streams) over arrays far larger than the caches, in GB/s (10^9 bytes).

On a GPU target the same two probes run through PyTorch or CuPy where installed (``torch.matmul``,
``Tensor.copy_``).

A workload's arithmetic intensity is ``flops / bytes_moved`` (every input read once, the output
written once: the least traffic any schedule needs), and its roofline bound is
``min(peak, intensity * bandwidth)``. :func:`roofline_for` sets a session's best GFLOP/s against it;
the peak it uses is never below a vendor GFLOP/s stored for this machine (a rate the machine reached).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.measure.timing import time_callable
from tunelab.core.records import MachineProfile, SessionRecord
from tunelab.core.target.host_cpu import vector_bits
from tunelab.core.workloads.dtypes import split_dtype

if TYPE_CHECKING:
    from tunelab.core.store import Store

DTYPES = ("float32", "float64")
BUDGET_S = 3.0  # the whole profile (all probes) stays under this
PEAK_N = 1024  # matmul size for the compute probe (grown to 2048 where a call is too short to time well)
PEAK_PASSES = 4  # BLAS compute probes per dtype, interleaved; the best is kept
FMA_CHAINS = 12  # independent vector accumulators per thread in the FMA probe (latency x throughput)
FMA_CALL_S = 0.01  # the FMA probe's iterations are grown until one call lasts this long
STREAM_BYTES = 64 << 20  # bytes per array in the bandwidth probe (beyond any L3)
# 2: the peak is max(BLAS probe over 4 passes, FMA probe); profiles of version 1 are measured again.
PROFILE_VERSION = 2


@dataclass(frozen=True)
class PeakProbe:
    """The compute probe of one dtype: the best GFLOP/s of ``reps`` timed ``n`` x ``n`` matmuls."""

    gflops: float
    n: int
    reps: int

    def to_json(self) -> dict[str, Any]:
        return {"gflops": self.gflops, "n": self.n, "reps": self.reps}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PeakProbe:
        return cls(gflops=data["gflops"], n=data["n"], reps=data["reps"])


@dataclass(frozen=True)
class BandwidthProbe:
    """The bandwidth probe: the better of a copy and an add over ``bytes_per_array`` arrays, in GB/s."""

    gbs: float
    copy_gbs: float
    add_gbs: float
    bytes_per_array: int
    threads: int
    reps: int

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BandwidthProbe:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class RooflineReport:
    """Where a session's best kernel (of one shape, ``task``) sits under this machine's roofline.

    The machine's figures (``peak_gflops`` ... ``measured_at``) are None where it could not be profiled
    (a GPU without PyTorch/CuPy); ``achieved_gflops`` and ``fraction`` are None while the session has
    no result; ``note`` says why, or that a figure is suspect.
    """

    session_id: int
    task: int
    workload: str
    shape: dict[str, int]
    dtype: str
    target_kind: str
    flops: float
    bytes_moved: float
    intensity: float | None  # FLOP/byte: flops / bytes_moved
    peak_gflops: float | None  # of peak_dtype
    bandwidth_gbs: float | None
    ridge_intensity: float | None  # where the roof turns: peak / bandwidth
    bound_gflops: float | None  # min(peak, intensity * bandwidth)
    bound_by: str | None  # "compute" | "memory"
    achieved_gflops: float | None  # the session's best on this shape
    fraction: float | None  # achieved / bound
    peak_dtype: str | None  # the dtype whose peak stands: the session's, else float32
    kernel: str | None  # the BLAS or library the peak was measured with
    note: str | None
    cached: bool | None  # the machine profile came from the store
    measured_at: float | None  # when the machine profile was measured
    # The best schedule itself under the roofline cost model (tunelab.core.search.roofline_model): its
    # FLOPs, vector and parallel use and memory traffic read off its IR, against the same peak and
    # bandwidth. What bounds it, what it could reach, and which of its choices the model says limit it.
    schedule_bound_by: str | None = None  # "compute" | "memory"
    schedule_bound_ms: float | None = None  # the model's time for this schedule
    schedule_fraction: float | None = None  # schedule_bound_ms / the measured best
    schedule_limits: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["shape"] = dict(self.shape)
        data["schedule_limits"] = list(self.schedule_limits)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RooflineReport:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["shape"] = dict(values["shape"])
        values["schedule_limits"] = tuple(values.get("schedule_limits") or ())
        return cls(**values)

    def schedule_sentence(self) -> str | None:
        """'its schedule: compute-bound; the model puts it at 62 % of what it could reach; limited by ...'"""
        if self.schedule_bound_by is None:
            return None
        text = f"its schedule: {self.schedule_bound_by}-bound"
        if self.schedule_fraction is not None:
            text += f", at {self.schedule_fraction:.0%} of the time the roofline model gives it"
        if self.schedule_limits:
            text += "; limited by " + ", ".join(self.schedule_limits)
        return text


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
class FmaProbe:
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

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FmaProbe:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


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


def measure_machine_profile(
    target_kind: str = "llvm", dtypes: Sequence[str] = DTYPES, budget_s: float = BUDGET_S
) -> MachineProfile | None:
    """Run the probes now; None for a GPU target without PyTorch or CuPy (or without a GPU).

    On the CPU, float16 is not probed (NumPy has no float16 BLAS): its roofline uses the float32 peak.
    The detail holds the BLAS (``blas``, ``kernel``) and the probes (``peak_probe``: dtype ->
    :class:`PeakProbe`, ``fma_probe``: dtype -> :class:`FmaProbe`, ``peak_source``: dtype -> "blas" or
    "fma", the probe whose figure stands, ``bandwidth_probe``: :class:`BandwidthProbe`, as JSON;
    ``fma_error`` where the FMA kernel could not be built or run, the BLAS alone then); on a GPU the
    library. The TVM import (once per process) is not counted in the budget.
    """
    import socket

    started = time.perf_counter()
    if target_kind == "cuda":
        probed = _gpu_probes(list(dtypes), budget_s * 0.9)
        if probed is None:
            return None
        peaks, bandwidth, detail = probed
    else:
        from tunelab.core.trust.baselines import blas_description, blas_info

        try:
            import tvm  # noqa: F401  (imported before the clock starts: a once-per-process cost)
        except ImportError:
            pass
        started = time.perf_counter()
        cpu_dtypes = [d for d in dtypes if d != "float16"]
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
                fma_error = (
                    f"FMA probe failed ({type(exc).__name__}: {why}); the peak is the BLAS probe alone"
                )
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
    return MachineProfile(
        target_kind=target_kind,
        hostname=socket.gethostname(),
        peak_gflops=peaks,
        bandwidth_gbs=bandwidth,
        detail=detail,
        version=PROFILE_VERSION,
        elapsed_s=round(time.perf_counter() - started, 3),
        measured_at=time.time(),
    )


def machine_profile(
    store: Store,
    target_kind: str = "llvm",
    *,
    dtypes: Sequence[str] = DTYPES,
    remeasure: bool = False,
    hostname: str | None = None,
) -> MachineProfile | None:
    """This machine's profile for ``target_kind`` from the store (``cached``), measured (and stored) the
    first time, or again for ``remeasure`` or a dtype not yet probed. None where it cannot be measured.
    ``hostname``: another machine's (a store tuned there, opened here): only what the store holds, since
    measuring here would describe other hardware."""
    if hostname is not None and hostname != store.hostname:
        stored = store.machine_profile(target_kind, hostname)
        return replace(stored, cached=True) if stored is not None else None
    profile = None if remeasure else store.machine_profile(target_kind)
    wanted = [d for d in dtypes if not (target_kind != "cuda" and d == "float16")]
    if profile is not None and all(d in profile.peak_gflops for d in wanted):
        return replace(profile, cached=True)
    fresh = measure_machine_profile(target_kind, sorted(set(wanted) | set(DTYPES)))
    if fresh is None:
        return None
    store.put_machine_profile(fresh)
    return replace(fresh, cached=False)


def compute_dtype(dtype: str, target_kind: str) -> str:
    """The arithmetic's dtype, whose peak a roofline uses: a mixed dtype (float16:float32) runs float16
    on a GPU's tensor cores and float32 on a CPU (which widens the inputs)."""
    inputs_dtype, acc_dtype = split_dtype(dtype)
    return inputs_dtype if target_kind == "cuda" else acc_dtype


def roofline_for(
    store: Store, record: SessionRecord, *, remeasure: bool = False, task: int = 0
) -> RooflineReport:
    """Where the session's best kernel (of shape ``task``; 0 is the primary one) sits under this
    machine's roofline (measured and stored the first time, see :func:`machine_profile`)."""
    from tunelab.core.trust.baselines import task_figures
    from tunelab.core.workloads.catalog import get_workload

    wl = get_workload(record.workload, record.custom_source)
    shape, _, best_ms = task_figures(store, record, task)
    flops = float(wl.flops(shape))
    moved = float(wl.bytes_moved(shape, record.dtype))
    intensity = flops / moved if moved else None
    achieved = flops / (best_ms * 1e-3) / 1e9 if best_ms else None
    report = RooflineReport(
        session_id=record.id,
        task=task,
        workload=record.workload,
        shape=shape,
        dtype=record.dtype,
        target_kind=record.target_kind,
        flops=flops,
        bytes_moved=moved,
        intensity=intensity,
        peak_gflops=None,
        bandwidth_gbs=None,
        ridge_intensity=None,
        bound_gflops=None,
        bound_by=None,
        achieved_gflops=achieved,
        fraction=None,
        peak_dtype=None,
        kernel=None,
        note=None,
        cached=None,
        measured_at=None,
    )
    arithmetic = compute_dtype(record.dtype, record.target_kind)
    profile = machine_profile(
        store,
        record.target_kind,
        dtypes=(arithmetic,),
        remeasure=remeasure,
        hostname=record.hostname,  # the machine the session ran on: its roof, not this one's
    )
    if profile is None and record.hostname is not None and record.hostname != store.hostname:
        return replace(
            report, note=f"the {record.target_kind} roofline of {record.hostname} was never measured"
        )
    if profile is None:
        return replace(
            report,
            note=f"no way to profile a {record.target_kind} machine here (needs PyTorch or CuPy and a GPU)",
        )
    peaks = profile.peak_gflops
    peak_dtype = arithmetic if arithmetic in peaks else "float32"
    note = None
    if peak_dtype != arithmetic:
        note = (
            f"no {arithmetic} probe on this target (NumPy has no {arithmetic} BLAS): "
            "the float32 peak stands in"
        )
    peak = peaks.get(peak_dtype)
    # The floor: a vendor rate stored for this machine (the session's own baseline, or the fastest in
    # this dtype) is a rate the machine reached, so the peak is at least that.
    floors = []
    own = store.baseline(record.workload, shape, record.dtype, record.target_kind)
    if own is not None and own.gflops:
        floors.append((own.gflops, "the vendor library's measured"))
    fastest = store.fastest_baseline(peak_dtype, record.target_kind)
    if fastest is not None and fastest.gflops:
        floors.append((fastest.gflops, f"the vendor library's measured (on {fastest.workload})"))
    if peak and floors:
        floor, whose = max(floors)
        if floor > peak:
            raised = f"peak raised from the probe's {peak:.0f} to {whose} {floor:.0f} GFLOP/s"
            note = f"{note}; {raised}" if note else raised
            peak = floor
    bandwidth = profile.bandwidth_gbs
    bound = bound_by = ridge = fraction = None
    if peak and bandwidth and intensity:
        memory_bound = intensity * bandwidth
        bound = min(peak, memory_bound)
        bound_by = "memory" if memory_bound < peak else "compute"
        ridge = peak / bandwidth
        if achieved:
            fraction = achieved / bound
            if fraction > 1.0:
                above = (
                    "the session beats the measured roofline: the probes probably ran on a busy machine "
                    "(or the kernel runs from cache); measure again with remeasure=True "
                    "(tunelab roofline --remeasure)"
                )
                note = f"{note}; {above}" if note else above
    report = replace(
        report,
        peak_gflops=peak,
        bandwidth_gbs=bandwidth,
        ridge_intensity=ridge,
        bound_gflops=bound,
        bound_by=bound_by,
        fraction=fraction,
        peak_dtype=peak_dtype,
        kernel=profile.kernel,
        note=note,
        cached=profile.cached,
        measured_at=profile.measured_at,
    )
    return _with_schedule(store, record, task, report, best_ms)


def _with_schedule(
    store: Store, record: SessionRecord, task: int, report: RooflineReport, best_ms: float | None
) -> RooflineReport:
    """The report with the best schedule under the roofline cost model, at the report's peak and
    bandwidth; unchanged where the session has no best or its space cannot be rebuilt here."""
    if not best_ms or not report.peak_gflops or not report.bandwidth_gbs:
        return report
    from tunelab.core.errors import StoreError
    from tunelab.core.search.roofline_model import RooflineMachine, estimate
    from tunelab.core.search.space.factory import space_for_task

    try:
        tasks, trials = store.tasks(record.id), store.trials(record.id)
    except StoreError:  # a record that is not (or no longer) in this store: no schedule to read
        return report
    task_id = tasks[task].id if tasks else None
    best = min(
        (t for t in trials if t.ok and t.latency_ms and t.task_id in (task_id, None)),
        key=lambda t: t.latency_ms or 0.0,
        default=None,
    )
    if best is None:
        return report
    try:
        space = space_for_task(record, tasks[task]) if tasks else None
        if space is None:
            from tunelab.core.search.space.factory import space_for_session

            space = space_for_session(record)
        row = space.features([best.config])[0]
    except Exception:  # noqa: BLE001 - a space this machine cannot rebuild: the machine figures stand alone
        return report
    machine = replace(
        RooflineMachine.for_space(space), peak_gflops=report.peak_gflops, bandwidth_gbs=report.bandwidth_gbs
    )
    if len(row) < 328 or not np.any(row[:328]):  # a schedule that no longer builds has no IR features
        return report
    est = estimate(row, machine)
    return replace(
        report,
        schedule_bound_by=est.bound,
        schedule_bound_ms=est.predicted_ms,
        schedule_fraction=est.predicted_ms / best.latency_ms if best.latency_ms else None,
        schedule_limits=est.limits,
    )

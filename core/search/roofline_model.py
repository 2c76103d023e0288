"""The analytical cost models: ``roofline`` (no training) and ``hybrid`` (the roofline as a learned model's
prior), read off MetaSchedule's per-store features of each schedule.

Every feature row a space gives (tunelab.core.search.space) starts with MetaSchedule's per-store features
of the scheduled IR, summed over the stores (164) and maxed over them (164), each ``log2(1 + x)``. The
roofline model reads, from the maxed half (the store that dominates: the reduction's update):

- the work: float multiply-adds, additions and multiplications the store executes (loop extents
  included), as FLOPs (a multiply-add counts 2);
- the compute rate the schedule can reach: its vectorized extent against the target's vector lanes,
  its parallel extent against the cores (an extent that does not divide leaves cores idle in the last
  wave), on a GPU its threads against the device's;
- the traffic: for each buffer the store touches, its distinct cache lines once where they all fit in
  the last-level cache; otherwise the lines it fetches, divided by the reuse MetaSchedule's analysis
  finds where the bytes touched between two reuses fit, else fetched every time;

and predicts ``max(FLOPs / rate, traffic / bandwidth)`` — the classic roofline, per schedule. The machine's
peak and bandwidth are the stored profile's (``tunelab roofline``) where one exists, else nominal figures
for the target (4 FLOP per lane per cycle at 2.5 GHz per core, 10 GB/s per core): rankings do not depend
on the scale, only on the balance of the two. Explainable and data-free, and, as the seed's section on
cost models says, imprecise: it knows nothing of instruction scheduling, register pressure or prefetching.

``hybrid`` is the xgb model learning the roofline's error: trained on log(measured / roofline) with
the roofline's log prediction as one more feature, so it predicts the roofline until it has data and
corrects it where trials show it wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.search.costmodel import CostModel

N_STORE = 164  # MetaSchedule's per-store feature length; rows hold the sum, then the max over stores
G1 = 57  # group 1: arithmetic, vectorize / unroll / parallel, GPU binding
BUFFER = 18  # group 2: per buffer (5 of them)
N_BUFFERS = 5
# group 1 positions (per_store_feature.cc)
FLOAT_MAD, FLOAT_ADDSUB, FLOAT_MUL = 0, 1, 2
VEC_NUM, VEC_PROD, VEC_LEN = 16, 17, 18
PAR_NUM, PAR_PROD = 38, 39
IS_GPU, BLOCK_XYZ, THREAD_XYZ, VTHREAD = 49, (50, 51, 52), (53, 54, 55), 56
# group 2 positions within one buffer
B_LINES, B_REUSE_DIS_BYTES, B_REUSE_CT, B_UNIQUE_LINES = 5, 11, 12, 6
LINE_BYTES = 64
NOMINAL_GHZ = 2.5
NOMINAL_GBS_PER_CORE = 10.0
GPU_RESIDENT_THREADS = 132 * 2048  # an H100/H200's resident threads: parallelism a kernel needs to fill it


def _count(value: float) -> float:
    """A per-store feature back from ``log2(1 + x)`` to x (a count: rounded, as float error leaves 15.99)."""
    return float(round(2.0 ** abs(value) - 1.0))


def _last_level_cache_bytes() -> float:
    """The largest CPU cache Linux reports (sysfs), else 1 MiB: a footprint within it is fetched once."""
    import glob

    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            text = open(path).read().strip().upper()  # one short read
        except OSError:
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        digits = text.rstrip("KM")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return float(max(sizes)) if sizes else 1024 * 1024.0


@dataclass(frozen=True)
class RooflineMachine:
    """What the roofline model measures schedules against."""

    peak_gflops: float  # every core, full vectors
    bandwidth_gbs: float
    cores: int
    lanes: int  # vector lanes of the dtype (CPU); 1 on a GPU
    cache_bytes: float  # reuse within this many bytes is a cache hit
    gpu: bool = False
    source: str = "nominal"  # "nominal" or "measured" (the stored profile)

    @classmethod
    def for_space(cls, space: Any, profile: Any = None) -> RooflineMachine:
        """The machine for a space's target and dtype; ``profile`` (a stored MachineProfile) sets the peak
        and bandwidth where given."""
        target = getattr(space, "target", None)
        dtype = str(getattr(space, "dtype", "float32")).partition(":")[0]
        bits = 64 if dtype == "float64" else 16 if dtype == "float16" else 32
        gpu = getattr(target, "kind", "llvm") == "cuda"
        if gpu:
            cores, lanes, cache = 132, 1, 256 * 1024.0  # an SM's shared memory + L1 as the reuse window
            peak, bandwidth = 60_000.0, 3_000.0
        else:
            target_json = dict(getattr(target, "json", {}) or {})
            cores = int(target_json.get("num-cores") or 1)
            try:
                from tunelab.core.target.host_cpu import vector_bits

                lanes = max(vector_bits(target_json) // bits, 1)
            except Exception:  # noqa: BLE001 - a target LLVM cannot describe: SSE-wide
                lanes = max(128 // bits, 1)
            cache = _last_level_cache_bytes()
            peak = cores * lanes * 4 * NOMINAL_GHZ
            bandwidth = cores * NOMINAL_GBS_PER_CORE
        source = "nominal"
        if profile is not None:
            measured = (profile.peak_gflops or {}).get(dtype) or (profile.peak_gflops or {}).get("float32")
            if measured and profile.bandwidth_gbs:
                peak, bandwidth, source = float(measured), float(profile.bandwidth_gbs), "measured"
        return cls(peak, bandwidth, max(cores, 1), lanes, cache, gpu, source)


@dataclass(frozen=True)
class RooflineEstimate:
    """One schedule under the roofline: what bounds it and which of its choices limit it."""

    flops: float
    traffic_bytes: float
    compute_ms: float
    memory_ms: float
    vector_lanes_used: float  # of machine.lanes
    cores_used: float  # of machine.cores (GPU: the fraction of resident threads, times cores)
    limits: tuple[str, ...]

    @property
    def predicted_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_ms >= self.memory_ms else "memory"


def estimate(row: np.ndarray, machine: RooflineMachine) -> RooflineEstimate:
    """The roofline of one feature row (tunelab's: per-store features summed, then maxed, then knobs)."""
    top = np.asarray(row, dtype=np.float64)[N_STORE : 2 * N_STORE]
    flops = 2 * _count(top[FLOAT_MAD]) + _count(top[FLOAT_ADDSUB]) + _count(top[FLOAT_MUL])
    flops = max(flops, 1.0)
    limits: list[str] = []
    if machine.gpu or _count(top[IS_GPU]) >= 1:
        threads = math.prod(max(_count(top[i]), 1.0) for i in (*BLOCK_XYZ, *THREAD_XYZ))
        fill = min(threads / GPU_RESIDENT_THREADS, 1.0)
        lanes_used, cores_used = 1.0, fill * machine.cores
        rate = machine.peak_gflops * fill
        if fill < 0.5:
            limits.append(f"{threads:.0f} threads fill {fill:.0%} of the GPU")
    else:
        vec_len = _count(top[VEC_LEN]) if _count(top[VEC_NUM]) >= 1 else 1.0
        lanes_used = min(max(vec_len, 1.0), machine.lanes)
        par = _count(top[PAR_PROD]) if _count(top[PAR_NUM]) >= 1 else 1.0
        par = max(par, 1.0)
        waves = math.ceil(par / machine.cores)
        cores_used = min(par / waves, machine.cores)
        rate = machine.peak_gflops / machine.cores * cores_used * lanes_used / machine.lanes
        if lanes_used < machine.lanes:
            limits.append(f"vectorized {lanes_used:.0f} of {machine.lanes} lanes")
        if cores_used < machine.cores - 1e-9:
            limits.append(f"parallel over {cores_used:.2g} of {machine.cores} cores")
    traffic = 0.0
    for b in range(N_BUFFERS):
        buf = top[G1 + BUFFER * b : G1 + BUFFER * (b + 1)]
        lines = _count(buf[B_LINES])
        if lines <= 0:
            continue
        unique = _count(buf[B_UNIQUE_LINES])
        if unique * LINE_BYTES <= machine.cache_bytes:
            fetched = unique  # the whole footprint stays in the cache: each line comes from memory once
        else:
            reuse = max(_count(buf[B_REUSE_CT]), 1.0)
            fits = _count(buf[B_REUSE_DIS_BYTES]) <= machine.cache_bytes
            fetched = max(lines / reuse if fits else lines, unique)
        traffic += fetched * LINE_BYTES
    compute_ms = flops / (rate * 1e9) * 1e3
    memory_ms = traffic / (machine.bandwidth_gbs * 1e9) * 1e3
    if memory_ms > compute_ms:
        limits.append(f"moves {traffic / 1e6:.3g} MB from memory (reuse beyond the cache is refetched)")
    return RooflineEstimate(flops, traffic, compute_ms, memory_ms, lanes_used, cores_used, tuple(limits))


class RooflineCostModel:
    """No training: each row's roofline time. ``fit`` keeps the rows (for the interface) and learns
    nothing; the model is ready before the first trial."""

    name = "roofline"
    min_samples = 0

    def __init__(self, *, seed: int = 0, space: Any = None, profile: Any = None, **_: Any) -> None:
        self.seed = int(seed)
        self.machine = RooflineMachine.for_space(space, profile)
        self.n_samples = 0
        self.n_prior = 0

    @property
    def trained(self) -> bool:
        return True

    def fit(self, X: np.ndarray, latency_ms: Any) -> None:
        lat = np.asarray(latency_ms, dtype=np.float64)
        self.n_samples = int(np.sum(np.isfinite(lat) & (lat > 0)))

    def set_prior(self, X: np.ndarray, ms_per_gflop: np.ndarray, *, gflop: float, weight: float) -> None:
        """Nothing to learn from earlier sessions: the roofline is the machine's, not the data's."""

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or (len(X) and X.shape[1] < 2 * N_STORE):
            raise ValueError(
                f"the roofline model reads per-store features (>= {2 * N_STORE} columns); got {X.shape}"
            )
        return np.array([estimate(row, self.machine).predicted_ms for row in X])

    def explain(self, row: np.ndarray) -> RooflineEstimate:
        return estimate(row, self.machine)


class HybridCostModel(CostModel):
    """XGBoost on the roofline's error: rows get the roofline's log prediction as one more feature, and the
    label is log(measured / roofline), so an untrained model (and one far from its data) predicts the
    roofline itself."""

    name = "hybrid"

    def __init__(self, *, seed: int = 0, nthread: int = 1, space: Any = None, profile: Any = None, **kw: Any):
        super().__init__(seed=seed, nthread=nthread, **kw)
        self.roofline = RooflineCostModel(seed=seed, space=space, profile=profile)

    def _with_prior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.asarray(X, dtype=np.float64)
        base = self.roofline.predict(X) if len(X) else np.zeros(0)
        return np.column_stack([X, np.log(base)]) if len(X) else X, base

    @property
    def trained(self) -> bool:
        return True  # the roofline answers until the trees have data

    def fit(self, X: np.ndarray, latency_ms: Any) -> None:
        rows, base = self._with_prior(X)
        lat = np.asarray(latency_ms, dtype=np.float64)
        # learn the factor by which the roofline is wrong: latency / roofline
        super().fit(rows, lat / base if len(base) else lat)

    def set_prior(self, X: np.ndarray, ms_per_gflop: np.ndarray, *, gflop: float, weight: float) -> None:
        """Earlier sessions' rows (other shapes): their measured time per GFLOP back to ms by the FLOPs
        their own features count, then as the factor by which the roofline missed them."""
        rows, base = self._with_prior(X)
        flops = np.array([estimate(r, self.roofline.machine).flops for r in np.asarray(X, dtype=np.float64)])
        ratio = np.asarray(ms_per_gflop, dtype=np.float64) * flops / 1e9 / base if len(base) else np.zeros(0)
        # TrainingRows keeps prior labels per GFLOP and scales own rows by ``gflop``: as ratios, both agree
        super().set_prior(rows, ratio / gflop, gflop=gflop, weight=weight)

    def predict(self, X: np.ndarray) -> np.ndarray:
        rows, base = self._with_prior(X)
        factor = super().predict(rows) if super().trained else None
        return base if factor is None else base * factor

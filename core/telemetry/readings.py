"""What one telemetry sample holds: the decoded GPU and CPU readings, throttle reasons, summaries.

GPU sources return raw NVML values (mW, bytes, a bitmask) that one function,
:func:`gpu_reading_from_raw`, decodes, so a replayed trace takes the same path as the real device.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

NO_GPU = "no NVIDIA GPU: recording the CPU only"

# NVML clock event ("throttle") reason bits, nvml.h nvmlClocksEventReason*.
THROTTLE_REASON_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "idle"),
    (0x002, "app_clocks"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
# Reasons that mean a kernel ran slower than it could have. Idle, application clocks set by the
# admin, sync boost and display clocks are states, not slowdowns of the running kernel.
LIMITING_REASONS = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "board_limit",
        "reliability",
    }
)
_REASON_ORDER = {name: i for i, (_, name) in enumerate(THROTTLE_REASON_BITS)}
_KNOWN_REASON_BITS = sum(bit for bit, _ in THROTTLE_REASON_BITS)


def throttle_reason_names(mask: int) -> tuple[str, ...]:
    """The names of the bits set in an NVML clock event reason mask (unknown bits as ``0x...``)."""
    names = [name for bit, name in THROTTLE_REASON_BITS if mask & bit]
    rest = mask & ~_KNOWN_REASON_BITS
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return tuple(names)


# ------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class TelemetrySample:
    """One reading of the machine. GPU fields are None without a GPU (or when a reading failed)."""

    t: float  # unix time of the reading
    gpu_temp_c: float | None = None
    gpu_power_w: float | None = None
    gpu_power_limit_w: float | None = None  # the enforced limit
    gpu_sm_clock_mhz: float | None = None
    gpu_mem_clock_mhz: float | None = None
    gpu_util_pct: float | None = None
    gpu_mem_util_pct: float | None = None
    gpu_mem_used_mib: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    other_gpu_procs: int | None = None  # compute processes on the GPU outside our process tree
    other_gpu_pids: tuple[int, ...] = ()
    cpu_load_per_core: tuple[float, ...] = ()  # percent, one per logical CPU
    cpu_load_mean: float | None = None
    cpu_freq_mhz: float | None = None
    cpu_temp_c: float | None = None  # hottest CPU sensor, where the OS reports one
    other_busy_procs: int = 0  # processes outside our tree using more than the busy threshold
    other_busy_pids: tuple[int, ...] = ()  # busiest first (busy_reason names the first three)

    @property
    def throttled(self) -> bool:
        return not LIMITING_REASONS.isdisjoint(self.throttle_reasons)

    @property
    def has_gpu(self) -> bool:
        return any(getattr(self, name) is not None for name in GPU_FIELDS)


GPU_FIELDS = (
    "gpu_temp_c",
    "gpu_power_w",
    "gpu_power_limit_w",
    "gpu_sm_clock_mhz",
    "gpu_mem_clock_mhz",
    "gpu_util_pct",
    "gpu_mem_util_pct",
    "gpu_mem_used_mib",
)
CPU_FIELDS = ("cpu_load_mean", "cpu_freq_mhz", "cpu_temp_c")
NUMERIC_FIELDS = GPU_FIELDS + CPU_FIELDS
SAMPLE_FIELDS = tuple(f.name for f in fields(TelemetrySample))


@dataclass(frozen=True)
class GpuReading:
    """One GPU reading in tunelab's units; a field is None when NVML could not give it."""

    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_mib: float | None = None
    throttle_mask: int | None = None
    compute_pids: tuple[int, ...] | None = None  # every compute process on the GPU, ours included


@dataclass(frozen=True)
class CpuReading:
    load_per_core: tuple[float, ...] = ()
    freq_mhz: float | None = None
    temp_c: float | None = None
    own_pids: frozenset[int] = frozenset()  # this process and its descendants (build/run workers)
    busy_pids: tuple[int, ...] = ()  # busy processes outside own_pids, busiest first


def _num(raw: Mapping[str, Any], key: str, per_unit: int = 1) -> float | None:
    value = raw.get(key)
    return None if value is None else float(value) / per_unit


def gpu_reading_from_raw(raw: Mapping[str, Any]) -> GpuReading:
    """Decode one raw NVML reading (NVML's units: mW, bytes, a reason bitmask; absent keys unknown).

    Keys: temp_c, power_mw, power_limit_mw, sm_clock_mhz, mem_clock_mhz, gpu_util_pct, mem_util_pct,
    mem_used_bytes, throttle_mask, compute_pids. This is the format of a recorded trace line too.
    """
    pids = raw.get("compute_pids")
    mask = raw.get("throttle_mask")
    return GpuReading(
        temp_c=_num(raw, "temp_c"),
        power_w=_num(raw, "power_mw", 1000),
        power_limit_w=_num(raw, "power_limit_mw", 1000),
        sm_clock_mhz=_num(raw, "sm_clock_mhz"),
        mem_clock_mhz=_num(raw, "mem_clock_mhz"),
        util_pct=_num(raw, "gpu_util_pct"),
        mem_util_pct=_num(raw, "mem_util_pct"),
        mem_used_mib=_num(raw, "mem_used_bytes", 1 << 20),
        throttle_mask=None if mask is None else int(mask),
        compute_pids=None if pids is None else tuple(int(p) for p in pids),
    )


# ------------------------------------------------------------------------------------------- sources


class GpuSource(Protocol):
    available: bool
    status: str
    errors: int

    def read(self) -> GpuReading | None: ...

    def close(self) -> None: ...


class CpuSource(Protocol):
    errors: int

    def read(self) -> CpuReading: ...

    def close(self) -> None: ...


def summarize(samples: Sequence[TelemetrySample]) -> dict[str, Any]:
    """What the hardware did over a window: the stamp each trial gets (JSON-ready, plain types).

    ``{"n", "t0", "t1", "gpu"}``; for each numeric field (:data:`NUMERIC_FIELDS`) ``{"min", "max",
    "mean"}`` or None when no sample had it; ``cpu_load_core_max`` (the busiest core); the union of
    ``throttle_reasons`` (NVML bit order), ``throttled`` (a limiting reason was seen) and
    ``throttled_fraction``; ``other_gpu_procs_max`` (None without GPU process data),
    ``other_busy_procs_max`` and the union of the other pids.
    """
    out: dict[str, Any] = {
        "n": len(samples),
        "t0": samples[0].t if samples else None,
        "t1": samples[-1].t if samples else None,
        "gpu": any(s.has_gpu for s in samples),
    }
    for name in NUMERIC_FIELDS:
        values = [v for s in samples if (v := getattr(s, name)) is not None]
        out[name] = (
            {"min": min(values), "max": max(values), "mean": round(statistics.fmean(values), 3)}
            if values
            else None
        )
    core_loads = [v for s in samples for v in s.cpu_load_per_core]
    out["cpu_load_core_max"] = max(core_loads) if core_loads else None
    reasons = {r for s in samples for r in s.throttle_reasons}
    out["throttle_reasons"] = sorted(reasons, key=lambda r: (_REASON_ORDER.get(r, len(_REASON_ORDER)), r))
    n_throttled = sum(1 for s in samples if s.throttled)
    out["throttled"] = n_throttled > 0
    out["throttled_fraction"] = round(n_throttled / len(samples), 3) if samples else 0.0
    gpu_procs = [s.other_gpu_procs for s in samples if s.other_gpu_procs is not None]
    out["other_gpu_procs_max"] = max(gpu_procs) if gpu_procs else None
    out["other_gpu_pids"] = sorted({p for s in samples for p in s.other_gpu_pids})
    out["other_busy_procs_max"] = max((s.other_busy_procs for s in samples), default=0)
    out["other_busy_pids"] = sorted({p for s in samples for p in s.other_busy_pids})
    return out

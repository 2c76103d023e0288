"""GPU readings: NVML on a real NVIDIA GPU, a recorded NVML trace replayed where there is none.

:func:`record_nvml_trace` records such a trace on a GPU machine; :func:`default_gpu_source` picks the
source for this machine (a replay when TUNELAB_NVML_REPLAY names a trace).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunelab.core.telemetry.readings import NO_GPU, GpuReading, GpuSource, gpu_reading_from_raw


class NvmlSource:
    """One NVIDIA GPU through NVML (nvidia-ml-py). Never raises: without a GPU, ``available`` is False.

    ``index`` is NVML's device index (PCI bus order; CUDA's default order may differ). A field NVML does
    not support on this device is left out from then on; any other failed query is counted in
    ``errors`` and that field is None for that reading. Compute processes are listed at most every
    ``process_scan_s`` (the query is slower than the others).

    Inside a container NVML reports host pids, which never match ours: there every compute process
    counts as "other".
    """

    def __init__(self, index: int = 0, *, process_scan_s: float = 1.0) -> None:
        self.index = index
        self.process_scan_s = process_scan_s
        self.available = False
        self.status = NO_GPU
        self.name: str | None = None
        self.errors = 0
        self.last_error: str | None = None
        self._nvml: Any = None
        self._handle: Any = None
        self._unsupported: set[str] = set()
        self._pids: list[int] | None = None
        self._pids_at = -math.inf
        try:
            import pynvml
        except ImportError:
            self.status = f"{NO_GPU} (nvidia-ml-py is not installed)"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError: no library, no driver; anything else: still no GPU
            self.status = f"{NO_GPU} (NVML: {exc})"
            return
        try:
            count = pynvml.nvmlDeviceGetCount()
            if index >= count:
                raise LookupError(f"NVML sees {count} GPU(s), none with index {index}")
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(self._handle)
            self.name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:  # noqa: BLE001 - NVMLError or a driver's own: no GPU to read, whatever the kind
            self.status = f"{NO_GPU} ({exc})"
            _quietly(pynvml.nvmlShutdown)
            return
        self._nvml = pynvml
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if reasons is None:  # nvidia-ml-py older than the event reasons API
            reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self._reasons_fn: Callable[..., Any] = reasons
        self.available = True
        self.status = f"{self.name} (GPU {index}, NVML)"

    def _query(self, raw: dict[str, Any], key: str, fn: Callable[..., Any], *args: Any) -> None:
        if key in self._unsupported:
            return
        nv = self._nvml
        try:
            raw[key] = fn(*args)
        except nv.NVMLError as exc:
            if exc.value == nv.NVML_ERROR_NOT_SUPPORTED:
                self._unsupported.add(key)
            elif exc.value == nv.NVML_ERROR_FUNCTION_NOT_FOUND and key == "throttle_mask":
                # A driver older than the clock *event* reasons API (R535): use the older name.
                old = getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
                if old is None or fn is old:
                    self._unsupported.add(key)
                else:
                    self._reasons_fn = old
                    self._query(raw, key, old, *args)
            else:
                self.errors += 1
                self.last_error = f"NVML {key}: {exc}"

    def read_raw(self) -> dict[str, Any]:
        """One reading in NVML's own units (the trace format; see :func:`gpu_reading_from_raw`)."""
        if not self.available:
            return {}
        nv, h = self._nvml, self._handle
        raw: dict[str, Any] = {}
        self._query(raw, "temp_c", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        self._query(raw, "power_mw", nv.nvmlDeviceGetPowerUsage, h)
        self._query(raw, "power_limit_mw", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        self._query(raw, "sm_clock_mhz", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        self._query(raw, "mem_clock_mhz", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
        self._query(raw, "utilization", nv.nvmlDeviceGetUtilizationRates, h)
        util = raw.pop("utilization", None)
        if util is not None:
            raw["gpu_util_pct"], raw["mem_util_pct"] = util.gpu, util.memory
        self._query(raw, "memory", nv.nvmlDeviceGetMemoryInfo, h)
        memory = raw.pop("memory", None)
        if memory is not None:
            raw["mem_used_bytes"] = memory.used
        self._query(raw, "throttle_mask", self._reasons_fn, h)
        now = time.monotonic()
        if now - self._pids_at >= self.process_scan_s:
            self._pids_at = now
            self._pids = None
            self._query(raw, "processes", nv.nvmlDeviceGetComputeRunningProcesses, h)
            procs = raw.pop("processes", None)
            if procs is not None:
                self._pids = sorted({int(p.pid) for p in procs})
        if self._pids is not None:
            raw["compute_pids"] = list(self._pids)
        return raw

    def read(self) -> GpuReading | None:
        return gpu_reading_from_raw(self.read_raw()) if self.available else None

    def close(self) -> None:
        if self.available:
            self.available = False
            _quietly(self._nvml.nvmlShutdown)


class ReplaySource:
    """Replays a recorded NVML trace (JSON lines) as if it were the GPU: one line per :meth:`read`.

    The first line may be a header ``{"meta": {...}}``; its ``own_pid`` (the recording process) is
    replayed as this process's pid, so the recorder's own GPU context counts as ours, not as another
    process. Every other line is a raw reading (see :func:`gpu_reading_from_raw`; ``dt`` is ignored).
    At the end the trace starts again (``loop=True``) or its last line repeats.
    """

    def __init__(self, path: str | os.PathLike[str], *, loop: bool = True) -> None:
        self.path = Path(path)
        self.loop = loop
        self.errors = 0
        self.meta: dict[str, Any] = {}
        self.records: list[dict[str, Any]] = []
        with self.path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{self.path}:{n}: not a JSON line ({exc})") from exc
                if "meta" in obj:
                    self.meta = dict(obj["meta"])
                else:
                    self.records.append(obj)
        if not self.records:
            raise ValueError(f"{self.path} holds no NVML readings")
        self._own_pid = self.meta.get("own_pid")
        self._next = 0
        self.available = True
        device = self.meta.get("device", "a recorded GPU")
        synthetic = ", synthetic" if self.meta.get("synthetic") else ""
        self.status = f"{device} (replayed from {self.path.name}{synthetic})"

    def __len__(self) -> int:
        return len(self.records)

    def read_raw(self) -> dict[str, Any]:
        if self._next >= len(self.records):
            self._next = 0 if self.loop else len(self.records) - 1
        raw = dict(self.records[self._next])
        self._next += 1
        pids = raw.get("compute_pids")
        if pids is not None and self._own_pid is not None:
            raw["compute_pids"] = [os.getpid() if p == self._own_pid else p for p in pids]
        return raw

    def read(self) -> GpuReading | None:
        return gpu_reading_from_raw(self.read_raw())

    def close(self) -> None:
        pass


class _NoGpu:
    available = False
    errors = 0

    def __init__(self, status: str) -> None:
        self.status = status

    def read(self) -> GpuReading | None:
        return None

    def close(self) -> None:
        pass


REPLAY_ENV = "TUNELAB_NVML_REPLAY"


def default_gpu_source() -> GpuSource:
    """NVML's GPU 0, or the trace named by ``$TUNELAB_NVML_REPLAY`` (for demos on machines without one)."""
    replay = os.environ.get(REPLAY_ENV)
    if replay:
        try:
            return ReplaySource(replay)
        except (OSError, ValueError) as exc:
            return _NoGpu(f"{NO_GPU} (cannot replay {replay}: {exc})")
    return NvmlSource()


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - shutting down; nothing useful to do with the error
        pass


def record_nvml_trace(
    path: str | os.PathLike[str], seconds: float = 30.0, interval_s: float = 0.1, index: int = 0
) -> int:
    """Record GPU ``index`` through NVML into a trace :class:`ReplaySource` replays; return the count.

    Run a kernel burst meanwhile (e.g. a tuning session in another terminal) to record something
    worth replaying.
    """
    source = NvmlSource(index, process_scan_s=0.0)
    if not source.available:
        raise RuntimeError(source.status)
    n = 0
    try:
        with Path(path).open("w", encoding="utf-8") as fh:
            meta = {
                "device": source.name,
                "interval_s": interval_s,
                "own_pid": os.getpid(),
                "recorded_at": time.time(),
                "synthetic": False,
            }
            fh.write(json.dumps({"meta": meta}) + "\n")
            start = next_at = time.monotonic()
            while (now := time.monotonic()) - start < seconds:
                raw = source.read_raw()
                fh.write(json.dumps({"dt": round(now - start, 4), **raw}, separators=(",", ":")) + "\n")
                n += 1
                next_at += interval_s
                time.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        source.close()
    return n

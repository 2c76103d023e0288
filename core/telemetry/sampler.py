"""Hardware telemetry: what the GPU and the CPU did while each trial ran.

A :class:`TelemetrySampler` runs one background thread that takes a :class:`TelemetrySample` every
``interval_s`` (100 ms): the GPU through NVML (temperature, power and its limit, SM and memory clocks,
utilization, memory used, clock throttle reasons, other processes on the GPU) and the CPU through
psutil (load per core, frequency, temperature, other busy processes). Samples go into a bounded ring
buffer that the session reads to stamp each trial (:meth:`TelemetrySampler.summary_between`), and
about once a second a batch goes to an optional ``sink``.

Without an NVIDIA GPU (no NVML library, no driver, no device) the sampler records the CPU alone and
says so in :attr:`TelemetrySampler.gpu_status`. Sampling never raises into its caller: a failed
reading is counted (:attr:`TelemetrySampler.errors`) and sampling goes on.

SQLite and threads: a Store's connection belongs to the thread that opened it, so the sink must never
use the session's Store. :meth:`TelemetrySampler.to_store` gives a sampler whose sink
(:class:`StoreSink`) opens its *own* Store lazily, in the sampler thread, writes each batch in one short
transaction (WAL + busy timeout make that safe beside the session's writes) and closes it in that same
thread when the sampler stops.

Sources are pluggable: :class:`NvmlSource` (a real GPU), :class:`ReplaySource` (a recorded NVML trace,
for machines without a GPU) and :class:`PsutilSource` (the CPU). GPU sources return raw NVML values
(mW, bytes, a bitmask) that one function, :func:`gpu_reading_from_raw`, decodes, so a replay takes the
same decoding path as the real device. :func:`record_nvml_trace` records such a trace on a GPU machine.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
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
    other_busy_pids: tuple[int, ...] = ()

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
    busy_pids: tuple[int, ...] = ()  # busy processes outside own_pids


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
        except Exception as exc:  # NVMLError: no library, no driver; anything else: still no GPU
            self.status = f"{NO_GPU} (NVML: {exc})"
            return
        try:
            count = pynvml.nvmlDeviceGetCount()
            if index >= count:
                raise LookupError(f"NVML sees {count} GPU(s), none with index {index}")
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(self._handle)
            self.name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:
            self.status = f"{NO_GPU} ({exc})"
            _quietly(pynvml.nvmlShutdown)
            return
        self._nvml = pynvml
        self._reasons_fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if self._reasons_fn is None:  # nvidia-ml-py older than the event reasons API
            self._reasons_fn = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
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


class PsutilSource:
    """The CPU through psutil: load per core and frequency at every reading; temperature and the
    process scan (who else is busy, which pids are ours) at most every ``process_scan_s``.

    Loads come from this source's own ``cpu_times`` deltas, so other code calling
    ``psutil.cpu_percent()`` does not disturb them. A process is busy above ``busy_pct`` percent of
    one core; a process needs two scans before its load is known.
    """

    def __init__(
        self, *, process_scan_s: float = 1.0, busy_pct: float = 20.0, root_pid: int | None = None
    ) -> None:
        import psutil

        self._psutil = psutil
        self.process_scan_s = process_scan_s
        self.busy_pct = busy_pct
        self.root_pid = os.getpid() if root_pid is None else root_pid
        self.errors = 0
        self.last_error: str | None = None
        self._prev_times = self._guard(lambda: psutil.cpu_times(percpu=True), None)
        self._procs: dict[int, Any] = {}
        self._scan_at = -math.inf
        self._own: frozenset[int] = frozenset({self.root_pid})
        self._busy: tuple[int, ...] = ()
        self._temp: float | None = None

    def _guard(self, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return fn()
        except Exception as exc:
            self.errors += 1
            self.last_error = f"psutil: {type(exc).__name__}: {exc}"
            return default

    def read(self) -> CpuReading:
        now = time.monotonic()
        if now - self._scan_at >= self.process_scan_s:
            self._scan_at = now
            self._temp = self._guard(self._read_temp, None)
            self._guard(self._scan_processes, None)
        times = self._guard(lambda: self._psutil.cpu_times(percpu=True), None)
        loads: tuple[float, ...] = ()
        if times is not None and self._prev_times is not None and len(times) == len(self._prev_times):
            loads = tuple(_busy_pct(a, b) for a, b in zip(self._prev_times, times, strict=True))
        if times is not None:
            self._prev_times = times
        return CpuReading(
            load_per_core=loads,
            freq_mhz=self._guard(self._read_freq, None),
            temp_c=self._temp,
            own_pids=self._own,
            busy_pids=self._busy,
        )

    def _read_freq(self) -> float | None:
        cpu_freq = getattr(self._psutil, "cpu_freq", None)
        freq = cpu_freq() if cpu_freq is not None else None
        return float(freq.current) if freq is not None and freq.current else None

    def _read_temp(self) -> float | None:
        sensors = getattr(self._psutil, "sensors_temperatures", None)
        if sensors is None:  # macOS, Windows
            return None
        chips = sensors()
        # Prefer the CPU's own sensors; a disk or Wi-Fi sensor is not the CPU.
        cpu_chips = [v for k, v in chips.items() if k in _CPU_SENSOR_CHIPS] or list(chips.values())
        temps = [s.current for chip in cpu_chips for s in chip if s.current is not None and s.current > 0]
        return float(max(temps)) if temps else None

    def _scan_processes(self) -> None:
        psutil = self._psutil
        alive = set(psutil.pids())
        for pid in list(self._procs):
            if pid not in alive:
                del self._procs[pid]
        parent: dict[int, int] = {}
        load: dict[int, float] = {}
        for pid in alive:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                with proc.oneshot():
                    parent[pid] = proc.ppid()
                    load[pid] = proc.cpu_percent(None)  # since the previous scan; 0.0 on the first
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                self._procs.pop(pid, None)
        children: dict[int, list[int]] = {}
        for pid, ppid in parent.items():
            children.setdefault(ppid, []).append(pid)
        own = {self.root_pid}
        todo = [self.root_pid]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in own:
                    own.add(child)
                    todo.append(child)
        self._own = frozenset(own)
        self._busy = tuple(sorted(p for p, pct in load.items() if pct > self.busy_pct and p not in own))

    def close(self) -> None:
        self._procs.clear()


_CPU_SENSOR_CHIPS = frozenset(
    {"coretemp", "k10temp", "zenpower", "cpu_thermal", "cpu-thermal", "soc_thermal", "acpitz"}
)


def _busy_pct(before: Any, after: Any) -> float:
    """Percent busy between two ``cpu_times`` of one CPU (psutil's formula: idle + iowait is idle)."""

    def total(t: Any) -> float:
        # guest time is already counted in user time on Linux
        return sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

    def idle(t: Any) -> float:
        return t.idle + getattr(t, "iowait", 0.0)

    all_delta = total(after) - total(before)
    if all_delta <= 0:
        return 0.0
    busy = (all_delta - (idle(after) - idle(before))) / all_delta * 100.0
    return round(min(100.0, max(0.0, busy)), 1)


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


# ------------------------------------------------------------------------------------------- sampler

Sink = Callable[[list[TelemetrySample]], None]


class TelemetrySampler:
    """Samples the machine every ``interval_s`` on its own thread; see the module docstring.

    ``source`` is the GPU source (default: :func:`default_gpu_source`), ``cpu_source`` the CPU one
    (default: :class:`PsutilSource`). The last ``buffer_size`` samples stay in memory (6000: ten
    minutes at 100 ms). With a ``sink``, the samples taken since the previous batch are handed to it
    from the sampler thread about every ``flush_interval_s`` and once more at :meth:`stop`; a batch the
    sink fails on is kept and offered again with the next one (up to ``buffer_size`` samples).

    A sampler runs once: :meth:`start`, then :meth:`stop` (or use it as a context manager). Its reading
    methods may be called from any thread.
    """

    def __init__(
        self,
        source: GpuSource | None = None,
        interval_s: float = 0.1,
        sink: Sink | None = None,
        *,
        cpu_source: CpuSource | None = None,
        buffer_size: int = 6000,
        flush_interval_s: float = 1.0,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self.flush_interval_s = flush_interval_s
        self.buffer_size = buffer_size
        self._gpu: GpuSource = source if source is not None else default_gpu_source()
        self._cpu: CpuSource = cpu_source if cpu_source is not None else PsutilSource()
        self._sink = sink
        self._buffer: deque[TelemetrySample] = deque(maxlen=buffer_size)
        self._pending: list[TelemetrySample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._errors = 0
        self.last_error: str | None = None

    @classmethod
    def to_store(cls, db_path: str | os.PathLike[str], session_id: int, **kwargs: Any) -> TelemetrySampler:
        """A sampler whose batches go to ``session_id``'s telemetry in the database at ``db_path``,
        written through a Store the sampler thread opens and closes itself (:class:`StoreSink`)."""
        return cls(sink=StoreSink(db_path, session_id), **kwargs)

    # ------------------------------------------------------------------------------- state

    @property
    def gpu_available(self) -> bool:
        return bool(self._gpu.available)

    @property
    def gpu_status(self) -> str:
        return self._gpu.status

    @property
    def errors(self) -> int:
        """Failed readings and sink writes so far (sampling went on after each)."""
        return self._errors + int(getattr(self._gpu, "errors", 0)) + int(getattr(self._cpu, "errors", 0))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------------------- lifecycle

    def start(self) -> TelemetrySampler:
        if self._thread is not None or self._stopped:
            raise RuntimeError("a TelemetrySampler can be started once")
        self._thread = threading.Thread(target=self._run, name="tunelab-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop sampling, hand the last batch to the sink and close the sources. Idempotent.

        Waits up to ``timeout`` seconds for the thread (a sink write may wait on a busy database).
        """
        self._stopped = True
        self._stop.set()
        thread = self._thread
        if thread is None:  # never started: samples taken by hand still reach the sink
            self._flush()
            self._close_sink()
            self._close_sources()
        elif thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        next_at = last_flush = time.monotonic()
        try:
            while not self._stop.is_set():
                self.sample_once()
                now = time.monotonic()
                if self._sink is not None and now - last_flush >= self.flush_interval_s:
                    self._flush()
                    last_flush = now = time.monotonic()
                next_at += self.interval_s
                if next_at <= now:  # fell behind (slow sink, suspended machine): skip the missed ticks
                    next_at = now + self.interval_s
                self._stop.wait(next_at - now)
        except Exception as exc:  # a bug here must not go unseen, but it must not reach the session
            self._count_error(exc)
        finally:
            self._flush()
            self._close_sink()  # in this thread: a StoreSink's connection belongs to it
            self._close_sources()

    def _close_sink(self) -> None:
        close = getattr(self._sink, "close", None)
        if close is not None:
            try:
                close()
            except Exception as exc:
                self._count_error(exc)

    def _close_sources(self) -> None:
        _quietly(self._gpu.close)
        _quietly(self._cpu.close)

    def _count_error(self, exc: BaseException) -> None:
        self._errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"

    # ------------------------------------------------------------------------------- sampling

    def sample_once(self) -> TelemetrySample:
        """Take one sample now, keep it, and return it. Never raises.

        The sampler thread calls this; call it yourself only on a sampler that is not started.
        """
        t = time.time()
        cpu: CpuReading | None = None
        gpu: GpuReading | None = None
        try:
            cpu = self._cpu.read()
        except Exception as exc:
            self._count_error(exc)
        if self._gpu.available:
            try:
                gpu = self._gpu.read()
            except Exception as exc:
                self._count_error(exc)
        sample = _compose(t, cpu, gpu)
        with self._lock:
            self._buffer.append(sample)
            if self._sink is not None:
                self._pending.append(sample)
        return sample

    def _flush(self) -> None:
        if self._sink is None:
            return
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            self._sink(batch)
        except Exception as exc:
            self._count_error(exc)
            with self._lock:
                self._pending = (batch + self._pending)[-self.buffer_size :]

    # ------------------------------------------------------------------------------- reading

    def latest(self) -> TelemetrySample | None:
        with self._lock:
            return self._buffer[-1] if self._buffer else None

    def samples(self) -> list[TelemetrySample]:
        """Every sample still in the ring buffer, oldest first."""
        with self._lock:
            return list(self._buffer)

    def samples_between(self, t0: float, t1: float) -> list[TelemetrySample]:
        """The buffered samples with ``t0 <= t <= t1`` (unix times), oldest first."""
        out: list[TelemetrySample] = []
        with self._lock:
            for sample in reversed(self._buffer):  # a trial is recent: walk back only over its window
                if sample.t < t0:
                    break
                if sample.t <= t1:
                    out.append(sample)
        out.reverse()
        return out

    def summary_between(self, t0: float, t1: float) -> dict[str, Any]:
        """:func:`summarize` of the samples in ``[t0, t1]``; for a window shorter than one interval
        (no sample inside it), the last sample before ``t1`` describes it."""
        window = self.samples_between(t0, t1)
        if not window:
            with self._lock:
                before = [s for s in reversed(self._buffer) if s.t <= t1][:1]
            # A sample older than that was taken before the window by more than the sampler's
            # period: the sampler was not running then, so it says nothing about the window.
            window = [s for s in before if s.t >= t0 - 2 * self.interval_s]
        return summarize(window)


def _compose(t: float, cpu: CpuReading | None, gpu: GpuReading | None) -> TelemetrySample:
    own = cpu.own_pids if cpu is not None else frozenset({os.getpid()})
    values: dict[str, Any] = {"t": t}
    if gpu is not None:
        values.update(
            gpu_temp_c=gpu.temp_c,
            gpu_power_w=gpu.power_w,
            gpu_power_limit_w=gpu.power_limit_w,
            gpu_sm_clock_mhz=gpu.sm_clock_mhz,
            gpu_mem_clock_mhz=gpu.mem_clock_mhz,
            gpu_util_pct=gpu.util_pct,
            gpu_mem_util_pct=gpu.mem_util_pct,
            gpu_mem_used_mib=gpu.mem_used_mib,
        )
        if gpu.throttle_mask is not None:
            values["throttle_reasons"] = throttle_reason_names(gpu.throttle_mask)
        if gpu.compute_pids is not None:
            others = tuple(sorted(p for p in gpu.compute_pids if p not in own))
            values.update(other_gpu_procs=len(others), other_gpu_pids=others)
    if cpu is not None:
        values.update(
            cpu_load_per_core=cpu.load_per_core,
            cpu_load_mean=round(statistics.fmean(cpu.load_per_core), 2) if cpu.load_per_core else None,
            cpu_freq_mhz=cpu.freq_mhz,
            cpu_temp_c=cpu.temp_c,
            other_busy_procs=len(cpu.busy_pids),
            other_busy_pids=cpu.busy_pids,
        )
    return TelemetrySample(**values)


# ------------------------------------------------------------------------------------------- summary


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


# ------------------------------------------------------------------------------------------- sinks


class StoreSink:
    """Writes telemetry batches to one session through a Store of its own.

    The Store is opened on first use, i.e. in the thread that calls the sink (the sampler's), and
    :meth:`close` must be called from that same thread (the sampler does both). It never touches the
    session's Store, whose connection belongs to another thread.
    """

    def __init__(self, db_path: str | os.PathLike[str], session_id: int) -> None:
        self.db_path = Path(db_path)
        self.session_id = session_id
        self._store: Any = None

    def __call__(self, samples: list[TelemetrySample]) -> None:
        if self._store is None:
            from tunelab.core.store.database import (
                Store,  # here, not at the top: tunelab.core.store.database imports this module
            )

            self._store = Store(self.db_path, create=False)
        self._store.add_telemetry(self.session_id, samples)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


# ------------------------------------------------------------------------------------------- recording


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

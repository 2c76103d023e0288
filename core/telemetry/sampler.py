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
use the session's Store. ``TelemetrySampler(sink=StoreSink(db, session_id))`` (tunelab.core.store.telemetry_sink)
gives a sampler whose sink opens its *own* Store lazily, in the sampler thread, writes each batch in one short
transaction (WAL + busy timeout make that safe beside the session's writes) and closes it in that same
thread when the sampler stops.

Sources are pluggable: :class:`NvmlSource` (a real GPU), :class:`ReplaySource` (a recorded NVML trace,
for machines without a GPU) and :class:`PsutilSource` (the CPU). GPU sources return raw NVML values
(mW, bytes, a bitmask) that one function, :func:`gpu_reading_from_raw`, decodes, so a replay takes the
same decoding path as the real device. :func:`record_nvml_trace` records such a trace on a GPU machine.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tunelab.core.telemetry.cpu import PsutilSource
from tunelab.core.telemetry.nvml import _quietly, default_gpu_source
from tunelab.core.telemetry.readings import (
    CpuReading,
    CpuSource,
    GpuReading,
    GpuSource,
    TelemetrySample,
    summarize,
    throttle_reason_names,
)

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
        except Exception as exc:  # noqa: BLE001 - a bug here must not go unseen, but it must not reach the session
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
            except Exception as exc:  # noqa: BLE001 - a source's close failing must not stop the sampler's own
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
        except Exception as exc:  # noqa: BLE001 - telemetry counts a failed read, never passes it on to the session
            self._count_error(exc)
        if self._gpu.available:
            try:
                gpu = self._gpu.read()
            except Exception as exc:  # noqa: BLE001 - telemetry counts a failed read, never passes it on to the session
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
        except Exception as exc:  # noqa: BLE001 - a store that fails to write keeps the batch for the next flush
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

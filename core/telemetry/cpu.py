"""CPU readings through psutil: load per core, frequency, temperature, other busy processes."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from tunelab.core.telemetry.readings import CpuReading

# The pid of the tunelab process that started this one (the desktop app, which runs each session as a
# `tunelab tune` child): its whole tree is tunelab's own, never a busy neighbour. Set by the parent.
ROOT_PID_ENV = "TUNELAB_ROOT_PID"


def session_root_pid() -> int:
    """The root of the process tree that counts as ours: the tunelab ancestor named by
    :data:`ROOT_PID_ENV` (so the app drawing the session, its other children and their workers are
    not flagged as busy neighbours of its tuner child), else this process. A value that is not an
    ancestor of this process (a stale variable inherited by an unrelated program) is ignored."""
    me = os.getpid()
    text = os.environ.get(ROOT_PID_ENV, "")
    if not text.isdigit() or int(text) == me:
        return me
    try:
        import psutil

        ancestors = {p.pid for p in psutil.Process(me).parents()}
    except Exception:  # noqa: BLE001 - unknowable: only this process's own tree is ours
        return me
    return int(text) if int(text) in ancestors else me


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
        self.root_pid = session_root_pid() if root_pid is None else root_pid
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
        except Exception as exc:  # noqa: BLE001 - psutil's errors vary by platform; telemetry counts them, never fails
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
        # This process's own tree counts too: a session left running when the app closed is re-parented
        # away from the app (its root_pid), and must not call itself and its workers neighbours.
        own = {self.root_pid, os.getpid()}
        todo = [self.root_pid, os.getpid()]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in own:
                    own.add(child)
                    todo.append(child)
        self._own = frozenset(own)
        self._busy = busiest_first(load, own, self.busy_pct)

    def close(self) -> None:
        self._procs.clear()


def busiest_first(load: dict[int, float], own: set[int] | frozenset[int], busy_pct: float) -> tuple[int, ...]:
    """The pids of ``load`` (pid -> % of one core) above ``busy_pct`` and not ``own``, busiest first: a
    warning names the first few, and by pid it named the oldest busy processes, not the ones slowing the
    measurement most (a neighbour started last was never named beside three older busy ones)."""
    busy = [p for p, pct in load.items() if pct > busy_pct and p not in own]
    return tuple(sorted(busy, key=lambda p: (-load[p], p)))


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

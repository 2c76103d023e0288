"""How busy other processes kept this machine over an interval: the part of a one-off measurement
(a vendor baseline, a probe) that is not a tuning session with its own sampler.

A figure timed while neighbours used the cores is not this machine's figure: NumPy's GEMM timed at
54.72 ms beside other work ran in 0.066 ms alone. The reading is each other process's CPU time over
the interval (psutil), so it names who was busy and how much of the machine they took.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

BUSY_PCT = 20.0  # a process busier than this (percent of one core) over the interval is named
BUSY_SHARE = 0.25  # neighbours that took this share of the machine's cores make a figure doubtful


@dataclass(frozen=True, slots=True)
class NeighbourLoad:
    """Other processes' use of the machine over an interval."""

    share: float  # their CPU time over (wall time x cores): 0 quiet, 1 every core taken
    busy_pids: tuple[int, ...]  # those above BUSY_PCT of one core, busiest first
    names: dict[int, str]

    @property
    def busy(self) -> bool:
        return self.share >= BUSY_SHARE

    def words(self) -> str:
        named = ", ".join(f"pid {p} ({self.names.get(p, '?')})" for p in self.busy_pids[:3])
        return f"other processes took {self.share:.0%} of the cores" + (f" ({named})" if named else "")

    def to_json(self) -> dict[str, Any]:
        # JSON keys are strings: named so here, a stored baseline reads back equal to the one measured
        names = {str(p): n for p, n in self.names.items()}
        return {"share": round(self.share, 3), "busy_pids": list(self.busy_pids), "names": names}


def _own_pids(psutil: Any) -> set[int]:
    me = psutil.Process(os.getpid())
    try:
        return {os.getpid(), *(c.pid for c in me.children(recursive=True))}
    except psutil.Error:
        return {os.getpid()}


def _cpu_seconds(psutil: Any) -> dict[int, tuple[float, str]]:
    seconds: dict[int, tuple[float, str]] = {}
    for proc in psutil.process_iter(["name", "cpu_times"]):
        times = proc.info.get("cpu_times")
        if times is not None:
            seconds[proc.pid] = (float(times.user + times.system), str(proc.info.get("name") or "?"))
    return seconds


class NeighbourWatch:
    """``with NeighbourWatch() as watch: ...`` then ``watch.load``: other processes over the block."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self.load: NeighbourLoad | None = None

    def __enter__(self) -> NeighbourWatch:
        self._before = _cpu_seconds(self._psutil)
        self._start = time.monotonic()
        return self

    def __exit__(self, *_exc: object) -> None:
        wall = max(time.monotonic() - self._start, 1e-6)
        after = _cpu_seconds(self._psutil)
        own = _own_pids(self._psutil)
        used: dict[int, float] = {}
        names: dict[int, str] = {}
        for pid, (seconds, name) in after.items():
            if pid in own or pid not in self._before:  # a process born meanwhile: its start is unknown
                continue
            delta = seconds - self._before[pid][0]
            if delta > 0:
                used[pid], names[pid] = delta, name
        cores = os.cpu_count() or 1
        busy = sorted((p for p, s in used.items() if s / wall * 100 >= BUSY_PCT), key=lambda p: -used[p])
        self.load = NeighbourLoad(
            share=min(1.0, sum(used.values()) / (wall * cores)),
            busy_pids=tuple(busy),
            names={p: names[p] for p in busy},
        )

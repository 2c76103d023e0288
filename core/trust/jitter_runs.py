"""Each fresh process's run as the jitter analysis reads it, and the small helpers its causes share."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tunelab.core.stats import coefficient_of_variation, median
from tunelab.core.trust.jitter_records import MAX_NAMED
from tunelab.core.trust.remeasure.report import Measurement


def med_of(values: Sequence[float]) -> float:
    """The median of values known to be there (a run that gave a timing has samples)."""
    value = median(values)
    assert value is not None
    return value


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r of two series of three or more, None for fewer or a constant one."""
    if len(xs) < 3 or len(xs) != len(ys):
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant series
        return None


def beyond(share: float | None, tolerance: float) -> bool:
    """Whether a cause's share explains the spread: known and above its tolerance."""
    return share is not None and share > tolerance


@dataclass(frozen=True, slots=True)
class Run:
    """One fresh process's measurement of the kernel, in brief."""

    run: int
    pid: int | None
    median_ms: float
    busy: tuple[int, ...]
    names: dict[str, str]
    throttled: bool
    reasons: tuple[str, ...]
    freq: float | None
    reference_ms: float | None
    first_ratio: float | None
    within_cv: float | None
    cold_ms: float | None
    layout_ms: dict[str, float]
    watched: bool  # telemetry covered its window
    again_ms: float | None = None  # a second window of the same process, after its other layouts
    again_after_s: float | None = None  # how long after the first window it began


def runs_of(measurements: Sequence[Measurement]) -> list[Run]:
    out = []
    for m in measurements:
        if not m.ok or not m.samples_ms:
            continue
        samples = list(m.samples_ms)
        rest = samples[1:]
        rest_med = median(rest) if len(samples) >= 3 else None
        w = m.telemetry
        out.append(
            Run(
                run=m.run,
                pid=m.pid,
                median_ms=med_of(samples),
                busy=tuple((w.other_busy_pids + w.other_gpu_pids) if w is not None else ()),
                names=dict(w.names) if w is not None else {},
                throttled=bool(w is not None and w.throttled),
                reasons=tuple(w.throttle_reasons) if w is not None else (),
                freq=w.cpu_freq_mhz if w is not None else None,
                reference_ms=m.reference_ms,
                first_ratio=samples[0] / rest_med if rest_med else None,
                within_cv=coefficient_of_variation(rest) if len(rest) >= 2 else None,
                cold_ms=m.cold_ms,
                layout_ms=dict(m.layout_ms or {}),
                watched=w is not None,
                again_ms=m.again_ms,
                again_after_s=m.again_t0 - m.t0 if m.again_t0 is not None and m.t0 is not None else None,
            )
        )
    return out


def background_pids(runs: list[Run]) -> frozenset[int]:
    """The other processes busy during every watched run: no run tells what the kernel does without them."""
    watched = [set(r.busy) for r in runs if r.watched]
    return frozenset(set.intersection(*watched)) if watched else frozenset()


def who(pids: Sequence[int], names: Mapping[str, str]) -> str:
    text = ", ".join(f"pid {p} ({names.get(str(p), 'exited')})" for p in pids[:MAX_NAMED])
    return text + (f" and {len(pids) - MAX_NAMED} more" if len(pids) > MAX_NAMED else "")


def were(pids: Sequence[int]) -> str:
    return "was" if len(pids) == 1 else "were"

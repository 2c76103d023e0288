"""The jitter report's records (:mod:`tunelab.core.trust.jitter` makes them): each candidate cause with its
share of the spread and the numbers behind it, the spread itself, and the figures the report was
given (the schedule per shape, the cost model's bias per shape). Frozen, one JSON mapping each (by their
fields, tunelab.core.records_json); TVM-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tunelab.core.records_json import JsonRecord
from tunelab.core.trust.remeasure.report import ms_text

CAUSES = ("neighbours", "clocks", "first_run", "placement", "shape", "cost_model")
TITLES = {
    "neighbours": "busy neighbours",
    "clocks": "throttling or clocks",
    "first_run": "first-run cost",
    "placement": "buffer placement",
    "shape": "input shape",
    "cost_model": "cost model",
}
TOLERANCE = 0.05  # a share at most this is no explanation, however quiet the machine
NOISE_FACTOR = 2.0  # ... nor one within this many times the quiet runs' noise (CV of their medians)
SHAPE_TOL = 0.25  # efficiency differing less than this between shapes (the shape check's 1.25x rule)
COST_MODEL_TOL = math.exp(0.3) - 1  # the bias report's flag: typically off by more than 35 %
STEADY_CV = 0.10  # run medians within this CV and nothing beyond its tolerance: the kernel is steady
CORRELATED = 0.5  # |Pearson r| beyond this: a run's time follows the clock / the reference kernel
MAX_NAMED = 4  # other processes named in a sentence


def signed(fraction: float | None) -> str:
    """0.384 -> "+38 %"; -0.02 -> "-2.0 %"; None -> "n/a"."""
    if fraction is None:
        return "n/a"
    return ("+" if fraction >= 0 else "-") + pct(abs(fraction))


def pct(fraction: float | None) -> str:
    """0.384 -> "38 %"; 0.021 -> "2.1 %"; None -> "-"."""
    if fraction is None:
        return "-"
    value = 100 * fraction
    return f"{value:.1f} %" if abs(value) < 10 else f"{value:.0f} %"


# ------------------------------------------------------------------------------------------ records


@dataclass(frozen=True, slots=True)
class ShapeFigure(JsonRecord):
    """The schedule's efficiency on one shape: ``how`` it was measured ("re-measured", "carried over"
    (the best schedule measured on it now), "tuned by the session" (that task's best, as recorded))."""

    shape_text: str
    gflops: float | None
    latency_ms: float | None
    how: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ShapeBias(JsonRecord):
    """The cost model on one shape: ``ratio`` is the typical predicted / measured latency over ``n``
    trials (the bias report's shape group)."""

    shape_text: str
    n: int
    ratio: float | None
    biased: bool = False


@dataclass(frozen=True, slots=True)
class JitterCause(JsonRecord):
    """One candidate cause: the relative spread it explains (``share``; None where it could not be
    measured), whether that is beyond its ``tolerance``, in words, and the numbers behind it."""

    name: str  # one of CAUSES
    share: float | None
    tolerance: float
    explains: bool
    sentence: str
    evidence: dict[str, Any] = field(default_factory=dict)

    # the title too, for a reader of the JSON alone (from_json ignores it: it follows from the name)
    json_properties = {"title": "name"}

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)


@dataclass(frozen=True, slots=True)
class Spread(JsonRecord):
    """The kernel's spread over the fresh processes: their medians (ms) and its summary."""

    runs: int
    run_medians_ms: tuple[float, ...]
    min_ms: float | None
    median_ms: float | None
    max_ms: float | None
    cv: float | None  # of the run medians
    range: float | None  # max / min - 1
    noise: float | None  # the CV of the quiet runs' medians (no other busy process, no throttling)
    quiet_runs: int


@dataclass(frozen=True, slots=True)
class JitterReport(JsonRecord):
    """Which causes explain a kernel's spread (``explaining``: cause names, largest share first), one
    :class:`JitterCause` per candidate (in :data:`CAUSES` order), the spread itself and what was
    measured. ``validation_id``: the stored validation the figures come from (None: not stored)."""

    source: dict[str, Any]  # {"kind": "session", "session_id": 3} | {"kind": "file", "path": ...}
    label: str  # what was measured, in words ("session 3, trial 12: gemm M=64,N=64,K=256")
    headline: str
    explaining: tuple[str, ...]
    spread: Spread
    causes: tuple[JitterCause, ...]
    runs_asked: int
    layouts: tuple[str, ...]
    recorded_layout: str | None
    shapes: tuple[str, ...]
    validation_id: int | None = None

    def cause(self, name: str) -> JitterCause:
        for c in self.causes:
            if c.name == name:
                return c
        raise KeyError(name)


# ------------------------------------------------------------------------------------------ as text


def format_jitter(report: JitterReport) -> str:
    """The report as a few lines for people: the headline, the spread, one line per cause."""
    s = report.spread
    lines = [report.headline]
    if report.label:
        lines.append(f"  measured: {report.label}")
    lines.append(
        f"  spread over {s.runs} of {report.runs_asked} fresh processes: min {ms_text(s.min_ms)}, median "
        f"{ms_text(s.median_ms)}, max {ms_text(s.max_ms)}, CV {pct(s.cv)}; layouts "
        f"{', '.join(report.layouts) or '-'}; shapes {', '.join(report.shapes) or '-'}"
    )
    for c in report.causes:
        mark = "EXPLAINS" if c.explains else "        "
        lines.append(f"  {mark} {c.title:<21s} {signed(c.share):>7s}  {c.sentence}")
    if report.validation_id is not None:
        lines.append(f"  stored as validation {report.validation_id}")
    return "\n".join(lines)

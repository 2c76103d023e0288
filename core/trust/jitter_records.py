"""The jitter report's records (:mod:`tunelab.core.trust.jitter` makes them): each candidate cause with its
share of the spread and the numbers behind it, the spread itself, and the figures the report was
given (the schedule per shape, the cost model's bias per shape). Frozen, one JSON mapping each;
TVM-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
class ShapeFigure:
    """The schedule's efficiency on one shape: ``how`` it was measured ("re-measured", "carried over"
    (the best schedule measured on it now), "tuned by the session" (that task's best, as recorded))."""

    shape_text: str
    gflops: float | None
    latency_ms: float | None
    how: str
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "shape_text": self.shape_text,
            "gflops": self.gflops,
            "latency_ms": self.latency_ms,
            "how": self.how,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShapeFigure:
        return cls(
            shape_text=str(data.get("shape_text", "")),
            gflops=data.get("gflops"),
            latency_ms=data.get("latency_ms"),
            how=str(data.get("how", "")),
            error=data.get("error"),
        )


@dataclass(frozen=True, slots=True)
class ShapeBias:
    """The cost model on one shape: ``ratio`` is the typical predicted / measured latency over ``n``
    trials (the bias report's shape group)."""

    shape_text: str
    n: int
    ratio: float | None
    biased: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"shape_text": self.shape_text, "n": self.n, "ratio": self.ratio, "biased": self.biased}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShapeBias:
        return cls(
            shape_text=str(data.get("shape_text", "")),
            n=int(data.get("n") or 0),
            ratio=data.get("ratio"),
            biased=bool(data.get("biased")),
        )


@dataclass(frozen=True, slots=True)
class JitterCause:
    """One candidate cause: the relative spread it explains (``share``; None where it could not be
    measured), whether that is beyond its ``tolerance``, in words, and the numbers behind it."""

    name: str  # one of CAUSES
    share: float | None
    tolerance: float
    explains: bool
    sentence: str
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "share": self.share,
            "tolerance": self.tolerance,
            "explains": self.explains,
            "sentence": self.sentence,
            "evidence": dict(self.evidence),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JitterCause:
        return cls(
            name=str(data.get("name", "")),
            share=data.get("share"),
            tolerance=float(data.get("tolerance") or 0.0),
            explains=bool(data.get("explains")),
            sentence=str(data.get("sentence", "")),
            evidence=dict(data.get("evidence") or {}),
        )


@dataclass(frozen=True, slots=True)
class Spread:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "run_medians_ms": list(self.run_medians_ms),
            "min_ms": self.min_ms,
            "median_ms": self.median_ms,
            "max_ms": self.max_ms,
            "cv": self.cv,
            "range": self.range,
            "noise": self.noise,
            "quiet_runs": self.quiet_runs,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Spread:
        return cls(
            runs=int(data.get("runs") or 0),
            run_medians_ms=tuple(data.get("run_medians_ms") or ()),
            min_ms=data.get("min_ms"),
            median_ms=data.get("median_ms"),
            max_ms=data.get("max_ms"),
            cv=data.get("cv"),
            range=data.get("range"),
            noise=data.get("noise"),
            quiet_runs=int(data.get("quiet_runs") or 0),
        )


@dataclass(frozen=True, slots=True)
class JitterReport:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "source": dict(self.source),
            "label": self.label,
            "headline": self.headline,
            "explaining": list(self.explaining),
            "spread": self.spread.to_json(),
            "causes": [c.to_json() for c in self.causes],
            "runs_asked": self.runs_asked,
            "layouts": list(self.layouts),
            "recorded_layout": self.recorded_layout,
            "shapes": list(self.shapes),
            "validation_id": self.validation_id,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JitterReport:
        return cls(
            source=dict(data.get("source") or {}),
            label=str(data.get("label", "")),
            headline=str(data.get("headline", "")),
            explaining=tuple(data.get("explaining") or ()),
            spread=Spread.from_json(data.get("spread") or {}),
            causes=tuple(JitterCause.from_json(c) for c in data.get("causes") or ()),
            runs_asked=int(data.get("runs_asked") or 0),
            layouts=tuple(data.get("layouts") or ()),
            recorded_layout=data.get("recorded_layout"),
            shapes=tuple(data.get("shapes") or ()),
            validation_id=data.get("validation_id"),
        )


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

"""A validation's report as frozen records, their one JSON mapping each, and the report as text.

:class:`ValidationReport` holds a :class:`ScheduleResult` per re-measured schedule (each with a
:class:`Measurement` per fresh-process run and its :class:`TelemetryWindow`), the :class:`Ranking` and
the per-shape rows. ``to_json()`` gives the document ``tunelab validate --json`` prints and the store
keeps (:meth:`tunelab.core.store.Store.add_validation`); ``from_json()`` reads it back, also
from older versions (a missing key takes its default). TVM-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunelab.core.records import MeasureOptions
from tunelab.core.records_json import JsonRecord
from tunelab.core.trust.remeasure.run_records import Measurement, RecordedTelemetry, TelemetryWindow
from tunelab.core.trust.remeasure.schedule_result import DRIFT_TOL, VERDICTS, ScheduleResult, read_verdict
from tunelab.core.trust.remeasure.text import ms_text, pct_text
from tunelab.core.trust.shape_report import AcrossShapes, ShapeRow, read_status

__all__ = [
    "VERDICTS",
    "DRIFT_TOL",
    "TelemetryWindow",
    "RecordedTelemetry",
    "Measurement",
    "ScheduleResult",
    "OwnShapeRow",
    "Ranking",
    "ValidationSource",
    "ValidationReport",
    "pct_text",
    "ms_text",
    "format_report",
]


@dataclass(frozen=True, slots=True)
class OwnShapeRow(JsonRecord):
    """The validated shape itself as a per-shape row (the rows the shape check gives, in brief)."""

    shape: dict[str, int]
    shape_text: str
    status: str  # "ok" | "failed"
    latency_ms: float | None
    samples_ms: tuple[float, ...]
    gflops: float | None
    recorded_ms: float | None
    verdict: str
    label: str

    json_readers = {"status": read_status, "verdict": read_verdict}


def _shape_row_from_json(data: Mapping[str, Any]) -> OwnShapeRow | ShapeRow:
    return ShapeRow.from_json(data) if ShapeRow.is_row_json(data) else OwnShapeRow.from_json(data)


# ------------------------------------------------------------------------------------------ the report


@dataclass(frozen=True, slots=True)
class Ranking(JsonRecord):
    """Whether the recorded order of the schedules holds when re-measured (None with fewer than two)."""

    recorded_order: tuple[str, ...]  # labels, fastest first
    remeasured_order: tuple[str, ...]
    holds: bool | None  # no pair the re-measurement clearly (IQRs apart) inverts
    kendall_tau: float | None

    json_names = {"holds": "ranking_holds"}


@dataclass(frozen=True, slots=True)
class ValidationSource:
    """What was validated: a session's trials (``kind`` "session") or a schedule file ("file").

    ``purpose`` is "confirm" for a session's own confirmation (:mod:`tunelab.core.trust.confirm`);
    ``file_session`` is what the file says of the session it came from."""

    kind: str
    session_id: int | None = None
    name: str | None = None
    top_k: int | None = None
    task: int = 0
    path: str | None = None
    file_session: dict[str, Any] | None = None
    purpose: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        if self.kind == "session":
            data.update(session_id=self.session_id, name=self.name, top_k=self.top_k, task=self.task)
        elif self.kind == "file":
            data.update(path=self.path, session=dict(self.file_session or {}))
        if self.purpose is not None:
            data["purpose"] = self.purpose
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ValidationSource:
        session = data.get("session")
        return cls(
            kind=str(data.get("kind", "")),
            session_id=data.get("session_id"),
            name=data.get("name"),
            top_k=data.get("top_k"),
            task=int(data.get("task") or 0),
            path=data.get("path"),
            file_session=dict(session) if session is not None else None,
            purpose=data.get("purpose"),
        )


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """One validation: each schedule re-measured and judged, the verdict of the whole and its cause.

    The whole's figures (``recorded_ms`` ... ``reference_ms``) are the best (first) schedule's;
    ``verdict`` and ``cause`` are those of the first regressed schedule, else the first noisy one, else
    the best's. ``shapes`` holds the validated shape's own row, or the shape check's rows when other
    shapes were checked (``across_shapes``). ``id`` is set once stored."""

    source: ValidationSource
    workload: str
    shape: dict[str, int]
    dtype: str
    target: dict[str, Any]  # the target's JSON (tunelab.core.target.info)
    verdict: str
    cause: str | None
    summary: str
    recorded_ms: float | None
    remeasured_ms: float | None
    cv: float | None
    runs: int
    throttled: bool
    placement_ratio: float | None
    machine_drift: float | None
    reference_ms: float | None
    ranking: Ranking
    options: MeasureOptions
    runs_asked: int  # the fresh processes asked for (``runs`` is how many gave the best a timing)
    telemetry: dict[str, Any]  # the sampler's summary over the whole validation, in brief
    schedules: tuple[ScheduleResult, ...]
    shapes: tuple[OwnShapeRow | ShapeRow, ...]
    started_at: float
    finished_at: float
    elapsed_s: float
    hostname: str
    telemetry_status: str
    across_shapes: AcrossShapes | None = None
    id: int | None = None

    @property
    def best(self) -> ScheduleResult:
        return self.schedules[0]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "source": self.source.to_json(),
            "workload": self.workload,
            "shape": dict(self.shape),
            "dtype": self.dtype,
            "target": self.target,
            "verdict": self.verdict,
            "cause": self.cause,
            "summary": self.summary,
            "recorded_ms": self.recorded_ms,
            "remeasured_ms": self.remeasured_ms,
            "cv": self.cv,
            "runs": self.runs,
            "throttled": self.throttled,
            "placement_ratio": self.placement_ratio,
            "machine_drift": self.machine_drift,
            "reference_ms": self.reference_ms,
            **self.ranking.to_json(),
            "options": {**self.options.to_json(), "runs": self.runs_asked},
            "telemetry": dict(self.telemetry),
            "schedules": [s.to_json() for s in self.schedules],
            "shapes": [r.to_json() for r in self.shapes],
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_s": self.elapsed_s,
            "hostname": self.hostname,
            "telemetry_status": self.telemetry_status,
        }
        if self.across_shapes is not None:  # its rows are the shapes above
            data["across_shapes"] = self.across_shapes.to_json(rows=False)
        if self.id is not None:
            data["id"] = self.id
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ValidationReport:
        """A report as ``to_json`` (or an older tunelab) wrote it, e.g. ``store.validation(id)``."""
        options = dict(data.get("options") or {})
        shapes = tuple(_shape_row_from_json(r) for r in data.get("shapes") or ())
        across = data.get("across_shapes")
        return cls(
            source=ValidationSource.from_json(data.get("source") or {}),
            workload=str(data.get("workload", "")),
            shape=dict(data.get("shape") or {}),
            dtype=str(data.get("dtype", "")),
            target=dict(data.get("target") or {}),
            verdict=str(data.get("verdict")),
            cause=data.get("cause"),
            summary=str(data.get("summary") or ""),
            recorded_ms=data.get("recorded_ms"),
            remeasured_ms=data.get("remeasured_ms"),
            cv=data.get("cv"),
            runs=int(data.get("runs") or 0),
            throttled=bool(data.get("throttled")),
            placement_ratio=data.get("placement_ratio"),
            machine_drift=data.get("machine_drift"),
            reference_ms=data.get("reference_ms"),
            ranking=Ranking.from_json(data),
            options=MeasureOptions.from_json(options),
            runs_asked=int(options.get("runs") or 0),
            telemetry=dict(data.get("telemetry") or {}),
            schedules=tuple(ScheduleResult.from_json(s) for s in data.get("schedules") or ()),
            shapes=shapes,
            started_at=float(data.get("started_at") or 0.0),
            finished_at=float(data.get("finished_at") or 0.0),
            elapsed_s=float(data.get("elapsed_s") or 0.0),
            hostname=str(data.get("hostname") or ""),
            telemetry_status=str(data.get("telemetry_status") or ""),
            across_shapes=(
                AcrossShapes.from_json(across, rows=[r.to_json() for r in shapes if isinstance(r, ShapeRow)])
                if across is not None
                else None
            ),
            id=data.get("id"),
        )


def format_report(report: ValidationReport) -> str:
    """The report as a few lines of text for people."""
    lines = [f"{report.verdict}: {report.summary}"]
    for s in report.schedules:
        rec = ms_text(s.recorded_ms) + ("*" if s.confirmed else "")
        new = ms_text(s.remeasured_ms)
        cv = "-" if s.cv is None else f"{100 * s.cv:.1f}%"
        lines.append(
            f"  {s.label:<28s} recorded {rec:>10s}  re-measured {new:>10s}  cv {cv:>6s}  "
            f"runs {s.runs}  {s.verdict}" + (f" ({s.cause})" if s.cause else "")
        )
        for note in (s.placement_note(), s.drift_note()):
            if note is not None:
                lines.append(f"    {note}")
    if any(s.confirmed for s in report.schedules):
        lines.append(
            "  * the figure a fresh-process confirmation gave when the session finished (tunelab show)"
        )
    ranking = report.ranking
    if ranking.holds is not None:
        lines.append(
            "  ranking "
            + ("holds" if ranking.holds else "does not hold")
            + f": recorded {', '.join(ranking.recorded_order)}; re-measured {', '.join(ranking.remeasured_order)}"
        )
    return "\n".join(lines)

"""A validation's report as frozen records, their one JSON mapping each, and the report as text.

:class:`ValidationReport` holds a :class:`ScheduleResult` per re-measured schedule (each with a
:class:`Measurement` per fresh-process run and its :class:`TelemetryWindow`), the :class:`Ranking` and
the per-shape rows. ``to_json()`` gives the document ``tunelab validate --json`` prints and the store
keeps (:meth:`tunelab.core.store.Store.add_validation`); ``from_json()`` reads it back, also
from older versions (a missing key takes its default). TVM-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunelab.core.measure.placement import LAYOUT_WORDS, PLACEMENT_TOL, worst_layout
from tunelab.core.records import MeasureOptions
from tunelab.core.trust.shape_report import AcrossShapes, ShapeRow

VERDICTS = ("stable", "noisy", "regressed")
DRIFT_TOL = 0.03  # the reference kernel moved more than this since recording: the machine itself changed


def _ints(values: Sequence[Any] | None) -> tuple[int, ...]:
    return tuple(int(v) for v in values or ())


def _maybe_list(values: Sequence[Any] | None) -> list[Any] | None:
    return None if values is None else list(values)


def _maybe_tuple(values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


# ------------------------------------------------------------------------------------------ telemetry


@dataclass(frozen=True, slots=True)
class TelemetryWindow:
    """What the machine did while one measurement ran: other busy processes (``names``: pid text ->
    process name), throttling, the CPU's clock and load."""

    n: int  # telemetry samples in the window
    other_busy_pids: tuple[int, ...]
    other_gpu_pids: tuple[int, ...]
    names: dict[str, str]
    throttled: bool
    throttle_reasons: tuple[str, ...]
    cpu_freq_mhz: float | None
    cpu_load_mean: float | None

    @property
    def quiet(self) -> bool:
        """No other busy process, nothing else on the GPU, no throttling."""
        return not (self.other_busy_pids or self.other_gpu_pids or self.throttled)

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "other_busy_pids": list(self.other_busy_pids),
            "other_gpu_pids": list(self.other_gpu_pids),
            "names": dict(self.names),
            "throttled": self.throttled,
            "throttle_reasons": list(self.throttle_reasons),
            "cpu_freq_mhz": self.cpu_freq_mhz,
            "cpu_load_mean": self.cpu_load_mean,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TelemetryWindow:
        return cls(
            n=int(data.get("n") or 0),
            other_busy_pids=_ints(data.get("other_busy_pids")),
            other_gpu_pids=_ints(data.get("other_gpu_pids")),
            names={str(k): str(v) for k, v in (data.get("names") or {}).items()},
            throttled=bool(data.get("throttled")),
            throttle_reasons=tuple(data.get("throttle_reasons") or ()),
            cpu_freq_mhz=data.get("cpu_freq_mhz"),
            cpu_load_mean=data.get("cpu_load_mean"),
        )


@dataclass(frozen=True, slots=True)
class RecordedTelemetry:
    """The telemetry stamp the store holds for a trial's own measurement (:meth:`Store.trial_telemetry`),
    in brief; a field the stamp lacks is None."""

    n: int | None
    other_busy_pids: tuple[int, ...] | None
    other_gpu_pids: tuple[int, ...] | None
    throttled: bool | None
    throttle_reasons: tuple[str, ...] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "other_busy_pids": _maybe_list(self.other_busy_pids),
            "other_gpu_pids": _maybe_list(self.other_gpu_pids),
            "throttled": self.throttled,
            "throttle_reasons": _maybe_list(self.throttle_reasons),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedTelemetry:
        return cls(
            n=data.get("n"),
            other_busy_pids=_maybe_tuple(data.get("other_busy_pids")),
            other_gpu_pids=_maybe_tuple(data.get("other_gpu_pids")),
            throttled=data.get("throttled"),
            throttle_reasons=_maybe_tuple(data.get("throttle_reasons")),
        )


# ------------------------------------------------------------------------------------------ one run


@dataclass(frozen=True, slots=True)
class Measurement:
    """One schedule measured in one fresh process (run ``run``, at ``position`` in its order).

    ``layout_ms`` (the median per buffer layout) and ``reference_ms`` (the reference kernel in that
    process) feed the schedule's figures and are not kept per run in the document."""

    run: int
    position: int
    pid: int | None
    ok: bool
    error: str | None
    load_ms: float | None
    cold_ms: float | None  # the first call: module init, thread pool start, first-touch allocation
    samples_ms: tuple[float, ...] | None  # None when it failed
    t0: float | None  # wall-clock time of the timed window
    t1: float | None
    telemetry: TelemetryWindow | None
    layout_ms: dict[str, float] | None = None
    reference_ms: float | None = None
    # the RPC server ("HOST:PORT") whose fresh session measured it (tunelab.core.trust.remeasure.remote_pool);
    # None: a worker process on this machine
    device: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run": self.run,
            "position": self.position,
            "pid": self.pid,
            "ok": self.ok,
            "error": self.error,
            "load_ms": self.load_ms,
            "cold_ms": self.cold_ms,
            "samples_ms": _maybe_list(self.samples_ms),
            "t0": self.t0,
            "t1": self.t1,
            "telemetry": self.telemetry.to_json() if self.telemetry is not None else None,
        }
        if self.device is not None:
            data["device"] = self.device
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        telemetry = data.get("telemetry")
        return cls(
            run=int(data.get("run") or 0),
            position=int(data.get("position") or 0),
            pid=data.get("pid"),
            ok=bool(data.get("ok")),
            error=data.get("error"),
            load_ms=data.get("load_ms"),
            cold_ms=data.get("cold_ms"),
            samples_ms=_maybe_tuple(data.get("samples_ms")),
            t0=data.get("t0"),
            t1=data.get("t1"),
            telemetry=TelemetryWindow.from_json(telemetry) if telemetry else None,
            device=data.get("device"),
        )


# ------------------------------------------------------------------------------------------ one schedule


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """One schedule re-measured: its figures, what the machine did meanwhile, and its verdict.

    ``recorded_ms`` is the figure it is judged against: the session's (``recorded_kind`` "session") or
    a fresh-process confirmation's ("confirmed", with the session's own in ``session_ms``)."""

    label: str
    trial_id: int | None
    config: Any  # the space's Config, as recorded
    recorded_ms: float | None
    recorded_samples_ms: tuple[float, ...]
    recorded_kind: str  # "session" | "confirmed"
    session_ms: float | None
    rivals: int | None  # other trials the session measured at or below the re-measured figure
    recorded_telemetry: RecordedTelemetry | None
    # How the machine was while the recorded figure was taken, when it was not quiet ("pid 4242
    # (stress) was busy during 60% of the confirmation's runs, CV 16%"); None: quiet, or unknown.
    recorded_disturbance: str | None
    remeasured_ms: float | None  # the median of every run's samples
    ratio: float | None  # remeasured / recorded
    mean_ms: float | None
    min_ms: float | None
    max_ms: float | None
    q1_ms: float | None
    q3_ms: float | None
    cv: float | None  # of all samples
    run_cv: float | None  # of the runs' medians
    runs: int  # runs that gave a timing
    runs_tried: int
    quiet_runs: int | None  # runs during which telemetry saw no other busy process and no throttling
    quiet_ms: float | None
    quiet_ratio: float | None
    run_medians_ms: tuple[float, ...]
    samples_ms: tuple[float, ...]
    cold_ms: float | None
    first_sample_ratio: float | None
    # per buffer layout (tunelab.core.measure.placement): the median of the runs' medians, and aligned / staggered
    layout_ms: dict[str, float]
    placement_ratio: float | None
    # the reference kernel now and when the figure was recorded: > 1 means the machine itself is slower
    reference_ms: float | None
    recorded_reference_ms: float | None
    machine_drift: float | None
    drift_corrected_ratio: float | None
    gflops: float | None
    throttled: bool
    busy_fraction: float
    throttled_fraction: float
    other_busy_pids: tuple[int, ...]
    process_names: dict[str, str]
    errors: tuple[str, ...]
    measurements: tuple[Measurement, ...]
    verdict: str  # one of VERDICTS
    cause: str | None  # None when stable

    @property
    def confirmed(self) -> bool:
        """Judged against a fresh-process confirmation's figure, not the session's."""
        return self.recorded_kind == "confirmed"

    def placement_note(self) -> str | None:
        """A sentence when the kernel is placement-sensitive (beyond :data:`PLACEMENT_TOL`), else None."""
        worst = worst_layout(self.layout_ms)
        if self.placement_ratio is None or self.placement_ratio <= 1 + PLACEMENT_TOL or worst is None:
            return None
        return (
            f"placement-sensitive: {pct_text(self.placement_ratio - 1)} slower "
            f"({ms_text(self.layout_ms[worst])}) {LAYOUT_WORDS.get(worst, f'with the {worst} layout')}"
        )

    def drift_note(self) -> str | None:
        """A sentence when the machine itself moved since recording (beyond :data:`DRIFT_TOL`), else None."""
        drift = self.machine_drift
        if drift is None or abs(drift - 1) <= DRIFT_TOL:
            return None
        return (
            f"the machine was {pct_text(abs(drift - 1))} {'slower' if drift > 1 else 'faster'} than at recording "
            f"by the reference kernel ({ms_text(self.reference_ms)} vs {ms_text(self.recorded_reference_ms)}); "
            f"{self.drift_corrected_ratio:.2f}x recorded once that is taken out"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "trial_id": self.trial_id,
            "config": self.config,
            "recorded_ms": self.recorded_ms,
            "recorded_samples_ms": list(self.recorded_samples_ms),
            "recorded_kind": self.recorded_kind,
            "session_ms": self.session_ms,
            "rivals": self.rivals,
            "recorded_telemetry": (
                self.recorded_telemetry.to_json() if self.recorded_telemetry is not None else None
            ),
            "recorded_disturbance": self.recorded_disturbance,
            "remeasured_ms": self.remeasured_ms,
            "ratio": self.ratio,
            "mean_ms": self.mean_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "q1_ms": self.q1_ms,
            "q3_ms": self.q3_ms,
            "cv": self.cv,
            "run_cv": self.run_cv,
            "runs": self.runs,
            "runs_tried": self.runs_tried,
            "quiet_runs": self.quiet_runs,
            "quiet_ms": self.quiet_ms,
            "quiet_ratio": self.quiet_ratio,
            "run_medians_ms": list(self.run_medians_ms),
            "samples_ms": list(self.samples_ms),
            "cold_ms": self.cold_ms,
            "first_sample_ratio": self.first_sample_ratio,
            "layout_ms": dict(self.layout_ms),
            "placement_ratio": self.placement_ratio,
            "reference_ms": self.reference_ms,
            "recorded_reference_ms": self.recorded_reference_ms,
            "machine_drift": self.machine_drift,
            "drift_corrected_ratio": self.drift_corrected_ratio,
            "gflops": self.gflops,
            "throttled": self.throttled,
            "busy_fraction": self.busy_fraction,
            "throttled_fraction": self.throttled_fraction,
            "other_busy_pids": list(self.other_busy_pids),
            "process_names": dict(self.process_names),
            "errors": list(self.errors),
            "measurements": [m.to_json() for m in self.measurements],
            "verdict": self.verdict,
            "cause": self.cause,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScheduleResult:
        stamp = data.get("recorded_telemetry")
        return cls(
            label=str(data.get("label", "")),
            trial_id=data.get("trial_id"),
            config=data.get("config"),
            recorded_ms=data.get("recorded_ms"),
            recorded_samples_ms=tuple(data.get("recorded_samples_ms") or ()),
            recorded_kind=data.get("recorded_kind", "session"),
            session_ms=data.get("session_ms"),
            rivals=data.get("rivals"),
            recorded_telemetry=RecordedTelemetry.from_json(stamp) if stamp else None,
            recorded_disturbance=data.get("recorded_disturbance"),
            remeasured_ms=data.get("remeasured_ms"),
            ratio=data.get("ratio"),
            mean_ms=data.get("mean_ms"),
            min_ms=data.get("min_ms"),
            max_ms=data.get("max_ms"),
            q1_ms=data.get("q1_ms"),
            q3_ms=data.get("q3_ms"),
            cv=data.get("cv"),
            run_cv=data.get("run_cv"),
            runs=int(data.get("runs") or 0),
            runs_tried=int(data.get("runs_tried", data.get("runs")) or 0),
            quiet_runs=data.get("quiet_runs"),  # None in a document older than it
            quiet_ms=data.get("quiet_ms"),
            quiet_ratio=data.get("quiet_ratio"),
            run_medians_ms=tuple(data.get("run_medians_ms") or ()),
            samples_ms=tuple(data.get("samples_ms") or ()),
            cold_ms=data.get("cold_ms"),
            first_sample_ratio=data.get("first_sample_ratio"),
            layout_ms=dict(data.get("layout_ms") or {}),
            placement_ratio=data.get("placement_ratio"),
            reference_ms=data.get("reference_ms"),
            recorded_reference_ms=data.get("recorded_reference_ms"),
            machine_drift=data.get("machine_drift"),
            drift_corrected_ratio=data.get("drift_corrected_ratio"),
            gflops=data.get("gflops"),
            throttled=bool(data.get("throttled")),
            busy_fraction=float(data.get("busy_fraction") or 0.0),
            throttled_fraction=float(data.get("throttled_fraction") or 0.0),
            other_busy_pids=_ints(data.get("other_busy_pids")),
            process_names={str(k): str(v) for k, v in (data.get("process_names") or {}).items()},
            errors=tuple(data.get("errors") or ()),
            measurements=tuple(Measurement.from_json(m) for m in data.get("measurements") or ()),
            verdict=str(data.get("verdict")),
            cause=data.get("cause"),
        )


@dataclass(frozen=True, slots=True)
class OwnShapeRow:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": dict(self.shape),
            "shape_text": self.shape_text,
            "status": self.status,
            "latency_ms": self.latency_ms,
            "samples_ms": list(self.samples_ms),
            "gflops": self.gflops,
            "recorded_ms": self.recorded_ms,
            "verdict": self.verdict,
            "label": self.label,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OwnShapeRow:
        return cls(
            shape=dict(data.get("shape") or {}),
            shape_text=str(data.get("shape_text", "")),
            status=data.get("status", "ok"),
            latency_ms=data.get("latency_ms"),
            samples_ms=tuple(data.get("samples_ms") or ()),
            gflops=data.get("gflops"),
            recorded_ms=data.get("recorded_ms"),
            verdict=str(data.get("verdict")),
            label=str(data.get("label", "")),
        )


def _shape_row_from_json(data: Mapping[str, Any]) -> OwnShapeRow | ShapeRow:
    return ShapeRow.from_json(data) if ShapeRow.is_row_json(data) else OwnShapeRow.from_json(data)


# ------------------------------------------------------------------------------------------ the report


@dataclass(frozen=True, slots=True)
class Ranking:
    """Whether the recorded order of the schedules holds when re-measured (None with fewer than two)."""

    recorded_order: tuple[str, ...]  # labels, fastest first
    remeasured_order: tuple[str, ...]
    holds: bool | None  # no pair the re-measurement clearly (IQRs apart) inverts
    kendall_tau: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "recorded_order": list(self.recorded_order),
            "remeasured_order": list(self.remeasured_order),
            "ranking_holds": self.holds,
            "kendall_tau": self.kendall_tau,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ranking:
        return cls(
            recorded_order=tuple(data.get("recorded_order") or ()),
            remeasured_order=tuple(data.get("remeasured_order") or ()),
            holds=data.get("ranking_holds"),
            kendall_tau=data.get("kendall_tau"),
        )


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


# ------------------------------------------------------------------------------------------ as text


def pct_text(fraction: float) -> str:
    """0.123 -> "12%"."""
    return f"{round(100 * fraction)}%"


def ms_text(value: float | None) -> str:
    """A time for people, always in ms as every table shows it ("0.0123 ms", "1.234 ms"), "-" for none:
    one unit, so a sentence and the table beside it read alike."""
    if value is None:
        return "-"
    return f"{value:.4g} ms"


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

"""One re-measured schedule's record: its figures, what the machine did meanwhile, and its verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunelab.core.measure.placement import LAYOUT_WORDS, PLACEMENT_TOL, worst_layout
from tunelab.core.trust.remeasure.run_records import Measurement, RecordedTelemetry, int_tuple
from tunelab.core.trust.remeasure.text import ms_text, pct_text

VERDICTS = ("stable", "noisy", "regressed")


DRIFT_TOL = 0.03  # the reference kernel moved more than this since recording: the machine itself changed


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
            other_busy_pids=int_tuple(data.get("other_busy_pids")),
            process_names={str(k): str(v) for k, v in (data.get("process_names") or {}).items()},
            errors=tuple(data.get("errors") or ()),
            measurements=tuple(Measurement.from_json(m) for m in data.get("measurements") or ()),
            verdict=str(data.get("verdict")),
            cause=data.get("cause"),
        )

"""One re-measured schedule's record: its figures, what the machine did meanwhile, and its verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunelab.core.measure.placement import LAYOUT_WORDS, PLACEMENT_TOL, worst_layout
from tunelab.core.records_json import JsonRecord
from tunelab.core.trust.remeasure.run_records import Measurement, RecordedTelemetry
from tunelab.core.trust.remeasure.text import ms_text, pct_text

VERDICTS = ("stable", "noisy", "regressed")


def read_verdict(data: Mapping[str, Any]) -> str:
    """A document's verdict as text ("None" where it has none, as these records have always read it)."""
    return str(data.get("verdict"))


DRIFT_TOL = 0.03  # the reference kernel moved more than this since recording: the machine itself changed


@dataclass(frozen=True, slots=True)
class ScheduleResult(JsonRecord):
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

    json_readers = {
        "recorded_kind": lambda data: data.get("recorded_kind", "session"),
        # a document older than runs_tried: every run tried gave a timing
        "runs_tried": lambda data: int(data.get("runs_tried", data.get("runs")) or 0),
        "verdict": read_verdict,
    }

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

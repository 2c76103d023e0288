"""What a validation judges each schedule against: a session trial's figure, its confirmation's, or a file's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tunelab.core.stats import coefficient_of_variation
from tunelab.core.trust.remeasure.report import RecordedTelemetry
from tunelab.core.trust.remeasure.verdict import RecordedSchedule, recording_disturbance

if TYPE_CHECKING:
    from tunelab.core.trust.confirmed import Confirmation


def recorded_item(
    trial: Any,
    confirmation: Confirmation | None,
    stamp: RecordedTelemetry | None,
    space: Any,
    rivals_ms: tuple[float, ...],
) -> RecordedSchedule:
    """A session trial as the validation judges it: against its confirmation's figure where one was
    taken, else against the session's own with the ``rivals_ms`` it was picked among."""
    if confirmation is not None:  # judged against the confirmed figure: no selection bias to expect
        return RecordedSchedule(
            recorded_disturbance=confirmation.disturbance,
            label=f"trial #{trial.number}",
            trial_id=trial.id,
            config=trial.config,
            recorded_ms=confirmation.median_ms,
            recorded_samples_ms=confirmation.samples_ms,
            recorded_telemetry=stamp,
            schedule=space.schedule(trial.config),
            session_ms=trial.latency_ms,
            recorded_reference_ms=confirmation.reference_ms,
        )
    return RecordedSchedule(
        label=f"trial #{trial.number}",
        trial_id=trial.id,
        config=trial.config,
        recorded_ms=trial.latency_ms,
        recorded_samples_ms=tuple(trial.samples_ms),
        recorded_telemetry=stamp,
        schedule=space.schedule(trial.config),
        rivals_ms=rivals_ms,
        recorded_disturbance=recording_disturbance(
            what="the session's measurement",
            busy_pids=(stamp.other_busy_pids or ()) if stamp is not None else (),
            throttled=bool(stamp is not None and stamp.throttled),
            throttle_reasons=(stamp.throttle_reasons or ()) if stamp is not None else (),
            cv=coefficient_of_variation(list(trial.samples_ms)),
        ),
    )


def file_disturbance(stats: dict[str, Any]) -> str | None:
    """What disturbed the machine when an exported figure was confirmed: as the export stated it, or,
    for a file exported before exports said so, from the scatter of the confirmation's runs."""
    confirmed = stats.get("confirmed") or {}
    if "disturbance" in confirmed:
        return confirmed["disturbance"]
    cvs = [c for c in (confirmed.get("cv"), confirmed.get("run_cv")) if isinstance(c, (int, float))]
    return recording_disturbance(what="the confirmation's runs", cv=max(cvs, default=None))


def compact_stamp(stamp: dict[str, Any] | None) -> RecordedTelemetry | None:
    """A trial's stored telemetry stamp, in brief."""
    return RecordedTelemetry.from_json(stamp) if stamp else None

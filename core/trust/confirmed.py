"""The confirmed figures a store holds for a session's trials (what core.trust.confirm measured, in
fresh processes here or, for a session measured through an RPC tracker, in fresh sessions on its servers).

A read of stored validations only, so that whatever states a figure (export, validate, show) can use
the confirmed one without depending on the machinery that measures it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tunelab.core.records_json import JsonRecord
from tunelab.core.store import Store
from tunelab.core.trust.remeasure.report import ScheduleResult, ValidationReport
from tunelab.core.trust.remeasure.schedule_result import read_verdict
from tunelab.core.trust.remeasure.verdict import DISTURBED_FRACTION, recording_disturbance

CONFIRM_PURPOSE = "confirm"
CLEARLY_FASTER = 0.95  # a confirmed rival replaces the session's best only when this much faster, and more


@dataclass(frozen=True, slots=True)
class Confirmation(JsonRecord):
    """A trial's figure from a fresh-process confirmation (the latest that timed it)."""

    median_ms: float
    samples_ms: tuple[float, ...]
    runs: int
    cv: float | None
    run_cv: float | None
    verdict: str
    session_ms: float | None  # the figure the session recorded
    reference_ms: float | None  # tunelab.core.trust.remeasure's reference kernel meanwhile
    validation_id: int
    # what disturbed the machine during the confirmation's runs, in words; None: it was quiet
    disturbance: str | None = None
    run_medians_ms: tuple[float, ...] = ()  # each fresh process's median
    # the median per buffer layout (tunelab.core.measure.placement): "staggered" is the figure above,
    # "plain" what plain TVM's allocation gives in a person's process, "aligned" the worst case
    layout_ms: dict[str, float] = field(default_factory=dict)
    # the RPC servers ("HOST:PORT") whose fresh sessions gave its runs; empty: fresh processes here
    devices: tuple[str, ...] = ()

    # a confirmation names its figure and its validation (no lenient default); its verdict as the reports read it
    json_readers = {
        "median_ms": lambda data: data["median_ms"],
        "validation_id": lambda data: int(data["validation_id"]),
        "verdict": read_verdict,
    }


def confirmations(store: Store, session_id: int) -> dict[int, Confirmation]:
    """The latest confirmed figures of a session's trials, by trial id. Trials never confirmed (or
    confirmed without a single timing) are absent."""
    found: dict[int, Confirmation] = {}
    for entry in store.validations(session_id):  # newest first: the first figure seen for a trial wins
        report = ValidationReport.from_json(store.validation(entry["id"]))
        if report.source.purpose != CONFIRM_PURPOSE:
            continue
        for s in report.schedules:
            if s.trial_id is None or s.trial_id in found or s.remeasured_ms is None:
                continue
            found[s.trial_id] = Confirmation(
                median_ms=s.remeasured_ms,
                samples_ms=s.samples_ms,
                runs=s.runs,
                cv=s.cv,
                run_cv=s.run_cv,
                verdict=s.verdict,
                session_ms=s.recorded_ms,
                reference_ms=s.reference_ms,
                validation_id=entry["id"],
                disturbance=disturbance_of(s),
                run_medians_ms=s.run_medians_ms,
                layout_ms=dict(s.layout_ms),
                devices=tuple(sorted({m.device for m in s.measurements if m.ok and m.device})),
            )
    return found


def disturbance_of(s: ScheduleResult) -> str | None:
    """What disturbed a confirmation's runs of one schedule, in words (None: the machine was quiet and
    the runs agreed): another busy process during :data:`DISTURBED_FRACTION` of them, throttling, or
    samples scattered beyond the noise threshold."""
    return recording_disturbance(
        what="the confirmation's runs",
        busy_pids=s.other_busy_pids,
        names=s.process_names,
        busy_fraction=s.busy_fraction,
        throttled=s.throttled_fraction >= DISTURBED_FRACTION,
        cv=max((c for c in (s.cv, s.run_cv) if c is not None), default=None),
    )


def clearly_faster(rival: Confirmation, best: Confirmation) -> bool:
    """The rival's confirmed figure beats the best's beyond noise, so an export may pick it instead.

    Both confirmations ran on a quiet machine (a figure taken beside a busy neighbour picks nothing),
    the rival's median is :data:`CLEARLY_FASTER` or less of the best's, and their per-process medians
    do not overlap: the rival's slowest process was faster than the best's fastest (a one-sided
    Mann-Whitney U of 0; with three processes each, p = 0.05). Two noisy medians 5 % apart are not
    evidence; without two processes each there is no interval to compare, and the best stays.
    """
    if rival.disturbance or best.disturbance:
        return False
    if len(rival.run_medians_ms) < 2 or len(best.run_medians_ms) < 2:
        return False
    return rival.median_ms <= CLEARLY_FASTER * best.median_ms and max(rival.run_medians_ms) < min(
        best.run_medians_ms
    )

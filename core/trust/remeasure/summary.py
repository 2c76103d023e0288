"""A validation as a whole: its lead verdict and summary, whether the ranking holds, the report."""

from __future__ import annotations

from typing import Any

from tunelab.core.records import MeasureOptions
from tunelab.core.trust.remeasure.report import (
    OwnShapeRow,
    Ranking,
    ScheduleResult,
    ValidationReport,
    ValidationSource,
    ms_text,
)
from tunelab.core.trust.remeasure.verdict import Problem

_WHOLE_TELEMETRY = (  # the sampler's summary fields a report keeps for the whole validation
    "n",
    "cpu_load_mean",
    "cpu_freq_mhz",
    "cpu_temp_c",
    "gpu_temp_c",
    "gpu_power_w",
    "gpu_sm_clock_mhz",
    "throttled",
    "throttle_reasons",
    "other_busy_procs_max",
    "other_busy_pids",
    "other_gpu_pids",
)


def summarize(
    problem: Problem,
    schedules: list[ScheduleResult],
    runs: int,
    options: MeasureOptions,
    source: ValidationSource,
    whole: dict[str, Any],
    *,
    started_at: float,
    finished_at: float,
    hostname: str,
    telemetry_status: str,
) -> ValidationReport:
    """The report of a validation whose schedules (the best first) are judged; ``whole`` is the
    sampler's summary over all of it."""
    best = schedules[0]
    verdicts = [s.verdict for s in schedules]
    if "regressed" in verdicts:
        lead = schedules[verdicts.index("regressed")]
    elif "noisy" in verdicts:
        lead = schedules[verdicts.index("noisy")]
    else:
        lead = best
    ranking = _ranking(schedules)
    if best.runs:
        figure = (
            f"{best.label} re-measured {ms_text(best.remeasured_ms)} vs {ms_text(best.recorded_ms)} recorded"
            + (f" (cv {100 * best.cv:.1f}%)" if best.cv is not None else "")
            + f" over {best.runs} fresh-process runs"
        )
    else:
        figure = f"{best.label} gave no timing in {best.runs_tried} fresh-process runs"
    if lead.verdict == "stable":
        summary = f"the figures hold: {figure}"
        if ranking.holds is False:
            summary += "; but the ranking changed"
    else:
        summary = f"{lead.cause}; {figure}" if lead is best else f"{lead.label}: {lead.cause}; {figure}"
    for note in (best.placement_note(), best.drift_note()):
        if note is not None:
            summary += f"; {note}"
    return ValidationReport(
        source=source,
        workload=problem.workload,
        shape=problem.shape,
        dtype=problem.dtype,
        target=problem.target,
        verdict=lead.verdict,
        cause=lead.cause,
        summary=summary,
        recorded_ms=best.recorded_ms,
        remeasured_ms=best.remeasured_ms,
        cv=best.cv,
        runs=best.runs,
        throttled=any(s.throttled for s in schedules),
        placement_ratio=best.placement_ratio,
        machine_drift=best.machine_drift,
        reference_ms=best.reference_ms,
        ranking=ranking,
        options=options,
        runs_asked=runs,
        telemetry={k: whole.get(k) for k in _WHOLE_TELEMETRY},
        schedules=tuple(schedules),
        shapes=(own_shape_row(problem, best),),
        started_at=started_at,
        finished_at=finished_at,
        elapsed_s=round(finished_at - started_at, 3),
        hostname=hostname,
        telemetry_status=telemetry_status,
    )


def own_shape_row(problem: Problem, best: ScheduleResult) -> OwnShapeRow:
    """The per-shape row of the validated shape itself (the rows ``across_shapes`` gives, in brief)."""
    from tunelab.core.workloads.base import format_shape  # imports TVM: only once there are results

    return OwnShapeRow(
        shape=problem.shape,
        shape_text=format_shape(problem.shape),
        status="ok" if best.runs else "failed",
        latency_ms=best.remeasured_ms,
        samples_ms=best.samples_ms,
        gflops=best.gflops,
        recorded_ms=best.recorded_ms,
        verdict=best.verdict,
        label=best.label,
    )


def _ranking(schedules: list[ScheduleResult]) -> Ranking:
    """Whether the recorded order holds: no pair the re-measurement clearly (IQRs apart) inverts."""
    have = [s for s in schedules if s.remeasured_ms is not None and s.recorded_ms is not None]
    by_rec = sorted(have, key=lambda s: s.recorded_ms or 0.0)
    recorded = tuple(s.label for s in by_rec)
    remeasured = tuple(s.label for s in sorted(have, key=lambda s: s.remeasured_ms or 0.0))
    if len(have) < 2:
        return Ranking(recorded, remeasured, None, None)
    holds = True
    concordant = discordant = 0
    for i, a in enumerate(by_rec):
        for b in by_rec[i + 1 :]:
            if b.q3_ms is not None and a.q1_ms is not None and b.q3_ms < a.q1_ms:
                holds = False  # the one recorded slower is now clearly faster
            sign = ((a.remeasured_ms or 0.0) - (b.remeasured_ms or 0.0)) * (
                (a.recorded_ms or 0.0) - (b.recorded_ms or 0.0)
            )
            concordant += sign > 0
            discordant += sign < 0
    pairs = len(have) * (len(have) - 1) / 2
    return Ranking(recorded, remeasured, holds, (concordant - discordant) / pairs if pairs else None)

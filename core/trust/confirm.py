"""Confirm a finished session's winners in fresh processes (the winner's curse).

A tuner keeps the fastest of many noisy figures. When several candidates are about equally fast,
the one that wins is mostly the one whose measurement happened to be lucky, so the session's best
figure is biased low: re-measured later, the "best" schedule comes out slower than the session
said. That is the first thing the story behind tunelab ran into ("5x faster in the session, then
slower in production").

The remedy is the statistician's: pick with one set of measurements, report with another. When a
session finishes, its ``confirm_top`` fastest trials (per shape) are re-measured in
``confirm_runs`` fresh processes by :mod:`tunelab.core.trust.remeasure` (interleaved, with telemetry), and the
report is stored as a validation whose source says ``"purpose": "confirm"``. A confirmation is only
evidence when the machine was quiet and the processes agree: while it is not, it is measured again,
up to ``confirm_max_s`` seconds; one that never settles is stored with what disturbed it, and an export
neither picks by it nor trusts its figure. From then on the
confirmed median is the figure an export states; the session's own figure stays in the store
(what was measured is never rewritten) and is exported beside it.

A session measured on the servers of a TVM RPC tracker is confirmed on them, under its key: each fresh
process is a fresh session a server forks for it (:mod:`tunelab.core.trust.remeasure.remote_pool`), and
each run names its server. This machine's telemetry says nothing of a server, so there a confirmation
is unsettled only while its runs disagree beyond ``target_cv``; the report says busy or throttle
evidence is not available.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import replace

from tunelab.core.records import MeasureOptions, TaskRecord
from tunelab.core.store import Store
from tunelab.core.trust.confirmed import CONFIRM_PURPOSE, disturbance_of
from tunelab.core.trust.remeasure.attempts import measure_until
from tunelab.core.trust.remeasure.report import ValidationReport

StageFn = Callable[[str], None]


def confirm_session(
    store: Store,
    session_id: int,
    *,
    top_k: int | None = None,
    runs: int | None = None,
    max_s: float | None = None,
    is_cancelled: Callable[[], bool] | None = None,
    on_stage: StageFn | None = None,
) -> list[ValidationReport]:
    """Re-measure each shape's ``top_k`` fastest trials in ``runs`` fresh processes and store the
    reports (one validation per shape). A shape's confirmation that is not yet evidence (the machine
    busy, its processes disagreeing) is measured again for up to ``max_s`` seconds. Defaults come from
    the session's measurement options; with ``runs`` 0 nothing happens. Returns the stored reports. Raises
    :class:`tunelab.core.trust.remeasure.api.ValidationCancelled` once ``is_cancelled()`` is true (nothing more
    stored).

    A session measured through an RPC tracker is confirmed on the servers under its key, each fresh
    process a fresh server session; its tracker not answering (or no server under the key) raises
    :class:`tunelab.core.measure.remote.RemoteError`, one sentence, before anything is built or stored.
    There only the runs' scatter can say a confirmation is unsettled: no telemetry reaches here."""
    from tunelab.core.trust.remeasure.api import validate_session
    from tunelab.core.trust.remeasure.build_cache import BuildCache

    record = store.session(session_id)
    options = MeasureOptions.from_json(record.measure)
    top_k = options.confirm_top if top_k is None else top_k
    runs = options.confirm_runs if runs is None else runs
    if runs <= 0 or top_k <= 0:
        return []
    where = "fresh processes"
    if options.remote:
        # Confirmed where it was measured: each fresh process is a fresh session on a server under the
        # key (tunelab.core.trust.remeasure.remote_pool). A tracker that does not answer is one line here.
        from tunelab.core.measure.remote import TrackerAddress, require_servers

        require_servers(TrackerAddress.parse(options.rpc_tracker), options.rpc_key)
        where = f"fresh sessions on the servers of {options.rpc_tracker} (key {options.rpc_key})"
    tasks: list[TaskRecord | None] = [*store.tasks(session_id)] or [None]  # None: a session from before tasks
    reports = []
    for index, task in enumerate(tasks):
        n_ok = task.n_trials - task.n_failed if task is not None else record.n_trials - record.n_failed
        if n_ok <= 0:
            continue
        k = min(top_k, n_ok)
        if on_stage is not None:
            shape = f" for shape {index}" if len(tasks) > 1 else ""
            on_stage(f"confirming the {k} fastest schedule(s){shape} in {runs} {where}")
        with BuildCache() as builds:  # an attempt measured again reuses the first one's libraries
            report = _measure_until_settled(
                functools.partial(
                    validate_session,
                    store,
                    session_id,
                    top_k=k,
                    runs=runs,
                    task=index,
                    record=False,
                    is_cancelled=is_cancelled,
                    against="session",
                    builds=builds,
                ),
                max_s=options.confirm_max_s if max_s is None else max_s,
                target_cv=options.target_cv,
                on_stage=on_stage,
            )
        report = replace(report, source=replace(report.source, purpose=CONFIRM_PURPOSE))
        reports.append(replace(report, id=store.add_validation(report.to_json())))
    return reports


def unsettled(report: ValidationReport, target_cv: float) -> str | None:
    """Why a confirmation is not yet evidence, in words, or None: for a schedule it timed, another process
    was busy, the machine throttled, or the fresh processes' medians disagree beyond ``target_cv``."""
    for s in report.schedules:
        if s.remeasured_ms is None:
            continue
        why = disturbance_of(s)
        if why is None and s.run_cv is not None and s.run_cv > target_cv:
            why = f"its fresh processes disagree (CV {s.run_cv * 100:.0f}% of their medians)"
        if why:
            return f"{s.label}: {why}"
    return None


def _measure_until_settled(
    measure: Callable[[], ValidationReport],
    *,
    max_s: float,
    target_cv: float,
    on_stage: StageFn | None,
    clock: Callable[[], float] = time.monotonic,
) -> ValidationReport:
    """Confirm, and confirm again while the result is unsettled (:func:`unsettled`) and another attempt
    fits in ``max_s`` seconds from the start (judged by the last attempt's length). Returns the first
    settled attempt, or, when none settled in time, the least disturbed one (its figures then say what
    disturbed them, and an export neither picks by them nor trusts them)."""

    def again(why: str, attempt: int, left_s: float) -> None:
        if on_stage is not None:
            on_stage(
                f"the confirmation is not evidence yet ({why}); measuring again "
                f"(attempt {attempt}, {left_s:.0f} s left of {max_s:.0f} s)"
            )

    attempts = measure_until(
        measure, lambda report: unsettled(report, target_cv), max_s=max_s, on_again=again, clock=clock
    )
    if attempts[-1][1] is None:
        return attempts[-1][0]
    if on_stage is not None and len(attempts) > 1:
        on_stage(f"the machine did not settle in {max_s:.0f} s: the confirmation is stored as noisy")
    return min(attempts, key=lambda a: _disturbance_rank(a[0]))[0]


def _disturbance_rank(report: ValidationReport) -> tuple[float, float]:
    """Lower is quieter: the largest busy share of a timed schedule, then the largest run CV."""
    timed = [s for s in report.schedules if s.remeasured_ms is not None]
    busy = max((max(s.busy_fraction, s.throttled_fraction) for s in timed), default=1.0)
    cv = max((s.run_cv or 0.0 for s in timed), default=1.0)
    return busy, cv


def format_confirmations(reports: list[ValidationReport]) -> str:
    """One line per confirmed shape: the confirmed best against the session's own figure."""
    lines = []
    for report in reports:
        timed = [s for s in report.schedules if s.remeasured_ms is not None]
        if not timed:
            lines.append(f"confirmation: no timing in {report.runs} fresh processes ({report.cause})")
            continue
        best = min(timed, key=lambda s: s.remeasured_ms or 0.0)
        ms, recorded = best.remeasured_ms or 0.0, best.recorded_ms
        text = f"confirmed: {best.label} {ms:.4f} ms in {best.runs} fresh processes"
        servers = sorted({m.device for m in best.measurements if m.ok and m.device})
        if servers:
            text = (
                f"confirmed: {best.label} {ms:.4f} ms in {best.runs} fresh sessions on {', '.join(servers)}"
            )
        if recorded:
            change = ms / recorded - 1
            text += f" (the session measured {recorded:.4f} ms: {abs(change) * 100:.1f}% "
            text += "optimistic)" if change > 0 else "pessimistic)"
        lines.append(text + f"; verdict {report.verdict}")
    return "\n".join(lines)

"""Confirm a finished session's winners in fresh processes (the winner's curse).

A tuner keeps the fastest of many noisy figures. When several candidates are about equally fast,
the one that wins is mostly the one whose measurement happened to be lucky, so the session's best
figure is biased low: re-measured later, the "best" schedule comes out slower than the session
said. That is the first thing the story behind tunelab ran into ("5x faster in the session, then
slower in production").

The remedy is the statistician's: pick with one set of measurements, report with another. When a
session finishes, its ``confirm_top`` fastest trials (per shape) are re-measured in
``confirm_runs`` fresh processes by :mod:`tunelab.core.trust.validate` (interleaved, with telemetry), and the
report is stored as a validation whose source says ``"purpose": "confirm"``. From then on the
confirmed median is the figure an export states; the session's own figure stays in the store
(what was measured is never rewritten) and is exported beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tunelab.core.records import MeasureOptions
from tunelab.core.store import Store
from tunelab.core.trust.confirmed import CONFIRM_PURPOSE

StageFn = Callable[[str], None]


def confirm_session(
    store: Store,
    session_id: int,
    *,
    top_k: int | None = None,
    runs: int | None = None,
    is_cancelled: Callable[[], bool] | None = None,
    on_stage: StageFn | None = None,
) -> list[dict[str, Any]]:
    """Re-measure each shape's ``top_k`` fastest trials in ``runs`` fresh processes and store the
    reports (one validation per shape). Defaults come from the session's measurement options; with
    ``runs`` 0 nothing happens. Returns the stored reports. Raises
    :class:`tunelab.core.trust.validate.ValidationCancelled` once ``is_cancelled()`` is true (nothing more stored)."""
    from tunelab.core.trust.validate import validate_session

    record = store.session(session_id)
    options = MeasureOptions.from_json(record.measure)
    top_k = options.confirm_top if top_k is None else top_k
    runs = options.confirm_runs if runs is None else runs
    if runs <= 0 or top_k <= 0:
        return []
    tasks = store.tasks(session_id) or [None]
    reports = []
    for index, task in enumerate(tasks):
        n_ok = task.n_trials - task.n_failed if task is not None else record.n_trials - record.n_failed
        if n_ok <= 0:
            continue
        k = min(top_k, n_ok)
        if on_stage is not None:
            shape = f" for shape {index}" if len(tasks) > 1 else ""
            on_stage(f"confirming the {k} fastest schedule(s){shape} in {runs} fresh processes")
        report = validate_session(
            store,
            session_id,
            top_k=k,
            runs=runs,
            task=index,
            record=False,
            is_cancelled=is_cancelled,
            against="session",
        )
        report["source"]["purpose"] = CONFIRM_PURPOSE
        report["id"] = store.add_validation(report)
        reports.append(report)
    return reports


def format_confirmations(reports: list[dict[str, Any]]) -> str:
    """One line per confirmed shape: the confirmed best against the session's own figure."""
    lines = []
    for report in reports:
        timed = [s for s in report.get("schedules", []) if s.get("remeasured_ms") is not None]
        if not timed:
            lines.append(
                f"confirmation: no timing in {report.get('runs')} fresh processes ({report.get('cause')})"
            )
            continue
        best = min(timed, key=lambda s: s["remeasured_ms"])
        ms, recorded = best["remeasured_ms"], best.get("recorded_ms")
        text = f"confirmed: trial {best['trial_id']} {ms:.4f} ms in {best['runs']} fresh processes"
        if recorded:
            change = ms / recorded - 1
            text += f" (the session measured {recorded:.4f} ms: {abs(change) * 100:.1f}% "
            text += "optimistic)" if change > 0 else "pessimistic)"
        lines.append(text + f"; verdict {report.get('verdict')}")
    return "\n".join(lines)

"""Validate a tuned session and keep the result: its fastest schedules re-measured in fresh processes,
its best schedule optionally carried over to other shapes, the report stored with the session.

`validate_and_store` is what `tunelab validate SESSION` and the app's Validation panel both call; the
engine work is :func:`tunelab.core.trust.remeasure.api.validate_session` and
:func:`tunelab.core.trust.shapes.across_shapes`. Importing this module does not import TVM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tunelab.core.errors import Cancelled, TunelabError
from tunelab.core.trust.remeasure.api import (
    DEFAULT_RUNS,
    DEFAULT_TOP_K,
    CancelFn,
    ProgressFn,
    ValidationCancelled,
    parse_source,
    validate_schedule_file,
    validate_session,
)
from tunelab.core.trust.remeasure.report import ScheduleResult, ValidationReport, format_report
from tunelab.core.trust.shape_report import AcrossShapes, FallsOffRule, ShapeRow

if TYPE_CHECKING:
    from tunelab.core.store import Store
    from tunelab.core.trust.remeasure.gate import GateResult

__all__ = [
    "ScheduleResult",
    "AcrossShapes",
    "FallsOffRule",
    "ShapeRow",
    "ValidationCancelled",
    "ValidationOutcome",
    "ValidationReport",
    "format_report",
    "gate_schedule_file",
    "parse_source",
    "validate_and_store",
    "validate_schedule_file",
]

ReportFn = Callable[[ValidationReport], None]  # the re-measurement's report, before the shapes
ShapesFn = Callable[[list[dict[str, int]], FallsOffRule], None]  # (the shapes, the falls-off rule)
RowFn = Callable[[ShapeRow], None]  # one shape's row, as soon as it is measured


@dataclass(frozen=True)
class ValidationOutcome:
    """What :func:`validate_and_store` did.

    ``report``: the re-measurement's report, with the other shapes' rows (``shapes``, ``across_shapes``)
    when they were all measured and with its stored ``id`` unless stopped; None when the session was
    not re-measured or the re-measurement was stopped. ``across``: the result of
    :func:`~tunelab.core.trust.shapes.across_shapes`; None without shapes or when stopped before they
    were all measured. ``cancelled``: ``is_cancelled()`` turned true, and nothing was stored."""

    report: ValidationReport | None
    across: AcrossShapes | None
    cancelled: bool = False

    @property
    def stored(self) -> bool:
        return self.report is not None and self.report.id is not None


class _Stopped(Cancelled):
    """Raised from the row callback to leave `across_shapes` between two shapes."""


def validate_and_store(
    store: Store,
    session_id: int,
    *,
    top_k: int = DEFAULT_TOP_K,
    runs: int = DEFAULT_RUNS,
    shapes: str | None = None,
    task: int = 0,
    remeasure: bool = True,
    against: str = "confirmed",
    on_progress: ProgressFn | None = None,
    on_report: ReportFn | None = None,
    on_shapes: ShapesFn | None = None,
    on_row: RowFn | None = None,
    is_cancelled: CancelFn | None = None,
) -> ValidationOutcome:
    """Re-measure session `session_id`'s `top_k` fastest schedules (of shape `task`) in `runs` fresh
    processes, then, given `shapes` (a shape list, :func:`tunelab.core.trust.shapes.parse_shapes`), carry
    its best schedule over to those shapes; store the report with the session.

    Without `remeasure` only the shapes are measured, and nothing is stored. Bad input (an unknown
    session, a bad shape list or shapes with another `task` than the primary shape, a target this
    machine cannot run, ...) raises :class:`TunelabError` before anything is measured.

    The callbacks report as it goes: `on_progress` each fresh-process run, `on_report` the report once
    re-measured, `on_shapes` the shapes and the falls-off rule before the first is measured, `on_row`
    each shape's row once measured. `is_cancelled` stops it: during the re-measurement at once (every
    worker process is killed), during the shapes after the one being measured; a stopped run stores
    nothing and says so (`cancelled`), keeping what it had measured.
    """
    shape_list = _checked_shapes(store, session_id, shapes, task=task, remeasure=remeasure)
    report = None
    if remeasure:
        try:
            report = validate_session(
                store,
                session_id,
                top_k=top_k,
                runs=runs,
                task=task,
                against=against,
                record=False,
                on_progress=on_progress,
                is_cancelled=is_cancelled,
            )
        except ValidationCancelled:
            return ValidationOutcome(report=None, across=None, cancelled=True)
        if on_report is not None:
            on_report(report)

    stopped = is_cancelled or (lambda: False)
    across = None
    cancelled = stopped()
    if shape_list is not None and not cancelled:
        across, cancelled = _carry_over(store, session_id, shape_list, on_shapes, on_row, stopped)
    if report is not None:
        if across is not None:
            report = replace(report, shapes=across.rows, across_shapes=across)
        if not cancelled:
            report = replace(report, id=store.add_validation(report.to_json()))
    return ValidationOutcome(report=report, across=across, cancelled=cancelled)


def _checked_shapes(
    store: Store, session_id: int, shapes: str | None, *, task: int, remeasure: bool
) -> list[dict[str, int]] | None:
    """The other shapes to carry the best schedule over to, checked before anything is measured."""
    from tunelab.core.trust.shapes import checked_shapes  # imports TVM

    if shapes is None:
        if not remeasure:
            raise TunelabError(
                "give other shapes to carry the best schedule over to, or re-measure the session"
            )
        return None
    record = store.session(session_id)
    if task:
        raise TunelabError(
            "other shapes carry the session's primary shape over; they cannot be combined with another task",
            option="shapes",
        )
    return checked_shapes(record, shapes)


def _carry_over(
    store: Store,
    session_id: int,
    shape_list: list[dict[str, int]],
    on_shapes: ShapesFn | None,
    on_row: RowFn | None,
    stopped: Callable[[], bool],
) -> tuple[AcrossShapes | None, bool]:
    """The best schedule measured on the other shapes, row by row; (what was measured, whether stopped)."""
    from tunelab.core.trust.shapes import across_shapes, falls_off_rule

    if on_shapes is not None:
        on_shapes(shape_list, falls_off_rule())

    def measured(row: ShapeRow) -> None:
        if on_row is not None:
            on_row(row)
        if stopped():
            raise _Stopped("stopped")

    try:
        return across_shapes(store, session_id, shape_list, on_row=measured), False
    except _Stopped:
        return None, True


def gate_schedule_file(
    source: int | Path,
    *,
    pct: float,
    runs: int,
    trust_custom: bool,
    shapes: str | None = None,
    task: int = 0,
    wait_s: float = 120.0,
    on_progress: ProgressFn | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> tuple[ValidationReport, GateResult]:
    """A deployment gate: a schedule file's kernel re-measured in fresh processes and judged against the
    figure the file states, within ``pct`` percent; a failure beside busy processes is measured again for
    up to ``wait_s`` seconds (:func:`tunelab.core.trust.remeasure.gate.gate_until_judged`). What the gate
    cannot judge here (a session, shapes, a file whose figure cannot be held to) raises TunelabError (one
    line) before anything is measured."""
    from tunelab.core.export.files import load_schedule_file
    from tunelab.core.trust.remeasure.gate import (
        check_gate_pct,
        check_gate_wait,
        gate_until_judged,
        stated_figure,
    )

    check_gate_pct(pct)
    check_gate_wait(wait_s)
    if isinstance(source, int) or shapes is not None or task:
        raise TunelabError(
            "--gate judges a schedule file (the figure it states), not a session", option="gate"
        )
    stated_ms = stated_figure(load_schedule_file(source, trust_custom=trust_custom), str(source))
    return gate_until_judged(
        lambda: validate_schedule_file(source, runs=runs, on_progress=on_progress, trust_custom=trust_custom),
        stated_ms,
        pct,
        max_s=wait_s,
        on_stage=on_stage,
    )

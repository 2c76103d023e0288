"""Validate a tuned session and keep the result: its fastest schedules re-measured in fresh processes,
its best schedule optionally carried over to other shapes, the report stored with the session.

`validate_and_store` is what `tunelab validate SESSION` and the app's Validation panel both call; the
engine work is :func:`tunelab.core.trust.validate.validate_session` and
:func:`tunelab.core.trust.shapes.across_shapes`. Importing this module does not import TVM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tunelab.core.errors import Cancelled, TunelabError
from tunelab.core.trust.validate import (
    DEFAULT_RUNS,
    DEFAULT_TOP_K,
    CancelFn,
    ProgressFn,
    ValidationCancelled,
    validate_session,
)

if TYPE_CHECKING:
    from tunelab.core.store import Store

ReportFn = Callable[[dict[str, Any]], None]  # the re-measurement's report, before the shapes
ShapesFn = Callable[[list[dict[str, int]], dict[str, float]], None]  # (the shapes, the falls-off rule)
RowFn = Callable[[dict[str, Any]], None]  # one shape's row, as soon as it is measured


@dataclass(frozen=True)
class ValidationOutcome:
    """What :func:`validate_and_store` did.

    ``report``: the re-measurement's report, with the other shapes' rows (``shapes``, ``across_shapes``)
    when they were all measured and with its stored ``id`` unless stopped; None when the session was
    not re-measured or the re-measurement was stopped. ``across``: the result of
    :func:`~tunelab.core.trust.shapes.across_shapes`; None without shapes or when stopped before they
    were all measured. ``cancelled``: ``is_cancelled()`` turned true, and nothing was stored."""

    report: dict[str, Any] | None
    across: dict[str, Any] | None
    cancelled: bool = False

    @property
    def stored(self) -> bool:
        return self.report is not None and self.report.get("id") is not None


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
    from tunelab.core.trust.shapes import across_shapes, checked_shapes, falls_off_rule  # imports TVM

    stopped = is_cancelled or (lambda: False)
    shape_list: list[dict[str, int]] | None = None
    if shapes is not None:
        record = store.session(session_id)
        if task:
            raise TunelabError(
                "other shapes carry the session's primary shape over; they cannot be combined with "
                "another task",
                option="shapes",
            )
        shape_list = checked_shapes(record, shapes)
    elif not remeasure:
        raise TunelabError("give other shapes to carry the best schedule over to, or re-measure the session")

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

    across = None
    cancelled = stopped()
    if shape_list is not None and not cancelled:
        if on_shapes is not None:
            on_shapes(shape_list, falls_off_rule())

        def measured(row: dict[str, Any]) -> None:
            if on_row is not None:
                on_row(row)
            if stopped():
                raise _Stopped("stopped")

        try:
            across = across_shapes(store, session_id, shape_list, on_row=measured)
        except _Stopped:
            cancelled = True

    if report is not None:
        if across is not None:
            report["across_shapes"] = {k: v for k, v in across.items() if k != "rows"}
            report["shapes"] = across["rows"]
        if not cancelled:
            report["id"] = store.add_validation(report)
    return ValidationOutcome(report=report, across=across, cancelled=cancelled)

"""The jitter report of a session's best schedule or of an exported schedule file: measure, then explain.

`jitter_report` is what `tunelab jitter SESSION|SCHEDULE_FILE` and the app's Jitter view both call. It
re-measures the schedule in `runs` fresh processes (a validation, top-1, with every buffer layout and
the telemetry sampler: :func:`tunelab.core.usecases.validation.validate_and_store` or
:func:`tunelab.core.trust.remeasure.api.validate_schedule_file`), carries it over to the given shapes,
reads the cost model's bias per shape (:func:`tunelab.core.trust.bias.bias_report_by_task`) and hands
the figures to :func:`tunelab.core.trust.jitter.explain`. The validation is stored as every validation
is (its id is the report's ``validation_id``); the report itself is derived from it and from the
session, so nothing else is stored. Importing this module does not import TVM.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunelab.core.errors import TargetError, TunelabError
from tunelab.core.trust.jitter import (
    JitterCause,
    JitterReport,
    ShapeBias,
    ShapeFigure,
    explain,
    format_jitter,
    pct,
    signed,
)
from tunelab.core.trust.remeasure.api import (
    DEFAULT_RUNS,
    CancelFn,
    ProgressFn,
    ValidationCancelled,
    parse_source,
)
from tunelab.core.trust.remeasure.report import ValidationReport
from tunelab.core.workloads.shape_text import format_shape as _shape_text

__all__ = [
    "JitterCause",
    "JitterReport",
    "ValidationCancelled",
    "check_source",
    "format_jitter",
    "jitter_report",
    "parse_source",
    "pct",
    "signed",
]

if TYPE_CHECKING:
    from tunelab.core.store import Store
    from tunelab.core.trust.shape_report import AcrossShapes


def check_source(
    source: int | Path, *, shapes: str | None = None, trust_custom: bool = False, store: Store | None = None
) -> None:
    """Bad input as one :class:`TunelabError` before anything is measured or stored: an unknown session
    (given ``store``), a missing, corrupt or untrusted schedule file, one for a target this machine
    cannot run, other shapes for a file."""
    if isinstance(source, int):
        if store is not None:
            store.session(source)
        return
    if shapes is not None:
        raise TunelabError(
            "other shapes need a SESSION (its store holds the schedule's space), not a schedule file"
        )
    from tunelab.core.export.files import load_schedule_file
    from tunelab.core.target.info import target_from_json

    doc = load_schedule_file(source, trust_custom=trust_custom)
    try:
        info = target_from_json(doc["target"])
    except Exception as exc:  # noqa: BLE001 - a target this TVM cannot parse is refused alike
        raise TargetError(
            f"{source} names a target this tunelab cannot read ({exc}); nothing was measured"
        ) from None
    if not info.can_run:
        raise TargetError(
            f"{source} was built for {info.description}, which cannot run on this machine: {info.why_not}; "
            "nothing was measured or stored"
        )


def jitter_report(
    store: Store | None,
    source: int | Path,
    *,
    runs: int = DEFAULT_RUNS,
    shapes: str | None = None,
    trust_custom: bool = False,
    on_progress: ProgressFn | None = None,
    is_cancelled: CancelFn | None = None,
) -> JitterReport:
    """Re-measure ``source`` (a session id: its best schedule; a path: an exported schedule file) in
    ``runs`` fresh processes and say which causes explain its spread.

    ``shapes`` (a shape list, a session only) carries the best schedule over to those shapes; a session
    that tunes several shapes contributes its own tasks' best figures as recorded. The validation is
    stored in ``store`` (None: a schedule file's is not stored). Bad input raises :class:`TunelabError`
    before anything is measured; ``is_cancelled`` stops it (every worker killed, nothing stored) with
    :class:`ValidationCancelled`. ``on_progress(done, total, text)`` reports each run and each shape."""
    check_source(source, shapes=shapes, trust_custom=trust_custom, store=store)
    if isinstance(source, int):
        if store is None:
            raise TunelabError("a session's jitter report needs its store")
        return _of_session(store, source, runs, shapes, on_progress, is_cancelled)
    from tunelab.core.trust.remeasure.api import validate_schedule_file

    report = validate_schedule_file(
        source,
        store=store,
        runs=runs,
        on_progress=on_progress,
        is_cancelled=is_cancelled,
        trust_custom=trust_custom,
    )
    best = report.best
    own = ShapeFigure(_shape_text(report.shape), best.gflops, best.remeasured_ms, "re-measured")
    return _explained(
        report,
        {"kind": "file", "path": str(Path(source).resolve())},
        f"{Path(source).name}: {report.workload} {own.shape_text} {report.dtype}",
        runs,
        [own],
        None,
        "a schedule file carries no predictions to judge the cost model by",
    )


def _of_session(
    store: Store,
    session_id: int,
    runs: int,
    shapes: str | None,
    on_progress: ProgressFn | None,
    is_cancelled: CancelFn | None,
) -> JitterReport:
    from tunelab.core.usecases.validation import validate_and_store

    n_shapes = [0]

    def on_shapes(shape_list: list[dict[str, int]], _rule: Any) -> None:
        n_shapes[0] = len(shape_list)
        if on_progress is not None:
            on_progress(0, len(shape_list), f"carrying the best schedule over to {len(shape_list)} shape(s)")

    done = [0]

    def on_row(row: Any) -> None:
        done[0] += 1
        if on_progress is not None:
            on_progress(done[0], n_shapes[0], f"shape {row.shape_text}: {row.status}")

    outcome = validate_and_store(
        store,
        session_id,
        top_k=1,
        runs=runs,
        shapes=shapes,
        on_progress=on_progress,
        on_shapes=on_shapes,
        on_row=on_row,
        is_cancelled=is_cancelled,
    )
    if outcome.cancelled or outcome.report is None:
        raise ValidationCancelled("the jitter report was stopped; nothing was stored")
    report = outcome.report
    record = store.session(session_id)
    figures = _session_shapes(store, session_id, report, outcome.across)
    bias, why = _bias(store, session_id)
    best = report.best
    return _explained(
        report,
        {"kind": "session", "session_id": session_id},
        f"session {session_id} ({record.name}), {best.label}: {report.workload} "
        f"{_shape_text(report.shape)} {report.dtype}",
        runs,
        figures,
        bias,
        why,
    )


def _explained(
    report: ValidationReport,
    source: dict[str, Any],
    label: str,
    runs: int,
    shapes: list[ShapeFigure],
    bias: list[ShapeBias] | None,
    no_bias_reason: str,
) -> JitterReport:
    best = report.best
    return explain(
        best.measurements,
        source=source,
        label=label,
        runs_asked=runs,
        recorded_ms=best.recorded_ms,
        recorded_quiet=best.recorded_disturbance is None,
        recorded_disturbance=best.recorded_disturbance,
        layout_ms=best.layout_ms or None,
        shapes=shapes,
        bias=bias,
        no_bias_reason=no_bias_reason,
        validation_id=report.id,
    )


def _session_shapes(
    store: Store, session_id: int, report: ValidationReport, across: AcrossShapes | None
) -> list[ShapeFigure]:
    """The schedule's efficiency per shape: with other shapes, the tuned shape and those measured in
    the same in-process run (one method for all); else the re-measured figure. A session tuning
    several shapes adds each other task's best as it recorded it."""
    best = report.best
    own_text = _shape_text(report.shape)
    if across is not None:
        figures = [
            ShapeFigure(
                own_text, across.source.gflops, across.source.latency_ms, "carried over: its own shape"
            )
        ]
        figures += [
            ShapeFigure(
                r.shape_text,
                r.gflops if r.status == "ok" else None,
                r.latency_ms,
                "carried over",
                error=None if r.status == "ok" else (r.error or r.status),
            )
            for r in across.rows
        ]
    else:
        figures = [ShapeFigure(own_text, best.gflops, best.remeasured_ms, "re-measured")]
    seen = {f.shape_text for f in figures}
    tasks = store.tasks(session_id)
    if len(tasks) > 1:
        trials = [t for t in store.trials(session_id) if t.ok and t.latency_ms]
        for task in tasks:
            text = _shape_text(dict(task.shape))
            mine = [
                t.latency_ms
                for t in trials
                if t.task_id == task.id or (t.task_id is None and task.index == 0)
            ]
            if text in seen or not mine:
                continue
            ms = min(x for x in mine if x is not None)
            figures.append(
                ShapeFigure(text, float(task.flops) / (ms * 1e-3) / 1e9, ms, "tuned by the session")
            )
            seen.add(text)
    return figures


def _bias(store: Store, session_id: int) -> tuple[list[ShapeBias] | None, str]:
    """The cost model's bias per shape of the session; [] when it made no prediction."""
    from tunelab.core.trust.bias import bias_report_by_task

    report = bias_report_by_task(store, [session_id])
    if report.n == 0:
        return [], "no predictions"
    groups = [g for g in report.groups if g.dimension == "shape"] or [
        g for g in report.groups if g.dimension == "all"
    ]
    return [ShapeBias(g.label, g.n, g.ratio, g.biased) for g in groups], ""

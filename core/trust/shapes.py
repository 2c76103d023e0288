"""Across shapes: how a schedule tuned for one shape does on other shapes of the same workload.

``across_shapes(store, session_id, "M=1,4,16,64")`` takes the session's best (or a chosen) trial,
carries its config over to each shape (:func:`transfer_config`), builds and measures the result
with correctness checked, and sets it against the schedule tuned for exactly that shape when the
store holds one (same workload, shape, dtype and target kind).

Shape lists (:func:`parse_shapes`): groups separated by ``;``; in a group ``NAME=values`` items
separated by commas, where bare values continue the previous name's list, and every parameter not
named keeps the tuned (base) shape's value. Several varied names in one group give every
combination. A value is an integer, ``A..B`` (A, 2A, 4A, ... up to B) or ``A:B[:STEP]`` (A to B
inclusive, step 1 by default). A group may also be a preset name of the workload.

    "M=1,4,16,64"                       -> M in 1, 4, 16, 64 (N, K as tuned)
    "M=64,N=64,K=64;M=128,N=128,K=128"  -> two full shapes
    "M=16..128"                         -> M in 16, 32, 64, 128
    "M=16,32,N=8,16"                    -> four shapes (M x N)

Falls-off rule (:func:`judge`): a shape falls off when the transferred schedule is more than
``MAX_RATIO`` (1.25) times slower than the schedule tuned for that shape (when the store has one),
or when its GFLOP/s is below ``MIN_GFLOPS_FRACTION`` (50 %) of the GFLOP/s the schedule reaches on
the shape it was tuned for (measured in the same run). A shape where the schedule cannot be carried
over, built, or gives a wrong result falls off too.

Results are frozen records (:mod:`tunelab.core.trust.shape_report`: an :class:`AcrossShapes` of
:class:`ShapeRow`); nothing is stored here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from tunelab.core.errors import StoreError, TargetError, TunelabError, WorkloadError
from tunelab.core.records import Config, MeasureOptions
from tunelab.core.stats import median
from tunelab.core.trust.shape_lists import MAX_SHAPES, parse_shapes
from tunelab.core.trust.shape_report import AcrossShapes, ShapeRow, SourceFigures
from tunelab.core.trust.shape_rule import MAX_RATIO, MIN_GFLOPS_FRACTION, falls_off_rule, judge, summarize
from tunelab.core.trust.shape_transfer import changed_knobs, nearest_factors, space_for_shape, transfer_config
from tunelab.core.workloads.base import format_shape
from tunelab.core.workloads.catalog import get_workload

__all__ = [
    "MAX_RATIO",
    "MIN_GFLOPS_FRACTION",
    "MAX_SHAPES",
    "parse_shapes",
    "space_for_shape",
    "nearest_factors",
    "transfer_config",
    "falls_off_rule",
    "judge",
    "summarize",
    "checked_shapes",
    "across_shapes",
]


def _gflops(flops: float, ms: float | None) -> float | None:
    return flops / (ms * 1e-3) / 1e9 if ms else None


def checked_shapes(record: Any, shapes: str | Sequence[Mapping[str, Any]]) -> list[dict[str, int]]:
    """The shapes that :func:`across_shapes` would measure session `record`'s schedule on, checked
    without measuring anything: a target this machine cannot run is refused first (before any of the
    workload's code runs), then `shapes` (a shape-list text, :func:`parse_shapes`, based on the
    session's shape, or shape dicts) are read and each is checked to fit in memory."""
    from tunelab.core.target.info import target_from_json

    target = target_from_json(record.target)
    if not target.can_run:  # refused before any workload code runs or anything is measured
        raise TargetError(
            f"session {record.id} was tuned for {target.description}, which cannot run on this "
            f"machine: {target.why_not}; nothing was measured or stored"
        )
    workload = get_workload(record.workload, record.custom_source)
    if isinstance(shapes, str):
        shape_list = parse_shapes(workload, shapes, record.shape)
    else:
        shape_list = []
        for s in shapes:
            parsed = workload.parse_shape({**record.shape, **dict(s)})
            if parsed not in shape_list:
                shape_list.append(parsed)
        if not shape_list:
            raise WorkloadError(f"{workload.name}: give at least one shape")
    for shape in shape_list:
        workload.check_memory(shape, record.dtype)
    return shape_list


def _tuned_session(store: Any, record: Any, shape: dict[str, int]) -> Any:
    """The best finished-or-not session tuned for exactly this problem with a successful trial."""
    best = None
    for other in store.sessions():
        if (
            other.workload != record.workload
            or other.dtype != record.dtype
            or other.best_ms is None
            or other.target_kind != record.target_kind
            or other.shape != shape
            or other.custom_source != record.custom_source
        ):
            continue
        if best is None or other.best_ms < best.best_ms:
            best = other
    return best


def _latency(result: Any) -> float | None:  # as the store computes a trial's latency
    return median(result.samples_ms) if result.status == "ok" else None


def _carried_trial(store: Any, session_id: int, trial_id: int | None) -> Any:
    """The session's best trial, or its successful trial ``trial_id``."""
    if trial_id is None:
        trial = store.best_trial(session_id)
        if trial is None:
            raise StoreError(f"session {session_id} has no successful trial to carry over to other shapes")
        return trial
    trial = store.trial(trial_id)
    if trial.session_id != session_id:
        raise StoreError(f"trial {trial_id} belongs to session {trial.session_id}, not {session_id}")
    if not trial.ok:
        raise StoreError(f"trial {trial_id} failed ({trial.status}); pick a successful trial")
    return trial


@dataclass
class _Carrier:
    """One trial's schedule carried to other shapes, each measured beside the schedule tuned for it."""

    store: Any
    record: Any
    trial: Any
    workload: Any
    target: Any
    opts: MeasureOptions
    space_from: Any
    source_schedule: Any

    def measure(self, shape: dict[str, int], schedules: list[Any]) -> list[Any]:
        from tunelab.core.measure.runner import Measurer, Problem

        record = self.record
        measurer = Measurer(
            Problem(self.workload, shape, record.dtype, self.target), self.opts, seed=record.seed
        )
        try:
            return measurer.measure(schedules)
        finally:
            measurer.close()

    def carried(self, shape: dict[str, int]) -> tuple[str, str | None, Config | None, Any]:
        """(status, error, config, schedule) of the trial's config carried over to ``shape``."""
        from tunelab.core.search.space.tvm_context import InvalidSchedule

        status, error, config, schedule = "ok", None, None, None
        if shape == dict(self.record.shape):
            return status, error, self.trial.config, self.source_schedule
        try:
            space_to = space_for_shape(self.space_from, shape)
            config = transfer_config(self.space_from, self.trial.config, space_to)
            if config is None:
                status, error = "untransferable", "the config has no counterpart at this shape"
            else:
                schedule = space_to.schedule(config)
        except (InvalidSchedule, TunelabError) as exc:
            status = "invalid"
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return status, error, config, schedule

    def tuned(self, shape: dict[str, int]) -> tuple[Any, Any, Any]:
        """(session, best trial, its schedule) tuned for exactly ``shape``, each None where there is none."""
        from tunelab.core.search.space.factory import space_for_session
        from tunelab.core.search.space.tvm_context import InvalidSchedule

        tuned = _tuned_session(self.store, self.record, shape)
        tuned_trial = self.store.best_trial(tuned.id) if tuned is not None else None
        tuned_schedule = None
        if tuned_trial is not None:
            try:
                tuned_schedule = space_for_session(tuned).schedule(tuned_trial.config)
            except (InvalidSchedule, TunelabError):
                tuned_schedule = None
        return tuned, tuned_trial, tuned_schedule

    def row(self, shape: dict[str, int]) -> ShapeRow:
        """The carried schedule measured on ``shape`` (with the shape's tuned one, unless the same), unjudged."""
        import tvm_ffi

        flops = float(self.workload.flops(shape))
        status, error, config, schedule = self.carried(shape)
        tuned, tuned_trial, tuned_schedule = self.tuned(shape)
        same = (
            schedule is not None
            and tuned_schedule is not None
            and tvm_ffi.structural_equal(schedule.mod, tuned_schedule.mod)
        )
        schedules = [s for s in (schedule, None if same else tuned_schedule) if s is not None]
        results = self.measure(shape, schedules) if schedules else []
        samples: tuple[float, ...] = ()
        latency_ms = None
        if schedule is not None:
            res = results[0]
            status, error = res.status, res.error
            samples, latency_ms = tuple(res.samples_ms), _latency(res)
        tuned_ms = None
        if tuned is not None:
            measured = latency_ms if same else (_latency(results[-1]) if tuned_schedule is not None else None)
            tuned_ms = measured if measured is not None else tuned.best_ms
        return ShapeRow(
            shape=shape,
            shape_text=format_shape(shape),
            status=status,
            error=error,
            config=config,
            changed=tuple(changed_knobs(self.trial.config, config)) if config is not None else (),
            latency_ms=latency_ms,
            samples_ms=samples,
            gflops=_gflops(flops, latency_ms),
            tuned_session_id=tuned.id if tuned is not None else None,
            tuned_trial_id=tuned_trial.id if tuned_trial is not None else None,
            tuned_ms=tuned_ms,
            tuned_stored_ms=tuned.best_ms if tuned is not None else None,
            tuned_gflops=_gflops(flops, tuned_ms) if tuned is not None else None,
            ratio_to_tuned=latency_ms / tuned_ms if latency_ms is not None and tuned_ms else None,
        )


SETTLED = 1.25  # the own shape's two figures within this factor: the machine held still through the check


def _faster(a: ShapeRow, b: ShapeRow) -> ShapeRow:
    """The row whose carried schedule measured faster; noise only adds time. A failed one loses."""
    if b.latency_ms is None:
        return a
    if a.latency_ms is None or b.latency_ms < a.latency_ms:
        return b
    return a


class _RowMeasurer(Protocol):
    def row(self, shape: dict[str, int]) -> ShapeRow: ...


def _bracketed(
    carrier: _RowMeasurer, source_shape: dict[str, int], first: ShapeRow, others: dict[str, ShapeRow]
) -> tuple[ShapeRow, dict[str, ShapeRow]]:
    """The own shape measured again after the other shapes, each keeping its faster figure.

    The GFLOP/s rule and the jitter report's shape cause set the shapes against each other, so a
    neighbour busy while one of them was measured would blame a shape for the machine. Measuring
    the own shape before and after the others brackets them: where its two figures agree (within
    :data:`SETTLED`) the machine held still; where they do not, every other shape is measured once
    more too, and each keeps its faster figure."""
    again = carrier.row(source_shape)
    before, after = first.latency_ms, again.latency_ms
    # A schedule that fails on its own shape gives no bracket to read: the others stand as measured.
    settled = before is None or after is None or max(before, after) <= SETTLED * min(before, after)
    if not settled:
        others = {text: _faster(row, carrier.row(row.shape)) for text, row in others.items()}
    return _faster(first, again), others


def across_shapes(
    store: Any,
    session_id: int,
    shapes: str | Sequence[Mapping[str, Any]],
    *,
    trial_id: int | None = None,
    options: MeasureOptions | None = None,
    on_row: Callable[[ShapeRow], None] | None = None,
) -> AcrossShapes:
    """Apply a session's tuned schedule (best trial, or `trial_id`) to each shape and measure it.

    `shapes` is a shape-list text (:func:`parse_shapes`, based on the session's shape) or a list of
    shape dicts. `options` default to the session's measurement options; correctness is always
    checked. Where the store holds a session tuned for exactly a shape, its best schedule is
    measured again in the same run (``tuned_ms``; the stored value is ``tuned_stored_ms``) and
    ``ratio_to_tuned = latency_ms / tuned_ms``. The schedule is also measured on its own shape
    (``source``) for the GFLOP/s rule, before the other shapes and again after them (see
    :func:`_bracketed`: a machine that changed during the check has every shape measured twice, each
    keeping its faster figure). `on_row` is called with each row as soon as it is first measured,
    judged against the own shape's first figure; the rows returned are judged against the final one.
    """
    import tvm_ffi  # noqa: F401  (TVM loads first: without it nothing is read or measured)

    from tunelab.core.search.space.factory import space_for_session
    from tunelab.core.target.info import target_from_json

    record = store.session(session_id)
    trial = _carried_trial(store, session_id, trial_id)
    shape_list = checked_shapes(record, shapes)
    opts = options if options is not None else MeasureOptions.from_json(record.measure)
    space_from = space_for_session(record)
    carrier = _Carrier(
        store,
        record,
        trial,
        get_workload(record.workload, record.custom_source),
        target_from_json(record.target),
        replace(opts, check_correctness=True),
        space_from,
        space_from.schedule(trial.config),
    )
    source_shape = dict(record.shape)
    source_flops = float(carrier.workload.flops(source_shape))

    def reference_of(source_row: ShapeRow) -> float | None:
        if source_row.gflops is not None:
            return source_row.gflops
        return _gflops(source_flops, trial.latency_ms)  # it fails on its own shape now: the stored timing

    def judged(row: ShapeRow, reference: float | None) -> ShapeRow:
        falls_off, reasons = judge(row.ratio_to_tuned, row.gflops, reference, row.status)
        return replace(row, falls_off=falls_off, reasons=tuple(reasons))

    # The schedule on its own shape first: its GFLOP/s is the reference of the 50 % rule. Each row is
    # reported as soon as it is measured, judged against that first figure.
    source_row = carrier.row(source_shape)
    others: dict[str, ShapeRow] = {}
    for shape in shape_list:
        if shape == source_shape:
            row = source_row
        else:
            row = carrier.row(shape)
            others[row.shape_text] = row
        if on_row is not None:
            on_row(judged(row, reference_of(source_row)))
    if others:
        source_row, others = _bracketed(carrier, source_shape, source_row, others)
    reference = reference_of(source_row)
    rows = [
        judged(source_row if shape == source_shape else others[format_shape(shape)], reference)
        for shape in shape_list
    ]
    return AcrossShapes(
        session_id=session_id,
        trial_id=trial.id,
        workload=record.workload,
        dtype=record.dtype,
        target_kind=record.target_kind,
        source_shape=source_shape,
        source_config=trial.config,
        source=SourceFigures(
            latency_ms=source_row.latency_ms,
            gflops=source_row.gflops,
            status=source_row.status,
            error=source_row.error,
            reference_gflops=reference,
        ),
        rule=falls_off_rule(),
        rows=tuple(rows),
        falls_off=tuple(r.shape_text for r in rows if r.falls_off),
        summary=summarize(rows, format_shape(source_shape), reference),
    )

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

import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tunelab.core.errors import SpaceError, StoreError, TargetError, TunelabError, WorkloadError, shown
from tunelab.core.records import Config, MeasureOptions
from tunelab.core.stats import median
from tunelab.core.trust.shape_report import AcrossShapes, FallsOffRule, ShapeRow, SourceFigures
from tunelab.core.workloads.base import format_shape
from tunelab.core.workloads.catalog import get_workload

MAX_RATIO = 1.25  # slower than the shape's own tuned schedule by more than this: falls off
MIN_GFLOPS_FRACTION = 0.5  # below this fraction of the tuned shape's GFLOP/s: falls off
MAX_SHAPES = 256

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INT = re.compile(r"^[+-]?\d+$")


# ---------------------------------------------------------------------------------------- parsing


def _values(wl_name: str, name: str, text: str) -> list[int]:
    text = text.strip()
    if _INT.match(text):
        return [int(text)]
    if ".." in text:
        a, _, b = text.partition("..")
        if not (_INT.match(a.strip()) and _INT.match(b.strip())):
            raise WorkloadError(
                f"{wl_name}: cannot read {name}={shown(text)}; a doubling range is A..B, e.g. 16..128"
            )
        lo, hi = int(a), int(b)
        if lo < 1 or hi < lo:
            raise WorkloadError(f"{wl_name}: range {name}={text} needs 1 <= A <= B")
        out = []
        while lo <= hi:
            out.append(lo)
            lo *= 2
        return out
    if ":" in text:
        parts = [p.strip() for p in text.split(":")]
        if len(parts) not in (2, 3) or not all(_INT.match(p) for p in parts):
            raise WorkloadError(
                f"{wl_name}: cannot read {name}={shown(text)}; a stepped range is A:B or A:B:STEP"
            )
        lo, hi = int(parts[0]), int(parts[1])
        step = int(parts[2]) if len(parts) == 3 else 1
        if step < 1 or hi < lo:
            raise WorkloadError(f"{wl_name}: range {name}={text} needs A <= B and STEP >= 1")
        if (hi - lo) // step + 1 > MAX_SHAPES:
            raise WorkloadError(f"{wl_name}: range {name}={text} gives more than {MAX_SHAPES} values")
        return list(range(lo, hi + 1, step))
    raise WorkloadError(
        f"{wl_name}: cannot read the value {shown(text)} of {name}; write an integer, A..B or A:B:STEP"
    )


def parse_shapes(workload: Any, text: str, base: Mapping[str, Any] | None = None) -> list[dict[str, int]]:
    """The shapes a shape-list text names (see the module docstring), each full and checked.

    `workload` is a Workload or its name; `base` is the shape whose values unnamed parameters keep
    (the tuned shape; default: the workload's default shape). Duplicates are dropped, order kept.
    Bad input raises WorkloadError with a one-line message.
    """
    wl = get_workload(workload) if isinstance(workload, str) else workload
    base_shape = wl.parse_shape(dict(base) if base is not None else None)
    if not isinstance(text, str) or not text.strip():
        raise WorkloadError(
            f"{wl.name}: give at least one shape, e.g. M=16,32,64 or M=64,N=64,K=64;M=128,N=128,K=128"
        )
    shapes: list[dict[str, int]] = []
    for group in text.split(";"):
        group = group.strip()
        if not group:
            continue
        if "=" not in group and group in wl.presets:
            shapes.append(wl.parse_shape(group))
            continue
        varied: dict[str, list[int]] = {}
        current: str | None = None
        for item in group.split(","):
            item = item.strip()
            if not item:
                raise WorkloadError(f"{wl.name}: empty item in shape list {shown(group)}")
            if "=" in item:
                name, _, value = item.partition("=")
                name = name.strip()
                if not _NAME.match(name):
                    raise WorkloadError(f"{wl.name}: cannot read shape item {shown(item)}; write NAME=VALUE")
                if name not in base_shape:
                    raise WorkloadError(
                        f"{wl.name}: shape parameter '{name}' is unknown; parameters are {', '.join(wl.param_names)}"
                    )
                if name in varied:
                    raise WorkloadError(
                        f"{wl.name}: shape parameter '{name}' is given twice in {shown(group)}"
                    )
                current = name
                varied[name] = _values(wl.name, name, value)
            else:
                if current is None:
                    hint = f" or a preset ({', '.join(wl.presets)})" if wl.presets else ""
                    where = "" if item == group else f" in {shown(group)}"
                    raise WorkloadError(
                        f"{wl.name}: cannot read {shown(item)}{where}; start with NAME=VALUE{hint}"
                    )
                varied[current].extend(_values(wl.name, current, item))
        names = list(varied)
        count = math.prod(len(v) for v in varied.values())
        if count + len(shapes) > MAX_SHAPES:
            raise WorkloadError(f"{wl.name}: the shape list names more than {MAX_SHAPES} shapes")
        for values in itertools.product(*(varied[n] for n in names)):
            shapes.append(wl.parse_shape({**base_shape, **dict(zip(names, values, strict=True))}))
    if not shapes:
        raise WorkloadError(f"{wl.name}: give at least one shape, e.g. M=16,32,64")
    unique: list[dict[str, int]] = []
    for shape in shapes:
        if shape not in unique:
            unique.append(shape)
    return unique


# ----------------------------------------------------------------------------------------- spaces


def space_for_shape(space: Any, shape: Mapping[str, int]) -> Any:
    """The same space on another shape of its workload.

    Template: the same knobs; each tile knob's candidates are the default ones for the new axis
    extent plus the source's candidates that still divide it; order, unroll, vectorize, parallel,
    shared and local keep the source's candidates. Auto: the same sketch rules.
    """
    from tunelab.core.search.space.template import TemplateSpace
    from tunelab.core.search.space.wmma import KNOB_NAMES as WMMA_KNOBS

    full: dict[str, int] = space.workload.parse_shape(dict(shape))
    if space.kind == "auto":
        from tunelab.core.search.space.auto import AutoSpace

        data = {k: v for k, v in space.to_json().items() if k != "sketches"}
        return AutoSpace(space.workload, full, space.dtype, space.target, data)
    if space.kind != "template":
        raise SpaceError(f"unknown space kind {space.kind!r}")
    fresh = TemplateSpace(space.workload, full, space.dtype, space.target)
    defaults = {k["name"]: k for k in fresh.knobs}
    extents = {a.name: a.extent for a in fresh.axes}
    knobs = []
    for knob in space.knobs:
        if knob["name"] in WMMA_KNOBS and knob["name"] not in defaults:
            raise SpaceError(
                f"the source space's tensor-core knobs need i, j and k in multiples of 16; shape "
                f"{format_shape(full)} has none"
            )
        if knob["type"] == "split":
            axis = knob["axis"]
            if axis not in extents or knob["name"] not in defaults:
                raise SpaceError(
                    f"axis {axis!r} of the source space does not exist at shape {format_shape(full)}"
                )
            units = extents[axis] // int(knob.get("fragment", 1))  # wmma tiles count 16-element fragments
            cands = [list(c) for c in defaults[knob["name"]]["candidates"]]
            cands += [
                list(c) for c in knob["candidates"] if units % math.prod(c) == 0 and list(c) not in cands
            ]
            knobs.append({**knob, "candidates": cands})
        else:
            knobs.append({**knob, "candidates": list(knob["candidates"])})
    data = {**fresh.to_json(), "knobs": knobs}
    return TemplateSpace(space.workload, full, space.dtype, space.target, data)


def _log_distance(a: Sequence[int], b: Sequence[int]) -> float:
    return sum(abs(math.log2(x) - math.log2(y)) for x, y in zip(a, b, strict=True))


def nearest_factors(
    source: Sequence[int], candidates: Sequence[Sequence[int]], *, outer_first: bool
) -> list[int]:
    """The candidate closest to `source` (same length): inner factors first.

    With ``outer_first`` (auto-space tiles: ``[outer, ..., innermost]``) position 0 is the
    outermost factor, which absorbs whatever the inner ones leave of the extent, so it only breaks
    ties. Template candidates list inner factors only (``outer_first=False``). The key: the summed
    |log2| distance of the inner factors, then of the innermost, then of the outermost, then the
    smaller product (a tie between 4 and 16 for a source 8 picks 4).
    """
    src = list(source)

    def key(cand: Iterable[int]) -> tuple[float, float, float, int]:
        c = list(cand)
        inner_c, inner_s = (c[1:], src[1:]) if outer_first else (c, src)
        outer = abs(math.log2(c[0]) - math.log2(src[0])) if outer_first else 0.0
        innermost = abs(math.log2(c[-1]) - math.log2(src[-1]))
        return (
            round(_log_distance(inner_c, inner_s), 9),
            round(innermost, 9),
            round(outer, 9),
            math.prod(inner_c),
        )

    return list(min(candidates, key=key))


def _nearest_value(value: Any, candidates: Sequence[Any]) -> Any:
    """`value` itself when it is a candidate; else the numerically nearest (unroll steps); None if
    the candidates are not numbers (an order or on/off knob with that value gone)."""
    if value in candidates:
        return value
    numeric = [c for c in candidates if isinstance(c, int | float) and not isinstance(c, bool)]
    if isinstance(value, bool) or not isinstance(value, int | float) or len(numeric) != len(candidates):
        return None
    return min(numeric, key=lambda c: (abs(math.log2(c + 1) - math.log2(value + 1)), c))


def transfer_config(space_from: Any, config: Config, space_to: Any) -> Config | None:
    """Carry `config` (a point of `space_from`) over to `space_to`, the same workload on another
    shape; None when it cannot be carried over. The result validates in `space_to`.

    Template: each tile knob keeps its inner factors when they are a candidate of the new axis
    (they divide the new extent), else takes the nearest candidate (:func:`nearest_factors`);
    order, vectorize, parallel, shared and local keep their values (None if the value is not a
    candidate of `space_to`), unroll keeps its step or takes the nearest one.
    Auto: the same sketch index when `space_to` has a sketch with the same sampling instructions
    there (else the first sketch with the same structure), each tile decision re-factorised to the
    new extent keeping the inner factors where possible, each categorical decision (an index) kept
    (clamped to the candidates), compute locations as the new sketch has them.
    """
    if space_from.kind != space_to.kind:
        return None
    try:
        space_from.check_config(config)
    except SpaceError:
        return None
    if space_to.kind == "template":
        out = _transfer_template(space_from, config, space_to)
    elif space_to.kind == "auto":
        out = _transfer_auto(space_from, config, space_to)
    else:
        return None
    if out is None:
        return None
    try:
        space_to.check_config(out)
    except SpaceError:
        return None
    return out


def _transfer_template(space_from: Any, config: Config, space_to: Any) -> Config | None:
    out: Config = {}
    for knob in space_to.knobs:
        name = knob["name"]
        if name not in config:
            return None
        value = config[name]
        if knob["type"] == "split":
            if not isinstance(value, list) or len(value) != len(knob["candidates"][0]):
                return None
            out[name] = (
                list(value)
                if value in knob["candidates"]
                else nearest_factors(value, knob["candidates"], outer_first=False)
            )
        else:
            mapped = _nearest_value(value, knob["candidates"])
            if mapped is None:
                return None
            out[name] = mapped
    return out


def _transfer_auto(space_from: Any, config: Config, space_to: Any) -> Config | None:
    # A "parallel" limit is not carried: which loops it fuses depends on the source shape's extents,
    # so the target sketch's own limit (MetaSchedule's cores x jobs per core) is the fair default.
    source = space_from.sketches[config["sketch"]]
    kinds = [i.kind.name for i in source.insts]

    def same_kinds(sketch: Any) -> bool:
        return [i.kind.name for i in sketch.insts] == kinds and len(sketch.candidates) == len(
            source.candidates
        )

    index = config["sketch"]
    order = ([index] if index < len(space_to.sketches) else []) + [
        i for i in range(len(space_to.sketches)) if i != index
    ]
    # Same index with the same structure first, then any sketch with an equal signature, then any
    # sketch with the same sampling instructions.
    chosen = None
    for test in (lambda s: s.signature == source.signature, same_kinds):
        for i in order:
            if same_kinds(space_to.sketches[i]) and test(space_to.sketches[i]):
                chosen = i
                break
        if chosen is not None:
            break
    if chosen is None:
        return None
    target = space_to.sketches[chosen]
    decisions: list[Any] = []
    for value, cands, base in zip(config["decisions"], target.candidates, target.base_decisions, strict=True):
        if cands is None:
            decisions.append(base)
        elif isinstance(value, list):
            if not cands or not isinstance(cands[0], list) or len(cands[0]) != len(value):
                return None
            decisions.append(
                list(value) if value in cands else nearest_factors(value, cands, outer_first=True)
            )
        else:
            if not isinstance(value, int):
                return None
            decisions.append(min(max(value, min(cands)), max(cands)))
    return {"sketch": chosen, "decisions": decisions}


# ----------------------------------------------------------------------------------------- judging


def falls_off_rule() -> FallsOffRule:
    """The limits :func:`judge` applies, as :func:`across_shapes` reports them (``rule``)."""
    return FallsOffRule(max_ratio_to_tuned=MAX_RATIO, min_gflops_fraction=MIN_GFLOPS_FRACTION)


def judge(
    ratio_to_tuned: float | None, gflops: float | None, reference_gflops: float | None, status: str = "ok"
) -> tuple[bool, list[str]]:
    """(falls_off, reasons) for one shape under the module's rule.

    A failed shape (status other than "ok") always falls off. Otherwise it falls off when
    ``ratio_to_tuned > MAX_RATIO`` or ``gflops < MIN_GFLOPS_FRACTION * reference_gflops``
    (the tuned shape's GFLOP/s); a missing number skips its test.
    """
    if status != "ok":
        return True, [f"the schedule does not work here ({status})"]
    reasons = []
    if ratio_to_tuned is not None and ratio_to_tuned > MAX_RATIO:
        reasons.append(f"{ratio_to_tuned:.2f}x slower than the schedule tuned for this shape")
    if gflops is not None and reference_gflops and gflops < MIN_GFLOPS_FRACTION * reference_gflops:
        reasons.append(
            f"{gflops:.1f} GFLOP/s is {gflops / reference_gflops:.0%} of the "
            f"{reference_gflops:.1f} GFLOP/s on the tuned shape"
        )
    return bool(reasons), reasons


def summarize(rows: Sequence[ShapeRow], source_shape_text: str, reference_gflops: float | None = None) -> str:
    """One sentence: which shapes fall off (and why, briefly)."""
    if not rows:
        return f"No shapes were checked against the schedule tuned for {source_shape_text}."
    off = [r for r in rows if r.falls_off]
    if not off:
        return f"The schedule tuned for {source_shape_text} holds up on all {len(rows)} shape(s)."

    def why(r: ShapeRow) -> str:
        if r.status != "ok":
            return f"{r.shape_text} ({r.status})"
        if r.ratio_to_tuned is not None and r.ratio_to_tuned > MAX_RATIO:
            return f"{r.shape_text} ({r.ratio_to_tuned:.2f}x its tuned schedule)"
        gflops = r.gflops or 0.0
        share = f", {gflops / reference_gflops:.0%} of the tuned shape's" if reference_gflops else ""
        return f"{r.shape_text} ({gflops:.1f} GFLOP/s{share})"

    held = len(rows) - len(off)
    tail = f"; it holds up on the other {held}" if held else ""
    return (
        f"The schedule tuned for {source_shape_text} falls off on {len(off)} of {len(rows)} shape(s): "
        + ", ".join(why(r) for r in off)
        + tail
        + "."
    )


# ----------------------------------------------------------------------------------------- measuring


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
    (``source``) for the GFLOP/s rule. `on_row` is called with each row as soon as it is measured
    and judged.
    """
    import tvm_ffi

    from tunelab.core.measure.runner import Measurer
    from tunelab.core.search.space.factory import space_for_session
    from tunelab.core.search.space.tvm_context import InvalidSchedule
    from tunelab.core.target.info import target_from_json

    record = store.session(session_id)
    if trial_id is None:
        trial = store.best_trial(session_id)
        if trial is None:
            raise StoreError(f"session {session_id} has no successful trial to carry over to other shapes")
    else:
        trial = store.trial(trial_id)
        if trial.session_id != session_id:
            raise StoreError(f"trial {trial_id} belongs to session {trial.session_id}, not {session_id}")
        if not trial.ok:
            raise StoreError(f"trial {trial_id} failed ({trial.status}); pick a successful trial")
    shape_list = checked_shapes(record, shapes)
    target = target_from_json(record.target)
    workload = get_workload(record.workload, record.custom_source)
    opts = options if options is not None else MeasureOptions.from_json(record.measure)
    opts = replace(opts, check_correctness=True)
    space_from = space_for_session(record)
    source_shape = dict(record.shape)

    def measure(shape: dict[str, int], schedules: list[Any]) -> list[Any]:
        measurer = Measurer(
            workload, shape, record.dtype, target, opts, seed=record.seed, custom_source=record.custom_source
        )
        try:
            return measurer.measure(schedules)
        finally:
            measurer.close()

    def latency(result: Any) -> float | None:  # as the store computes a trial's latency
        return median(result.samples_ms) if result.status == "ok" else None

    source_schedule = space_from.schedule(trial.config)

    def measure_row(shape: dict[str, int]) -> ShapeRow:
        status, error, config, schedule = "ok", None, None, None
        flops = float(workload.flops(shape))
        if shape == source_shape:
            config, schedule = trial.config, source_schedule
        else:
            try:
                space_to = space_for_shape(space_from, shape)
                config = transfer_config(space_from, trial.config, space_to)
                if config is None:
                    status, error = "untransferable", "the config has no counterpart at this shape"
                else:
                    schedule = space_to.schedule(config)
            except (InvalidSchedule, TunelabError) as exc:
                status = "invalid"
                error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        tuned = _tuned_session(store, record, shape)
        tuned_trial = store.best_trial(tuned.id) if tuned is not None else None
        tuned_schedule = None
        if tuned_trial is not None:
            try:
                tuned_schedule = space_for_session(tuned).schedule(tuned_trial.config)
            except (InvalidSchedule, TunelabError):
                tuned_schedule = None
        same = (
            schedule is not None
            and tuned_schedule is not None
            and tvm_ffi.structural_equal(schedule.mod, tuned_schedule.mod)
        )
        schedules = [s for s in (schedule, None if same else tuned_schedule) if s is not None]
        results = measure(shape, schedules) if schedules else []
        samples: tuple[float, ...] = ()
        latency_ms = None
        if schedule is not None:
            res = results[0]
            status, error = res.status, res.error
            samples, latency_ms = tuple(res.samples_ms), latency(res)
        tuned_ms = None
        if tuned is not None:
            measured = latency_ms if same else (latency(results[-1]) if tuned_schedule is not None else None)
            tuned_ms = measured if measured is not None else tuned.best_ms
        return ShapeRow(
            shape=shape,
            shape_text=format_shape(shape),
            status=status,
            error=error,
            config=config,
            changed=tuple(_changed(trial.config, config)) if config is not None else (),
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

    # The schedule on its own shape first: its GFLOP/s is the reference of the 50 % rule.
    source_row = measure_row(source_shape)
    reference = source_row.gflops
    if reference is None:  # it fails on its own shape now: fall back on the stored timing
        reference = _gflops(float(workload.flops(source_shape)), trial.latency_ms)
    rows = []
    for shape in shape_list:
        row = source_row if shape == source_shape else measure_row(shape)
        falls_off, reasons = judge(row.ratio_to_tuned, row.gflops, reference, row.status)
        row = replace(row, falls_off=falls_off, reasons=tuple(reasons))
        rows.append(row)
        if on_row is not None:
            on_row(row)
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


def _changed(before: Config, after: Config) -> list[str]:
    if "decisions" in before and "decisions" in after:
        out = ["sketch"] if before["sketch"] != after["sketch"] else []
        out += [
            f"decision {i}"
            for i, (a, b) in enumerate(zip(before["decisions"], after["decisions"], strict=False))
            if a != b
        ]
        if before.get("parallel") != after.get("parallel"):
            out.append("parallel")
        return out
    return [k for k in after if before.get(k) != after[k]]

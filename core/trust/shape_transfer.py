"""Carrying a tuned config over to another shape: the space on that shape and the config's counterpart in it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tunelab.core.errors import SpaceError
from tunelab.core.records import Config
from tunelab.core.workloads.base import format_shape


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


def changed_knobs(before: Config, after: Config) -> list[str]:
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

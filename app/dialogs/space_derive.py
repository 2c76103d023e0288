"""A problem's search space derived off the GUI thread: a template's knobs over the axes TVM derives, an
auto space's default rules, and an auto space's size for one edit of its rules (MetaSchedule's sketches).
The space editor runs these in worker threads; each result carries the generation it was asked for."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.usecases.targets import TargetInfo


@dataclass(frozen=True)
class Problem:
    """What a space is derived for."""

    workload: Any
    shape: dict[str, int]
    dtype: str
    target: TargetInfo


@dataclass(frozen=True)
class DerivedDefaults:
    """A problem's default space as the editor shows it (made in a worker thread)."""

    generation: int
    defaults: dict[str, Any] | None = None
    axes: tuple[Any, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class DerivedSize:
    """An auto space's size for one edit of its rules (made in a worker thread)."""

    generation: int
    size: int | None = None
    sketches: int | None = None
    note: str | None = None
    error: str | None = None


def derive_defaults(generation: int, problem: Problem, kind: str) -> DerivedDefaults:
    """The default space of ``problem`` (run off the GUI thread): a template's knobs over the axes TVM
    derives from the workload's compute, or the auto space's default rules; never raises."""
    try:
        if kind == "template":
            from tunelab.core.usecases.spaces import TemplateSpace

            space = TemplateSpace(problem.workload, problem.shape, problem.dtype, problem.target, None)
            return DerivedDefaults(generation, space.to_json(), tuple(space.axes))
        from tunelab.core.usecases.spaces import default_auto_space, make_space

        if kind != "auto":
            make_space(problem.workload, problem.shape, problem.dtype, problem.target, kind)  # names the kind
        return DerivedDefaults(generation, default_auto_space(problem.target.kind))
    except TunelabError as exc:
        return DerivedDefaults(generation, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - TVM rejecting this problem is a message, not a crash
        return DerivedDefaults(generation, error=f"TVM cannot schedule this problem: {exc}")


def derive_size(generation: int, problem: Problem, data: dict[str, Any]) -> DerivedSize:
    """The size of the auto space ``data`` for ``problem``: MetaSchedule derives its sketches (run off the
    GUI thread); never raises."""
    from tunelab.core.usecases.spaces import AutoSpace

    try:
        space = AutoSpace(problem.workload, problem.shape, problem.dtype, problem.target, data)
    except TunelabError as exc:
        return DerivedSize(generation, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - MetaSchedule rejecting the rules is a message, not a crash
        return DerivedSize(generation, error=f"MetaSchedule cannot derive sketches: {exc}")
    # what "auto" packing resolved to for this shape is part of what the person is choosing
    note = space.packing.words() if space.packing is not None else None
    return DerivedSize(generation, space.size, len(space.sketches), note)


@dataclass(frozen=True)
class CheckedEdit:
    """One edit of a space as the core checked it (in a worker thread): a reason per row (None: the row
    is valid), and the space as the core takes it with its size (None for an auto space: its sketches
    are derived next), or why the whole is refused."""

    generation: int
    reasons: tuple[str | None, ...]
    data: dict[str, Any] | None = None
    size: int | None = None
    error: str | None = None


def check_knobs(
    generation: int, template: dict[str, Any], axes: list[Any], kind: str, rows: list[tuple[Any, str | None]]
) -> CheckedEdit:
    """A template's knobs as typed, checked by the core: ``rows`` holds each knob's parsed candidates and
    why its text did not parse (None: it did). Each knob is checked with the others at their defaults,
    so its reason names it alone; then the whole. Never raises."""
    from tunelab.core.usecases.spaces import check_template

    defaults = template["knobs"]
    reasons: list[str | None] = []
    for i, (value, reason) in enumerate(rows):
        if reason is None and not isinstance(value, list):
            reason = "must be a JSON list of candidates, e.g. [1, 2, 4]"
        elif reason is None:
            knobs = [*defaults[:i], {**defaults[i], "candidates": value}, *defaults[i + 1 :]]
            try:
                check_template({**template, "knobs": knobs}, axes, kind)
            except TunelabError as exc:
                reason = str(exc)
        reasons.append(reason)
    errors = [f"{d['name']}: {r}" for d, r in zip(defaults, reasons, strict=True) if r]
    if errors:
        error = errors[0] if len(errors) == 1 else f"{len(errors)} knobs are invalid; first: {errors[0]}"
        return CheckedEdit(generation, tuple(reasons), error=error)
    knobs = [{**d, "candidates": value} for d, (value, _) in zip(defaults, rows, strict=True)]
    data = {**template, "knobs": knobs}
    try:
        check_template(data, axes, kind)
    except TunelabError as exc:
        return CheckedEdit(generation, tuple(reasons), error=str(exc))
    size = math.prod(len(knob["candidates"]) for knob in knobs)
    return CheckedEdit(generation, tuple(reasons), data, size)


def check_rule_edit(
    generation: int, auto: dict[str, Any], kind: str, rows: list[tuple[dict[str, Any], str | None]]
) -> CheckedEdit:
    """An auto space's rules as typed, checked by the core: ``rows`` holds each rule as typed and why one
    of its parameters did not parse (None: they did). Each rule is checked with the others at their
    defaults, then the whole. Never raises."""
    from tunelab.core.usecases.spaces import check_rules

    defaults = auto["rules"]
    reasons: list[str | None] = []
    for i, (rule, reason) in enumerate(rows):
        if reason is None:
            try:
                check_rules({"rules": [*defaults[:i], rule, *defaults[i + 1 :]]}, kind)
            except TunelabError as exc:
                reason = str(exc)
        reasons.append(reason)
    first = next((r for r in reasons if r), None)
    if first is not None:
        return CheckedEdit(generation, tuple(reasons), error=first)
    data: dict[str, Any] = {"kind": "auto", "target_kind": kind, "rules": [rule for rule, _ in rows]}
    try:
        data["rules"] = check_rules(data, kind)
    except TunelabError as exc:
        return CheckedEdit(generation, tuple(reasons), error=str(exc))
    return CheckedEdit(generation, tuple(reasons), data)

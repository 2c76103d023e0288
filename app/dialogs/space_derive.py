"""A problem's search space derived off the GUI thread: a template's knobs over the axes TVM derives, an
auto space's default rules, and an auto space's size for one edit of its rules (MetaSchedule's sketches).
The space editor runs these in worker threads; each result carries the generation it was asked for."""

from __future__ import annotations

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

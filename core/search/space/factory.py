"""The space factory: a search space from a workload, shape and target, or rebuilt from a stored session.

One place turns a space kind ("template", "auto") and its edited JSON into a :class:`SearchSpace`, for
a new session, for resuming one, and for whatever reads a stored session's space again (export,
validation, other shapes, the space editor).
"""

from __future__ import annotations

from typing import Any

from tunelab.core.errors import SpaceError
from tunelab.core.records import SessionRecord
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.target.info import TargetInfo, target_from_json
from tunelab.core.workloads.base import format_shape
from tunelab.core.workloads.catalog import get_workload


def make_space(
    workload: Any,
    shape: dict[str, int],
    dtype: str,
    target: TargetInfo,
    kind: str,
    data: dict[str, Any] | None = None,
) -> SearchSpace:
    if kind == "template":
        from tunelab.core.search.space.template import TemplateSpace

        return TemplateSpace(workload, shape, dtype, target, data)
    if kind == "auto":
        from tunelab.core.search.space.auto import AutoSpace

        return AutoSpace(workload, shape, dtype, target, data)
    if kind == "records":  # an imported workload the catalog does not know: its records only
        from tunelab.core.search.space.records import RecordSpace

        return RecordSpace(workload, shape, dtype, target, data)
    raise SpaceError(f"unknown space {kind!r}; choose template or auto")


def task_space(
    workload: Any,
    shape: dict[str, int],
    dtype: str,
    target: TargetInfo,
    kind: str,
    data: dict[str, Any] | None,
) -> SearchSpace:
    """The space for another shape of the session: the same edits (they must fit that shape)."""
    try:
        return make_space(workload, shape, dtype, target, kind, data)
    except SpaceError as exc:
        raise SpaceError(f"for shape {format_shape(shape)}: {exc}") from None


def _space_data(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    drop = {"task_spaces"} if kind == "template" else {"task_spaces", "sketches", "packing"}
    kept = {k: v for k, v in data.items() if k not in drop}
    if kind == "auto" and kept.get("target_kind") == "llvm" and isinstance(kept.get("rules"), list):
        # A session stored before the CPU's MultiLevelTiling had pack_inputs was tuned unpacked: rebuilt
        # under today's default ("auto") its sketches, and so its configs, would be others.
        kept["rules"] = [
            {**r, "params": {**r["params"], "pack_inputs": False}}
            if isinstance(r, dict)
            and r.get("name") == "MultiLevelTiling"
            and isinstance(r.get("params"), dict)
            and "pack_inputs" not in r["params"]
            else r
            for r in kept["rules"]
        ]
    return kept


def space_for_session(record: SessionRecord) -> SearchSpace:
    """Rebuild the exact space a stored session tuned for its primary shape (resume, export, views)."""
    workload = get_workload(record.workload, record.custom_source)
    target = target_from_json(record.target)
    return make_space(
        workload,
        record.shape,
        record.dtype,
        target,
        record.space_kind,
        _space_data(record.space_kind, record.space),
    )


def space_for_task(record: SessionRecord, task: Any) -> SearchSpace:
    """The space of one stored task (a TaskRecord) of a session."""
    if task.index == 0:
        return space_for_session(record)
    workload = get_workload(record.workload, record.custom_source)
    target = target_from_json(record.target)
    data = record.space.get("task_spaces", [])[task.index - 1]
    return make_space(
        workload, task.shape, record.dtype, target, record.space_kind, _space_data(record.space_kind, data)
    )

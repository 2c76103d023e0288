"""Storing a new session from a checked spec: its name, its spaces and its tasks, refused where it cannot run."""

from __future__ import annotations

from dataclasses import replace

from tunelab.core.errors import TargetError
from tunelab.core.records import SessionSpec
from tunelab.core.search.space.factory import task_space
from tunelab.core.session.spec_check import CheckedSpec, check_measurable, extra_shapes
from tunelab.core.store import Store
from tunelab.core.workloads.base import format_shape


def store_session(store: Store, spec: SessionSpec, checked: CheckedSpec) -> int:
    """Store a session for ``spec``, which :func:`check_spec` returned ``checked`` for; its id. A target
    whose kernels cannot be measured, or a warm start from sessions that do not fit, is refused first."""
    import tvm

    workload, shape, dtype, target, space = (
        checked.workload,
        checked.shape,
        checked.dtype,
        checked.target,
        checked.space,
    )
    store.check_intact()  # nothing is written to a damaged file
    if not target.can_run and not spec.measure.remote:
        raise TargetError(
            f"{target.description}: kernels for this target can be built here but not measured"
            + (f" ({target.why_not})" if target.why_not else "")
        )
    check_measurable(target, spec.measure)  # a target whose kernels die is refused before anything is stored
    from tunelab.core.session.warm_start import check_sources

    check_sources(store, spec, workload, dtype, target, space)
    others = extra_shapes(workload, shape, spec.shapes)
    other_spaces = [task_space(workload, s, dtype, target, spec.space_kind, spec.space) for s in others]
    # A default name is the problem's, made distinct in the store ("gemm M=64,N=64,K=64 #2"): sessions
    # of one problem were listed under one name, told apart only by their ids.
    base = f"{workload.name} {format_shape(shape)}" + (f" +{len(others)} shapes" if others else "")
    taken = set() if spec.name else {r.name for r in store.sessions()}
    name = spec.name or next(
        n for n in (base, *(f"{base} #{i}" for i in range(2, len(taken) + 3))) if n not in taken
    )
    spec = replace(spec, shape=shape, shapes=tuple(others), dtype=dtype, name=name)
    space_json = space.to_json()
    if other_spaces:
        space_json["task_spaces"] = [s.to_json() for s in other_spaces]
    tasks = [(s, float(workload.flops(s))) for s in [shape, *others]]
    return store.create_session(
        spec,
        target_json=target.json,
        target_kind=target.kind,
        space_json=space_json,
        tvm_version=tvm.__version__,
        flops=float(workload.flops(shape)),
        tasks=tasks,
    )

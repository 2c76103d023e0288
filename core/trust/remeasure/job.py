"""A validation's job folder: each schedule compiled, the inputs and expected output, the worker's job file."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.core.measure.placement import DEFAULT_LAYOUT, LAYOUTS
from tunelab.core.records import MeasureOptions
from tunelab.core.trust.remeasure.build_cache import BuildCache
from tunelab.core.trust.remeasure.verdict import Problem, RecordedSchedule
from tunelab.core.trust.remeasure.worker import error_text


def prepare_job(
    problem: Problem,
    items: list[RecordedSchedule],
    options: MeasureOptions,
    folder: Path,
    builds: BuildCache | None = None,
    *,
    remote: bool = False,
) -> tuple[dict[str, Any], dict[int, str]]:
    """Compile every schedule into ``folder`` and write the worker's job file; return (job, build errors).

    ``remote``: for RPC servers, each library a ``.tar`` of the objects LLVM emitted here, which the
    server links (as MetaSchedule's builder ships a remote session's candidates), timed with each
    buffer layout as locally (tunelab.core.measure.remote_placement)."""
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.measure.runner import fast_build
    from tunelab.core.target.info import target_from_json
    from tunelab.core.workloads.catalog import get_workload

    target = target_from_json(problem.target)
    workload = get_workload(problem.workload, problem.custom_source)
    workload.vet(problem.shape, problem.dtype)  # a custom reference at this shape, in a child first
    inputs = workload.make_inputs(problem.shape, problem.dtype, problem.seed)
    expected = workload.reference(inputs, problem.shape, problem.dtype)
    paths = []
    for j, x in enumerate(inputs):
        paths.append(str(folder / f"input{j}.npy"))
        np.save(paths[-1], x)
    np.save(folder / "expected.npy", expected)
    rtol, atol = workload.tolerance(problem.dtype, problem.shape)
    errors: dict[int, str] = {}
    job_items = []
    tvm_target = target.tvm_target()
    for i, item in enumerate(items):
        lib = folder / f"schedule{i}{'.tar' if remote else '.so'}"
        build = functools.partial(fast_build, item.schedule.mod, tvm_target, None)
        try:
            if builds is None:
                build().export_library(str(lib))
            else:
                builds.export(item.schedule.mod, tvm_target, lib, build)
        except Exception as exc:  # noqa: BLE001 - a schedule that no longer builds is a result, not a crash
            errors[i] = f"build error: {error_text(exc)}"
        infos = [info.as_json() for info in ms.arg_info.ArgInfo.from_prim_func(item.schedule.mod["main"])]
        job_items.append(
            {
                "label": item.label,
                "lib": str(lib),
                "outputs": [[list(shape), dtype] for _, dtype, shape in infos[len(inputs) :]],
            }
        )
    # on a server's CPU too (tunelab.core.measure.remote_placement)
    layouts = list(LAYOUTS) if target.device_type == "cpu" else [DEFAULT_LAYOUT]
    job = {
        "device": target.device_type,
        "inputs": paths,
        "expected": str(folder / "expected.npy"),
        "rtol": rtol,
        "atol": atol,
        "check": options.check_correctness,
        "number": options.number,
        "repeat": options.repeat,
        "min_repeat_ms": options.min_repeat_ms,
        "warmup": options.warmup,
        "cache_flush": options.cache_flush,
        "items": job_items,
        # the recorded layout first (its figure is the verdict's), then the worst case (tunelab.core.measure.placement)
        "layouts": layouts,
    }
    (folder / "job.json").write_text(json.dumps(job))
    return job, errors

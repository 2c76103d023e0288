"""What an export's schedule file says: the problem, the replayable config and trace, and the figures it states."""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from tunelab.core.export.pick import CI_LEVEL
from tunelab.core.measure.placement import DEFAULT_LAYOUT
from tunelab.core.measure.threads import tvm_default_threads
from tunelab.core.store import Store

SCHEDULE_FORMAT = 1


def _trace_json(sch: Any) -> Any:
    # as_json still holds IntImm values (TVM_NOTES 5): plain numbers for json.
    return json.loads(json.dumps(sch.trace.as_json(remove_postproc=False), default=lambda o: o.value))


def schedule_doc(store: Store, record: Any, pick: Any, task: Any, sch: Any) -> dict[str, Any]:
    """The ``NAME.schedule.json`` document of the picked trial (tunelab.core.export.pick) of ``record``."""
    import tvm

    trial = pick.trial
    return {
        "tunelab_schedule": SCHEDULE_FORMAT,
        "workload": record.workload,
        "shape": task.shape,
        "dtype": record.dtype,
        "custom_source": record.custom_source,
        "target": record.target,
        "space_kind": record.space_kind,
        "space": record.space,
        "config": trial.config,
        "trace": _trace_json(sch),
        "stats": schedule_stats(store, record, pick, task.flops),
        "session": {"id": record.id, "name": record.name, "trial_id": trial.id, "tuner": record.tuner},
        "tvm_version": tvm.__version__,
        "exported_at": time.time(),
    }


def schedule_stats(store: Store, record: Any, pick: Any, flops: float) -> dict[str, Any]:
    """The figures a schedule file states. The stated one is the confirmed figure where there is one (the
    session's own figure of its winner is biased low, see tunelab.core.trust.confirm), the session's beside it."""
    trial, confirmation = pick.trial, pick.confirmation
    latency_ms = pick.stated_ms
    samples = store.samples(trial.id)
    stated = list(confirmation.samples_ms) if confirmation and confirmation.samples_ms else samples
    stats = {
        "median_ms": latency_ms,
        "source": "confirmed" if confirmation else "session",
        "session_median_ms": trial.latency_ms,
        "mean_ms": statistics.fmean(stated) if stated else trial.mean_ms,
        "std_ms": statistics.pstdev(stated) if len(stated) > 1 else trial.std_ms,
        "min_ms": min(stated, default=trial.min_ms),
        "max_ms": max(stated, default=trial.max_ms),
        "samples_ms": stated,
        "session_samples_ms": samples,
        "gflops": flops / (latency_ms * 1e-3) / 1e9 if latency_ms else None,
        "measure": record.measure,
    }
    if confirmation:
        stats["confirmed"] = {
            "runs": confirmation.runs,
            "cv": confirmation.cv,
            "run_cv": confirmation.run_cv,
            "verdict": confirmation.verdict,
            "validation_id": confirmation.validation_id,
            # what disturbed the machine while it was measured (None: quiet): a figure taken
            # on a busy machine cannot be held to, and validate says so instead of "regressed"
            "disturbance": confirmation.disturbance,
        }
        # the machine's speed then, by tunelab.core.trust.remeasure's reference kernel: a later re-measurement
        # can tell the machine drifting from the schedule changing
        stats["reference_ms"] = confirmation.reference_ms
    ci = pick.ci_ms
    stats["ci_ms"] = list(ci) if ci else None  # 95 %, bootstrap over the fresh processes' medians
    stats["ci_level"] = CI_LEVEL if ci else None
    # How it runs with its buffers placed otherwise: plain TVM's allocation (what a person's process
    # gets) and the aligned worst case beside the layout it was measured with (tunelab.core.measure.placement)
    stats["placement"] = pick.placement.to_json() if pick.placement else {"measured_with": DEFAULT_LAYOUT}
    stats["placement_sensitive"] = bool(pick.placement and pick.placement.sensitive)
    stats["picked_for"] = "worst placement (--robust)" if pick.robust else "stated figure"
    # Whether the stated figure can be held to, and why not (tunelab.core.export.pick)
    stats["untrusted_because"] = pick.untrusted_because
    stats["trusted"] = stats["untrusted_because"] is None
    # The threads the figure needs: plain TVM's pool takes half the CPUs on x86, so a library loaded
    # in a process that sets nothing ran 2x slower than the figure (tunelab.core.measure.threads)
    stats["threads"] = (
        {
            "threads": pick.kernel_threads,
            "variable": "TVM_NUM_THREADS",
            "how": pick.threads_note(),
            "tvm_default_on_export_machine": tvm_default_threads(),
        }
        if pick.kernel_threads is not None
        else None
    )
    return stats

"""The validation worker: one fresh process that loads, checks and times every compiled schedule once.

Started as ``python -m tunelab.core.trust.remeasure.worker --worker JOB.json`` by
:mod:`tunelab.core.trust.remeasure.pool` with TVM's runtime library only (``TVM_USE_RUNTIME_LIB=1``). It
says ``ready`` once TVM is imported and the inputs loaded, reads the order of the schedules from stdin,
and prints its results as one line after :data:`RESULT_MARK`. Kept light: importing it imports neither
the compiler nor the rest of tunelab's validation.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.core.faults import slow_layout
from tunelab.core.measure.placement import DEFAULT_LAYOUT, placed_tensors
from tunelab.core.measure.timing import kernel_timer, time_callable

RESULT_MARK = "TUNELAB-RESULT "
REFERENCE_SAMPLES = 5  # reference samples on each side of a kernel's window (each at least 10 ms)
PLANTED_SLOWDOWN = (
    4  # kernel calls per timed call of a layout planted as slow (TUNELAB_PLANT_FAULT=slowlayout@...)
)


def error_text(exc: BaseException) -> str:
    """One line for an exception: TVM puts the message first, a traceback puts it last."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        line = ""
    elif "Traceback" in text or len(lines) == 1:
        line = lines[-1]
    else:
        line = f"{lines[0]} ... {lines[-1]}"
    line = line if len(line) <= 300 else line[:300] + " ..."
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def wrong_result(got: np.ndarray, expected: np.ndarray, job: dict[str, Any]) -> str | None:
    """Why a kernel's output is not the NumPy reference within the job's tolerance, or None."""
    if got.shape == expected.shape and np.allclose(got, expected, rtol=job["rtol"], atol=job["atol"]):
        return None
    err = (
        float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
        if got.shape == expected.shape
        else math.nan
    )
    return f"wrong result: max abs error {err:.3g} exceeds atol {job['atol']:g} + rtol {job['rtol']:g}"


def checked_warm_calls(
    func: Any, dev: Any, args: list[Any], expected: np.ndarray, job: dict[str, Any]
) -> tuple[float, str | None]:
    """The cold call's time (ms: module init, the thread pool's start, first-touch allocation), the
    job's warm-up calls, then why the output is wrong (None: it is the reference within tolerance).
    One sequence for every place a schedule is re-measured, a local worker or a server session."""
    t = time.perf_counter()
    func(*args)
    dev.sync()
    cold_ms = (time.perf_counter() - t) * 1e3
    for _ in range(max(int(job["warmup"]) - 1, 0)):
        func(*args)
    dev.sync()
    wrong = wrong_result(args[-1].numpy(), expected, job) if job["check"] else None
    return cold_ms, wrong


def job_timer(lib: Any, dev: Any, job: dict[str, Any], entry: str) -> Any:
    """``time_evaluator`` for the library's entry with the job's measurement options (seconds per sample)."""
    return kernel_timer(
        lib,
        dev,
        number=int(job["number"]),
        repeat=int(job["repeat"]),
        min_repeat_ms=int(job["min_repeat_ms"]),
        cache_flush=bool(job["cache_flush"]),
        entry=entry,
    )


def timed_result(
    samples_s: Sequence[float],
    layout_ms: dict[str, float],
    load_ms: float,
    cold_ms: float,
    t0: float,
    t1: float,
    reference_ms: float | None = None,
    again_ms: float | None = None,
    again_t0: float | None = None,
) -> dict[str, Any]:
    """A schedule that ran and checked out, as a worker reports it (its samples in ms; ``reference_ms``:
    the reference kernel timed beside its window; ``again_ms``: its second window, begun at ``again_t0``;
    each None where it is not measured, as on an RPC server)."""
    return {
        "ok": True,
        "error": None,
        "samples_ms": [x * 1e3 for x in samples_s],
        "layout_ms": layout_ms,
        "load_ms": load_ms,
        "cold_ms": cold_ms,
        "t0": t0,
        "t1": t1,
        "reference_ms": reference_ms,
        "again_ms": again_ms,
        "again_t0": again_t0,
    }


def _worker(job_path: str) -> int:
    """One fresh process: load every library, check it, time it; print the results as one line."""
    job = json.loads(Path(job_path).read_text())
    import tvm  # with TVM_USE_RUNTIME_LIB=1: the runtime library only

    dev = tvm.device(job["device"], 0)
    inputs = [np.load(p) for p in job["inputs"]]
    expected = np.load(job["expected"])
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    order = json.loads(sys.stdin.readline())
    results = []
    for index in order:
        result = _worker_measure(tvm, dev, job, job["items"][index], inputs, expected)
        result["index"] = index
        results.append(result)
    doc = {"pid": os.getpid(), "results": results}
    sys.stdout.write(RESULT_MARK + json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


def reference_samples_ms(samples: int = REFERENCE_SAMPLES, min_sample_ms: float = 10.0) -> list[float]:
    """Samples (ms) of a fixed reference kernel, NumPy's BLAS on a 256^3 float32 product (one BLAS thread
    in a worker: two threads on a small product make a noisy ruler). Timed beside every kernel's window in
    every validation run and confirmation, it tells "the machine got slower" (other tenants of a virtual
    machine's host, clock limits: things no process list shows) from "the schedule got slower"."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    return time_callable(lambda: a @ b, number=1, repeat=samples, min_repeat_ms=min_sample_ms, warmup=3)


def _worker_measure(
    tvm: Any,
    dev: Any,
    job: dict[str, Any],
    item: dict[str, Any],
    inputs: list[np.ndarray],
    expected: np.ndarray,
) -> dict[str, Any]:
    try:
        t = time.perf_counter()
        lib = tvm.runtime.load_module(item["lib"])
        entry = getattr(lib, "entry_name", None) or "main"
        func = lib[entry]
        load_ms = (time.perf_counter() - t) * 1e3
        layouts = job.get("layouts") or [DEFAULT_LAYOUT]
        arrays = [*inputs, *(np.zeros(shape, dtype=dtype) for shape, dtype in item["outputs"])]
        args = placed_tensors(arrays, dev, layouts[0])
        cold_ms, wrong = checked_warm_calls(func, dev, args, expected, job)
        if wrong is not None:
            return {"ok": False, "error": wrong, "load_ms": load_ms, "cold_ms": cold_ms}
        timer = job_timer(lib, dev, job, entry)
        slow = slow_layout()  # a test hook: None unless TUNELAB_PLANT_FAULT names "slowlayout@<layout>"

        def timed(layout: str, tensors: list[Any]) -> list[float]:
            """Samples in seconds; a layout planted as slow is timed with the kernel run four times per call."""
            if layout != slow:
                return timer(*tensors)
            slowed = time_callable(
                lambda: [func(*tensors) for _ in range(PLANTED_SLOWDOWN)],
                number=int(job["number"]),
                repeat=int(job["repeat"]),
                min_repeat_ms=float(job["min_repeat_ms"]),
                warmup=0,
                sync=dev.sync,
            )
            return [x * 1e-3 for x in slowed]

        # The reference right before and right after the window: a machine slowed in episodes of seconds
        # (a VM's vCPU on a busy host) is caught by a reference timed within the same seconds, not by one
        # timed once per process. TVM's pool threads spin only briefly after the kernel (a worker
        # inherits the short spin count: tunelab.core.measure.threads): a reference timed right after a
        # two-thread GEMM read as one timed 0.5 s later (median ratio 1.00 over 10 pairs).
        reference_before = reference_samples_ms()
        t0 = time.time()
        samples_s = timed(layouts[0], args)
        t1 = time.time()
        reference_after = reference_samples_ms()
        reference_ms = float(statistics.median(reference_before + reference_after))
        layout_ms = {layouts[0]: float(statistics.median(samples_s)) * 1e3}
        for layout in layouts[1:]:  # the same kernel with its buffers placed otherwise: placement sensitivity
            other = placed_tensors(arrays, dev, layout)
            func(*other)
            dev.sync()
            layout_ms[layout] = float(statistics.median(timed(layout, other))) * 1e3
        # The recorded layout once more, after the other layouts, in the same process: a kernel
        # whose speed changed within its process tells a machine that moved in episodes from processes
        # that differ (tunelab.core.trust.jitter_machine).
        again_t0 = time.time()
        again_ms = float(statistics.median(timed(layouts[0], args))) * 1e3
        return timed_result(samples_s, layout_ms, load_ms, cold_ms, t0, t1, reference_ms, again_ms, again_t0)
    except Exception as exc:  # noqa: BLE001 - a crash of one kernel is reported, the others still run
        return {"ok": False, "error": f"run error: {error_text(exc)}"}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2]))
    print(
        "usage: python -m tunelab.core.trust.remeasure.worker --worker JOB.json "
        "(started by tunelab.core.trust.remeasure.pool)",
        file=sys.stderr,
    )
    sys.exit(2)

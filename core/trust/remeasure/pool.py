"""Fresh worker processes for a validation: start them, talk to them, time-box them, kill them.

``runs`` workers (:mod:`tunelab.core.trust.remeasure.worker`) each measure every schedule once, one
after another, the starting one rotating from process to process (A B C, B C A, C A B, ...), so slow
drift of the machine hits all of them alike. Workers are started (and import TVM) in a batch of
:data:`POOL_SIZE` before any of the batch's measurements, one worker measures at a time, and each
measures once and exits. Each measurement window is matched with what a
:class:`~tunelab.core.telemetry.sampler.TelemetrySampler` saw meanwhile. No worker outlives the call:
finished, failed, timed out or cancelled. Worker pipes use ``select``: POSIX only.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunelab.core.errors import Cancelled
from tunelab.core.records import MeasureOptions
from tunelab.core.trust.remeasure.report import Measurement, TelemetryWindow
from tunelab.core.trust.remeasure.worker import RESULT_MARK

WORKER_MODULE = "tunelab.core.trust.remeasure.worker"  # run as `python -m WORKER_MODULE --worker JOB`
POOL_SIZE = 8  # workers started (and importing TVM) together, before their measurements
TELEMETRY_SETTLE_S = 1.2  # psutil needs two process scans (1 s apart) before it knows who is busy

ProgressFn = Callable[[int, int, str], None]  # (runs done, runs in all, message)
CancelFn = Callable[[], bool]  # true once the caller wants the validation stopped
CANCEL_POLL_S = 0.1  # how often a wait on a worker looks at ``is_cancelled``


class ValidationCancelled(Cancelled):
    """``is_cancelled()`` turned true: every worker process was killed and nothing was stored."""

    def __init__(self, message: str = "the validation was stopped; nothing was stored") -> None:
        super().__init__(message)


def run_workers(
    job: dict[str, Any],
    folder: Path,
    n_items: int,
    runs: int,
    options: MeasureOptions,
    sampler: Any,
    on_progress: ProgressFn | None,
    *,
    is_cancelled: CancelFn | None = None,
) -> list[list[Measurement]]:
    """``runs`` fresh worker processes, each measuring every schedule once (rotated order).

    Returns one list per run with a measurement per schedule (index order). Raises
    :class:`ValidationCancelled` once ``is_cancelled()`` is true (every worker killed)."""
    out: list[list[Measurement]] = []
    names: dict[int, str] = {}
    timeout = 60.0 + options.timeout_s * n_items
    run = 0
    while run < runs:
        batch = range(run, min(runs, run + POOL_SIZE))
        procs: dict[int, subprocess.Popen] = {}
        try:
            check_cancelled(is_cancelled)
            for r in batch:
                procs[r] = _spawn(folder, r)
            ready = {r: _wait_ready(proc, folder, r, timeout, is_cancelled) for r, proc in procs.items()}
            if run == 0:
                _wait_settled(sampler)
            out.extend(
                _measure_batch(
                    batch,
                    procs,
                    ready,
                    n_items,
                    runs,
                    timeout,
                    folder,
                    sampler,
                    names,
                    on_progress,
                    is_cancelled=is_cancelled,
                )
            )
        finally:  # an error, an interrupt or a cancel leaves no worker behind
            for proc in procs.values():
                _kill(proc)
        run = batch.stop
    return out


def _measure_batch(
    batch: range,
    procs: dict[int, subprocess.Popen],
    ready: dict[int, str | None],
    n_items: int,
    runs: int,
    timeout: float,
    folder: Path,
    sampler: Any,
    names: dict[int, str],
    on_progress: ProgressFn | None,
    *,
    is_cancelled: CancelFn | None = None,
) -> list[list[Measurement]]:
    """Measure with a started batch of workers, one worker at a time; one list per run."""
    out = []
    for r in batch:
        check_cancelled(is_cancelled)
        order = [(r + j) % n_items for j in range(n_items)]
        if ready[r] is None:
            results = _talk(procs[r], order, timeout, folder, r, is_cancelled)
        else:
            results = {i: {"ok": False, "error": ready[r]} for i in order}
        per_item = []
        for i in range(n_items):
            m = results.get(i) or {"ok": False, "error": "the worker returned nothing for this schedule"}
            window = _window(sampler, m["t0"], m["t1"], names) if m.get("t0") is not None else None
            per_item.append(as_measurement(m, r, order.index(i), window))
        out.append(per_item)
        if on_progress is not None:
            on_progress(r + 1, runs, f"run {r + 1}/{runs} (pid {procs[r].pid})")
    return out


def as_measurement(m: dict[str, Any], run: int, position: int, window: TelemetryWindow | None) -> Measurement:
    """A run's result for one schedule (a worker's JSON line, a server session's result, or why there is
    none) as a record."""
    samples = m.get("samples_ms")
    return Measurement(
        run=run,
        position=position,
        pid=m.get("pid"),
        ok=bool(m.get("ok")),
        error=m.get("error"),
        load_ms=m.get("load_ms"),
        cold_ms=m.get("cold_ms"),
        samples_ms=tuple(samples) if samples is not None else None,
        t0=m.get("t0"),
        t1=m.get("t1"),
        telemetry=window,
        layout_ms=m.get("layout_ms"),
        reference_ms=m.get("reference_ms"),
        again_ms=m.get("again_ms"),
        again_t0=m.get("again_t0"),
        device=m.get("device"),
    )


def _wait_settled(sampler: Any, limit_s: float = 10.0) -> None:
    """Wait until the sampler holds a sample taken TELEMETRY_SETTLE_S after its first: by then psutil
    has scanned the processes twice and knows who else is busy (judged on the samples' own times, as
    the sampler thread may run late on a busy machine)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        samples = sampler.samples()
        if samples and samples[-1].t - samples[0].t >= TELEMETRY_SETTLE_S:
            return
        time.sleep(0.05)


def worker_processes() -> list[Any]:
    """The validation workers (``python -m tunelab.core.trust.remeasure.worker --worker``) descended from
    this process that are still there, as psutil processes: none should outlive a validation, finished,
    failed or stopped."""
    import psutil

    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = child.cmdline()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        if WORKER_MODULE in cmd and "--worker" in cmd:
            out.append(child)
    return out


def _worker_env() -> dict[str, str]:
    from tunelab.core.measure.threads import use_every_core

    env = dict(os.environ)
    # Kernels on every core, as the session measured them, whoever started this process: plain TVM
    # takes half the CPUs on x86, and a caller of the Python API (not `tunelab`, which sets it for
    # itself and its children) would re-measure every kernel about 2x slower and call it regressed.
    # A person's TVM_NUM_THREADS / OMP_NUM_THREADS stays.
    use_every_core(env)
    env["TVM_USE_RUNTIME_LIB"] = "1"  # the runtime alone: 0.5 s to import instead of 2.5 s
    # the reference kernel's BLAS on one thread (TVM reads TVM_NUM_THREADS / OMP_NUM_THREADS, not these)
    env["OPENBLAS_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    return env


def _spawn(folder: Path, run: int) -> subprocess.Popen:
    with open(folder / f"worker{run}.err", "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, "--worker", str(folder / "job.json")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=_worker_env(),
        )


def _stderr_tail(folder: Path, run: int) -> str:
    try:
        text = (folder / f"worker{run}.err").read_text(errors="replace").strip()
    except OSError:
        return ""
    return _last_line(text)


def _wait_ready(
    proc: subprocess.Popen, folder: Path, run: int, timeout: float, is_cancelled: CancelFn | None = None
) -> str | None:
    """None once the worker says it is ready; else why it never did (and it is gone). Raises
    :class:`ValidationCancelled` once ``is_cancelled()`` is true (the caller kills the workers)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\n" not in buf:
        check_cancelled(is_cancelled)
        left = deadline - time.monotonic()
        if left <= 0:
            _kill(proc)
            return f"the worker did not start within {timeout:.0f} s"
        wait = left if is_cancelled is None else min(left, CANCEL_POLL_S)
        readable, _, _ = select.select([fd], [], [], wait)
        if readable:
            chunk = os.read(fd, 4096)
            if not chunk:
                proc.wait()
                return f"the worker exited before it was ready (code {proc.returncode}): {_stderr_tail(folder, run)}"
            buf += chunk
    return None


def _talk(
    proc: subprocess.Popen,
    order: list[int],
    timeout: float,
    folder: Path,
    run: int,
    is_cancelled: CancelFn | None = None,
) -> dict[int, dict]:
    """Send the worker its order, wait for its results (index -> measurement). Raises
    :class:`ValidationCancelled` (the worker killed) once ``is_cancelled()`` is true."""
    deadline = time.monotonic() + timeout
    message: bytes | None = (json.dumps(order) + "\n").encode()
    while True:
        left = deadline - time.monotonic()
        wait = left if is_cancelled is None else min(left, CANCEL_POLL_S)
        try:
            # communicate() may be called again after a timeout (output is kept), without the input
            stdout, _ = proc.communicate(message, timeout=max(wait, 0.0))
            break
        except subprocess.TimeoutExpired:
            message = None
            if is_cancelled is not None and is_cancelled():
                _kill(proc)
                raise ValidationCancelled() from None
            if time.monotonic() >= deadline:
                _kill(proc)
                return {
                    i: {"ok": False, "error": f"timeout: the worker was killed after {timeout:.0f} s"}
                    for i in order
                }
    for line in stdout.decode(errors="replace").splitlines():
        if line.startswith(RESULT_MARK):
            doc = json.loads(line[len(RESULT_MARK) :])
            return {m["index"]: dict(m, pid=doc["pid"]) for m in doc["results"]}
    why = f"the worker died (code {proc.returncode})"
    tail = _stderr_tail(folder, run)
    return {i: {"ok": False, "error": why + (f": {tail}" if tail else "")} for i in order}


def check_cancelled(is_cancelled: CancelFn | None) -> None:
    if is_cancelled is not None and is_cancelled():
        raise ValidationCancelled()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _window(sampler: Any, t0: float, t1: float, names: dict[int, str]) -> TelemetryWindow:
    """What the machine did while one measurement ran (compact), naming the other busy processes."""
    s = sampler.summary_between(t0, t1)
    busy = list(s.get("other_busy_pids") or [])
    gpu = list(s.get("other_gpu_pids") or [])
    for pid in busy + gpu:
        if pid not in names:
            names[pid] = _process_name(pid)
    freq = s.get("cpu_freq_mhz") or {}
    load = s.get("cpu_load_mean") or {}
    return TelemetryWindow(
        n=s.get("n", 0),
        other_busy_pids=tuple(busy),
        other_gpu_pids=tuple(gpu),
        names={str(p): names[p] for p in busy + gpu},
        throttled=bool(s.get("throttled")),
        throttle_reasons=tuple(s.get("throttle_reasons") or ()),
        cpu_freq_mhz=freq.get("mean"),
        cpu_load_mean=load.get("mean"),
    )


def _process_name(pid: int) -> str:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # noqa: BLE001 - gone already, or not ours to look at
        return "exited"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else text.strip()

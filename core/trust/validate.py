"""Re-measure tuned schedules in fresh processes and say whether the session's figures hold.

``validate_session(store, id)`` takes a session's top-k trials, ``validate_schedule_file(path)`` one
exported ``*.schedule.json``. Either way:

1. Each schedule is compiled (the session's own build function) to a shared library in a temp folder;
   the workload's inputs and NumPy reference are written beside them as ``.npy`` files.
2. ``runs`` worker processes (``python -m tunelab.core.trust.validate --worker JOB``, TVM's runtime library only)
   each load every library afresh, run it on those inputs, check the output and time it with
   ``time_evaluator`` using the session's measurement options, with the buffers placed as the
   session placed them (:mod:`tunelab.core.measure.placement`; on a CPU each is timed a second time with every buffer
   at the same page offset, which tells how placement-sensitive it is). The schedules are interleaved:
   every process measures all of them, one after another, the starting one rotating from process to
   process (A B C, B C A, C A B, ...), so slow drift of the machine hits all of them alike. Workers are
   started (and import TVM) in a batch before any of the batch's measurements, one worker measures at
   a time, and each measures once and exits.
3. A :class:`~tunelab.core.telemetry.sampler.TelemetrySampler` runs meanwhile; each measurement window is matched with
   what the machine did (other busy processes, GPU throttling, clocks).
4. Each schedule gets a verdict in plain words:

   * ``stable``: the re-measured median agrees with the recorded one and the runs agree with each other;
   * ``noisy``: the runs disagree (cv above :data:`NOISY_CV`), or another process was busy (or the GPU
     throttled) during at least :data:`DISTURBED_FRACTION` of them, or the recorded figure is much
     slower than every re-measurement; the likely cause comes from the telemetry ("another process
     (pid 1234, python) was busy on the CPU during 60% of the runs", thermal throttling, power capping,
     first-run JIT/allocation cost, ...);
   * ``regressed``: the re-measured median is slower than recorded by more than :data:`REGRESS_TOL` and
     the recorded figure lies outside the re-measured interquartile range, on a quiet machine; or the
     schedule no longer builds, runs or gives the right answer. When the recorded figure is the
     session's own and other trials of the session measured at or below the re-measured figure, it is
     ``noisy`` instead, with the winner's curse as the cause: the fastest of several noisy figures is
     biased low (see :mod:`tunelab.core.trust.confirm`).

A session's trials that a confirmation (:mod:`tunelab.core.trust.confirm`) re-measured are judged against the
confirmed figure, not the session's (``against="session"`` compares with the session's own).

The report (a JSON-ready dict) is stored with :meth:`tunelab.core.store.database.Store.add_validation` so the app can
show it. Worker pipes use ``select``: POSIX only.
"""

from __future__ import annotations

import json
import math
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.errors import Cancelled, TunelabError
from tunelab.core.measure.placement import DEFAULT_LAYOUT, LAYOUTS, placed_tensors
from tunelab.core.records import MeasureOptions

if TYPE_CHECKING:
    from tunelab.core.store import Store

VERDICTS = ("stable", "noisy", "regressed")
DEFAULT_RUNS = 5  # fresh processes per validation (each measures every schedule once)
DEFAULT_TOP_K = 3
NOISY_CV = 0.10  # coefficient of variation (samples, or per-run medians) above which runs disagree
REGRESS_TOL = 0.10  # re-measured vs recorded median: beyond this (and outside the IQR) it changed
DISTURBED_FRACTION = 0.25  # share of runs with another busy process / throttling that taints them
DRIFT_TOL = 0.03  # the reference kernel moved more than this since recording: the machine itself changed
PLACEMENT_TOL = 0.05  # a kernel slower than this with its buffers placed otherwise is placement-sensitive
MAX_RIVALS = 64  # the session's figures kept per schedule to recognise a winner's curse
MIN_RUNS_TO_JUDGE = 3  # fewer runs can say "noisy" or "stable", never "regressed"
FIRST_SAMPLE_RATIO = 1.3  # first timed sample of a process vs the rest: first-run cost leaking in
POOL_SIZE = 8  # workers started (and importing TVM) together, before their measurements
TELEMETRY_SETTLE_S = 1.2  # psutil needs two process scans (1 s apart) before it knows who is busy
RESULT_MARK = "TUNELAB-RESULT "
MAX_NAMED = 6  # other processes named in a cause (the most often seen first)

ProgressFn = Callable[[int, int, str], None]  # (runs done, runs in all, message)
CancelFn = Callable[[], bool]  # true once the caller wants the validation stopped
CANCEL_POLL_S = 0.1  # how often a wait on a worker looks at ``is_cancelled``

_THERMAL = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
_POWER = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})


class ValidationCancelled(Cancelled):
    """``is_cancelled()`` turned true: every worker process was killed and nothing was stored."""

    def __init__(self, message: str = "the validation was stopped; nothing was stored") -> None:
        super().__init__(message)


@dataclass(frozen=True)
class _Item:
    """One schedule to re-measure."""

    label: str
    trial_id: int | None
    config: Any
    recorded_ms: float | None
    recorded_samples_ms: tuple[float, ...]
    recorded_telemetry: dict[str, Any] | None
    schedule: Any  # tvm Schedule
    # The session's own figure where `recorded_ms` is a fresh-process confirmation (tunelab.core.trust.confirm).
    session_ms: float | None = None
    # The session's figures of the other successful trials of its shape (fastest first, capped): when the
    # recorded figure is the session's own, they tell a winner's curse from a regression.
    rivals_ms: tuple[float, ...] = ()
    # the reference kernel's time when `recorded_ms` was measured (a confirmation or an export), if known
    recorded_reference_ms: float | None = None


@dataclass(frozen=True)
class _Problem:
    workload: str
    shape: dict[str, int]
    dtype: str
    target: dict[str, Any]
    custom_source: str | None
    seed: int
    flops: float


# ------------------------------------------------------------------------------------------ public API


def validate_session(
    store: Store,
    session_id: int,
    *,
    top_k: int = DEFAULT_TOP_K,
    runs: int = DEFAULT_RUNS,
    options: MeasureOptions | None = None,
    task: int = 0,
    record: bool = True,
    on_progress: ProgressFn | None = None,
    is_cancelled: CancelFn | None = None,
    against: str = "confirmed",
) -> dict[str, Any]:
    """Re-measure the session's ``top_k`` fastest successful trials in ``runs`` fresh processes.

    A session that tunes several shapes is validated one shape (task) at a time: ``task`` is its index
    (0, the default, is the session's primary shape).

    ``options`` default to the session's own measurement options. The report's ``shapes`` holds one
    row, the session's own shape from this validation (carrying the best schedule over to other shapes
    as well is :func:`tunelab.core.usecases.validation.validate_and_store`). With ``record`` the report
    is stored (its ``id`` is set). Bad input (unknown session, no successful trial, a target this
    machine cannot run) raises :class:`TunelabError` before anything is measured or stored.

    ``is_cancelled`` (polled between worker runs and while waiting for a worker) stops the validation:
    every worker process is killed, nothing is stored and :class:`ValidationCancelled` is raised.
    """
    _check_counts(top_k, runs)
    rec = store.session(session_id)  # before the (slow) TVM imports: bad input fails fast

    tasks = store.tasks(session_id) if hasattr(store, "tasks") else []
    if tasks and not 0 <= task < len(tasks):
        raise TunelabError(
            f"session {session_id} tunes {len(tasks)} shape(s); the task must be 0..{len(tasks) - 1}",
            option="task",
        )

    from tunelab.core.search.space.factory import space_for_session

    _refuse_foreign_target(rec.target, f"session {session_id}")  # before any of its workload's code runs
    chosen = tasks[task] if tasks else None

    def of_task(t: Any) -> bool:  # a trial stored before sessions had tasks belongs to the primary shape
        task_id = getattr(t, "task_id", None)
        return chosen is None or task_id == chosen.id or (task_id is None and task == 0)

    trials = [
        t
        for t in store.trials(session_id, with_samples=True)
        if t.ok and t.latency_ms is not None and of_task(t)
    ]
    if not trials:
        raise TunelabError(
            f"session {session_id} has no successful trial to validate"
            + (f" for shape {task}" if len(tasks) > 1 else "")
        )
    trials.sort(key=lambda t: (t.latency_ms, t.id))
    stamps = store.trial_telemetry(session_id)
    if chosen is not None and chosen.index > 0:
        from tunelab.core.search.space.factory import space_for_task

        space = space_for_task(rec, chosen)
    else:
        space = space_for_session(rec)
    if against not in ("confirmed", "session"):
        raise TunelabError(f"validate against 'confirmed' or 'session' figures, not {against!r}")
    confirmed = {}
    if against == "confirmed":
        from tunelab.core.trust.confirmed import confirmations

        confirmed = confirmations(store, session_id)
    items = [
        _item_of(
            t,
            confirmed.get(t.id),
            _compact_stamp(stamps.get(t.id)),
            space,
            tuple(x.latency_ms for x in trials[: MAX_RIVALS + top_k] if x.id != t.id)[:MAX_RIVALS],
        )
        for t in trials[:top_k]
    ]
    shape = dict(chosen.shape) if chosen is not None else dict(rec.shape)
    flops = float(chosen.flops) if chosen is not None else float(rec.flops)
    problem = _Problem(rec.workload, shape, rec.dtype, dict(rec.target), rec.custom_source, rec.seed, flops)
    opts = options or MeasureOptions.from_json(_known_options(rec.measure))
    source = {"kind": "session", "session_id": session_id, "name": rec.name, "top_k": top_k, "task": task}
    report = _validate(problem, items, runs, opts, source, on_progress, is_cancelled=is_cancelled)
    _check_cancelled(is_cancelled)
    if record:
        report["id"] = store.add_validation(report)
    return report


def validate_schedule_file(
    path: str | os.PathLike[str],
    *,
    store: Store | None = None,
    runs: int = DEFAULT_RUNS,
    options: MeasureOptions | None = None,
    on_progress: ProgressFn | None = None,
    is_cancelled: CancelFn | None = None,
    trust_custom: bool = False,
) -> dict[str, Any]:
    """Re-measure an exported schedule (``*.schedule.json``) in ``runs`` fresh processes against the
    statistics recorded in the file; stored in ``store`` when one is given. ``is_cancelled`` stops it
    as in :func:`validate_session` (:class:`ValidationCancelled`, nothing stored). A file carrying a
    custom workload's code is refused unless ``trust_custom`` (:func:`tunelab.core.export.files.load_schedule_file`);
    one built for a target this machine cannot run is refused before anything is built."""
    from tunelab.core.export.files import load_schedule_file, schedule_from_file

    _check_counts(1, runs)
    # TunelabError for a missing, corrupt or foreign file, or one whose code is not trusted, before TVM
    # is imported; a target this host cannot execute before any workload code runs.
    doc = load_schedule_file(path, trust_custom=trust_custom)
    _refuse_foreign_target(doc["target"], str(path))

    from tunelab.core.workloads.catalog import get_workload

    doc, sch = schedule_from_file(path, trust_custom=trust_custom)
    stats = doc.get("stats") or {}
    workload = get_workload(doc["workload"], doc.get("custom_source"))
    shape = {k: int(v) for k, v in doc["shape"].items()}
    session = doc.get("session") or {}
    items = [
        _Item(
            label=Path(path).name,
            trial_id=session.get("trial_id"),
            config=doc.get("config"),
            recorded_ms=stats.get("median_ms"),
            recorded_samples_ms=tuple(stats.get("samples_ms") or ()),
            recorded_telemetry=None,
            schedule=sch,
            recorded_reference_ms=stats.get("reference_ms"),
        )
    ]
    problem = _Problem(
        doc["workload"],
        shape,
        doc["dtype"],
        dict(doc["target"]),
        doc.get("custom_source"),
        int(doc.get("seed", 0)),
        float(workload.flops(shape)),
    )
    opts = options or MeasureOptions.from_json(_known_options(stats.get("measure") or {}))
    source = {"kind": "file", "path": str(Path(path).resolve()), "session": session}
    report = _validate(problem, items, runs, opts, source, on_progress, is_cancelled=is_cancelled)
    _check_cancelled(is_cancelled)
    if store is not None:
        report["id"] = store.add_validation(report)
    return report


def _refuse_foreign_target(target: dict[str, Any], what: str) -> None:
    """TargetError when this machine cannot run kernels for a stored target (another architecture, an
    mcpu whose instruction sets this CPU lacks, CUDA without a GPU): a refusal, never a verdict."""
    from tunelab.core.errors import TargetError
    from tunelab.core.target.info import target_from_json

    try:
        info = target_from_json(target)
    except Exception as exc:  # noqa: BLE001 - a target this TVM cannot parse is refused the same way
        raise TargetError(
            f"{what} names a target this tunelab cannot read ({exc}); nothing was measured"
        ) from None
    if not info.can_run:
        raise TargetError(
            f"{what} was tuned for {info.description}, which cannot run on this machine: "
            f"{info.why_not}; nothing was measured or stored"
        )


def _item_of(
    trial: Any,
    confirmation: dict[str, Any] | None,
    stamp: dict[str, Any] | None,
    space: Any,
    rivals_ms: tuple[float, ...],
) -> _Item:
    if confirmation is not None:  # judged against the confirmed figure: no selection bias to expect
        return _Item(
            label=f"trial {trial.id}",
            trial_id=trial.id,
            config=trial.config,
            recorded_ms=confirmation["median_ms"],
            recorded_samples_ms=tuple(confirmation["samples_ms"]),
            recorded_telemetry=stamp,
            schedule=space.schedule(trial.config),
            session_ms=trial.latency_ms,
            recorded_reference_ms=confirmation.get("reference_ms"),
        )
    return _Item(
        label=f"trial {trial.id}",
        trial_id=trial.id,
        config=trial.config,
        recorded_ms=trial.latency_ms,
        recorded_samples_ms=tuple(trial.samples_ms),
        recorded_telemetry=stamp,
        schedule=space.schedule(trial.config),
        rivals_ms=rivals_ms,
    )


def parse_source(text: str) -> int | Path:
    """A CLI argument as a session id (digits that are not a file's name) or a schedule file path."""
    if text.strip().isdigit() and not Path(text).is_file():
        return int(text)
    return Path(text)


def format_report(report: dict[str, Any]) -> str:
    """The report as a few lines of text for people."""
    lines = [f"{report['verdict']}: {report['summary']}"]
    for s in report["schedules"]:
        rec = _ms(s.get("recorded_ms")) + ("*" if s.get("recorded_kind") == "confirmed" else "")
        new = _ms(s.get("remeasured_ms"))
        cv = "-" if s.get("cv") is None else f"{100 * s['cv']:.1f}%"
        lines.append(
            f"  {s['label']:<28s} recorded {rec:>10s}  re-measured {new:>10s}  cv {cv:>6s}  "
            f"runs {s['runs']}  {s['verdict']}" + (f" ({s['cause']})" if s.get("cause") else "")
        )
        if s.get("placement_ratio") is not None and s["placement_ratio"] > 1 + PLACEMENT_TOL:
            lines.append(f"    {_placement_text(s)}")
        if s.get("machine_drift") is not None and abs(s["machine_drift"] - 1) > DRIFT_TOL:
            lines.append(f"    {_drift_text(s)}")
    if any(s.get("recorded_kind") == "confirmed" for s in report["schedules"]):
        lines.append(
            "  * the figure a fresh-process confirmation gave when the session finished (tunelab show)"
        )
    if report.get("ranking_holds") is not None:
        lines.append(
            "  ranking "
            + ("holds" if report["ranking_holds"] else "does not hold")
            + f": recorded {', '.join(report['recorded_order'])}; re-measured {', '.join(report['remeasured_order'])}"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the run


def _placement_text(s: dict[str, Any]) -> str:
    return (
        f"placement-sensitive: {_pct(s['placement_ratio'] - 1)} slower ({_ms(s['layout_ms']['aligned'])}) with "
        "every buffer at the same page offset, as large allocations often are (cache-set conflicts)"
    )


def _drift_text(s: dict[str, Any]) -> str:
    drift = s["machine_drift"]
    return (
        f"the machine was {_pct(abs(drift - 1))} {'slower' if drift > 1 else 'faster'} than at recording by the "
        f"reference kernel ({_ms(s['reference_ms'])} vs {_ms(s['recorded_reference_ms'])}); "
        f"{s['drift_corrected_ratio']:.2f}x recorded once that is taken out"
    )


def _check_counts(top_k: int, runs: int) -> None:
    if top_k < 1:
        raise TunelabError(
            f"the number of schedules to validate must be at least 1, not {top_k}", option="top"
        )
    if runs < 1:
        raise TunelabError(f"the number of fresh processes must be at least 1, not {runs}", option="repeats")


def _known_options(data: dict[str, Any]) -> dict[str, Any]:
    names = set(MeasureOptions.__dataclass_fields__)
    return {k: v for k, v in data.items() if k in names}


def _compact_stamp(stamp: dict[str, Any] | None) -> dict[str, Any] | None:
    if not stamp:
        return None
    return {
        k: stamp.get(k) for k in ("n", "other_busy_pids", "other_gpu_pids", "throttled", "throttle_reasons")
    }


def _validate(
    problem: _Problem,
    items: list[_Item],
    runs: int,
    options: MeasureOptions,
    source: dict[str, Any],
    on_progress: ProgressFn | None,
    *,
    is_cancelled: CancelFn | None = None,
) -> dict[str, Any]:
    from tunelab.core.telemetry.sampler import TelemetrySampler

    # Every path comes through here: a schedule for a target this host cannot execute would die of
    # SIGILL in its workers and read as "regressed".
    _refuse_foreign_target(problem.target, source.get("path") or f"session {source.get('session_id')}")
    _check_cancelled(is_cancelled)
    started = time.time()
    folder = Path(tempfile.mkdtemp(prefix="tunelab-validate-"))
    sampler = TelemetrySampler()
    try:
        job, build_errors = _prepare(problem, items, options, folder)
        _check_cancelled(is_cancelled)
        sampler.start()
        measurements = _run_workers(
            job, folder, len(items), runs, options, sampler, on_progress, is_cancelled=is_cancelled
        )
        whole = sampler.summary_between(started, time.time())
    finally:
        sampler.stop()
        shutil.rmtree(folder, ignore_errors=True)
    finished = time.time()
    schedules = [
        _judge(item, [m[i] for m in measurements], build_errors.get(i), problem)
        for i, item in enumerate(items)
    ]
    report = _summarize(problem, schedules, runs, options, source, whole)
    report["shapes"] = [_own_shape_row(problem, schedules[0])]
    report.update(
        started_at=started,
        finished_at=finished,
        elapsed_s=round(finished - started, 3),
        hostname=socket.gethostname(),
        telemetry_status=sampler.gpu_status,
    )
    return report


def _prepare(
    problem: _Problem, items: list[_Item], options: MeasureOptions, folder: Path
) -> tuple[dict[str, Any], dict[int, str]]:
    """Compile every schedule into ``folder`` and write the worker's job file; return (job, build errors)."""
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.measure.runner import fast_build
    from tunelab.core.target.info import target_from_json
    from tunelab.core.workloads.catalog import get_workload

    target = target_from_json(problem.target)
    workload = get_workload(problem.workload, problem.custom_source)
    workload.vet(problem.shape, problem.dtype)  # a custom reference at this shape, in a child first
    inputs = workload.make_inputs(problem.shape, problem.dtype, problem.seed)
    expected = workload.reference(inputs, problem.shape)
    paths = []
    for j, x in enumerate(inputs):
        paths.append(str(folder / f"input{j}.npy"))
        np.save(paths[-1], x)
    np.save(folder / "expected.npy", expected)
    rtol, atol = workload.tolerance(problem.dtype, problem.shape)
    errors: dict[int, str] = {}
    job_items = []
    for i, item in enumerate(items):
        lib = folder / f"schedule{i}.so"
        try:
            fast_build(item.schedule.mod, target.tvm_target(), None).export_library(str(lib))
        except Exception as exc:  # a schedule that no longer builds is a result, not a crash
            errors[i] = f"build error: {_error_text(exc)}"
        infos = [info.as_json() for info in ms.arg_info.ArgInfo.from_prim_func(item.schedule.mod["main"])]
        job_items.append(
            {
                "label": item.label,
                "lib": str(lib),
                "outputs": [[list(shape), dtype] for _, dtype, shape in infos[len(inputs) :]],
            }
        )
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
        "layouts": list(LAYOUTS) if target.device_type == "cpu" else [DEFAULT_LAYOUT],
    }
    (folder / "job.json").write_text(json.dumps(job))
    return job, errors


def _run_workers(
    job: dict[str, Any],
    folder: Path,
    n_items: int,
    runs: int,
    options: MeasureOptions,
    sampler: Any,
    on_progress: ProgressFn | None,
    *,
    is_cancelled: CancelFn | None = None,
) -> list[list[dict[str, Any]]]:
    """``runs`` fresh worker processes, each measuring every schedule once (rotated order).

    Returns one list per run with a measurement dict per schedule (index order). Raises
    :class:`ValidationCancelled` once ``is_cancelled()`` is true (every worker killed)."""
    out: list[list[dict[str, Any]]] = []
    names: dict[int, str] = {}
    timeout = 60.0 + options.timeout_s * n_items
    run = 0
    while run < runs:
        batch = range(run, min(runs, run + POOL_SIZE))
        procs: dict[int, subprocess.Popen] = {}
        try:
            _check_cancelled(is_cancelled)
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
) -> list[list[dict[str, Any]]]:
    """Measure with a started batch of workers, one worker at a time; one list per run."""
    out = []
    for r in batch:
        _check_cancelled(is_cancelled)
        order = [(r + j) % n_items for j in range(n_items)]
        if ready[r] is None:
            results = _talk(procs[r], order, timeout, folder, r, is_cancelled)
        else:
            results = {i: {"ok": False, "error": ready[r]} for i in order}
        per_item = []
        for i in range(n_items):
            m = results.get(i) or {"ok": False, "error": "the worker returned nothing for this schedule"}
            m["run"] = r
            m["position"] = order.index(i)
            if m.get("t0") is not None:
                m["telemetry"] = _window(sampler, m["t0"], m["t1"], names)
            per_item.append(m)
        out.append(per_item)
        if on_progress is not None:
            on_progress(r + 1, runs, f"run {r + 1}/{runs} (pid {procs[r].pid})")
    return out


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
    """The validation workers (``python -m tunelab.core.trust.validate --worker``) descended from this process that are
    still there, as psutil processes: none should outlive a validation, finished, failed or stopped."""
    import psutil

    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = child.cmdline()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        if "tunelab.core.trust.validate" in cmd and "--worker" in cmd:
            out.append(child)
    return out


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TVM_USE_RUNTIME_LIB"] = "1"  # the runtime alone: 0.5 s to import instead of 2.5 s
    # the reference kernel's BLAS on one thread (TVM reads TVM_NUM_THREADS / OMP_NUM_THREADS, not these)
    env["OPENBLAS_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    return env


def _spawn(folder: Path, run: int) -> subprocess.Popen:
    with open(folder / f"worker{run}.err", "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tunelab.core.trust.validate", "--worker", str(folder / "job.json")],
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
        _check_cancelled(is_cancelled)
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
            return {
                m["index"]: dict(m, pid=doc["pid"], reference_ms=doc.get("reference_ms"))
                for m in doc["results"]
            }
    why = f"the worker died (code {proc.returncode})"
    tail = _stderr_tail(folder, run)
    return {i: {"ok": False, "error": why + (f": {tail}" if tail else "")} for i in order}


def _check_cancelled(is_cancelled: CancelFn | None) -> None:
    if is_cancelled is not None and is_cancelled():
        raise ValidationCancelled()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _window(sampler: Any, t0: float, t1: float, names: dict[int, str]) -> dict[str, Any]:
    """What the machine did while one measurement ran (compact), naming the other busy processes."""
    s = sampler.summary_between(t0, t1)
    busy = list(s.get("other_busy_pids") or [])
    gpu = list(s.get("other_gpu_pids") or [])
    for pid in busy + gpu:
        if pid not in names:
            names[pid] = _process_name(pid)
    freq = s.get("cpu_freq_mhz") or {}
    load = s.get("cpu_load_mean") or {}
    return {
        "n": s.get("n", 0),
        "other_busy_pids": busy,
        "other_gpu_pids": gpu,
        "names": {str(p): names[p] for p in busy + gpu},
        "throttled": bool(s.get("throttled")),
        "throttle_reasons": list(s.get("throttle_reasons") or []),
        "cpu_freq_mhz": freq.get("mean"),
        "cpu_load_mean": load.get("mean"),
    }


def _process_name(pid: int) -> str:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # gone already, or not ours to look at
        return "exited"


# ------------------------------------------------------------------------------------------ verdicts


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def _cv(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return float(statistics.pstdev(values) / mean) if mean > 0 else None


def _quartiles(values: Sequence[float]) -> tuple[float, float] | None:
    if not values:
        return None
    q1, q3 = np.percentile(np.asarray(values, dtype=float), [25, 75])
    return float(q1), float(q3)


def _pct(fraction: float) -> str:
    return f"{round(100 * fraction)}%"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.1f} us" if value < 1 else f"{value:.3f} ms"


def _judge(
    item: _Item, ms: list[dict[str, Any]], build_error: str | None, problem: _Problem
) -> dict[str, Any]:
    """One schedule's figures, telemetry and verdict from its measurements (one per run)."""
    ok = [m for m in ms if m.get("ok")]
    samples = [x for m in ok for x in m["samples_ms"]]
    run_medians = [float(statistics.median(m["samples_ms"])) for m in ok]
    remeasured = _median(samples)
    quart = _quartiles(samples)
    cv, run_cv = _cv(samples), _cv(run_medians)
    windows = [m["telemetry"] for m in ms if m.get("telemetry")]
    n_win = len(windows)
    busy_runs = sum(1 for w in windows if w["other_busy_pids"])
    gpu_runs = sum(1 for w in windows if w["other_gpu_pids"])
    throttled_runs = sum(1 for w in windows if w["throttled"])
    names = {int(p): n for w in windows for p, n in w["names"].items()}
    first_ratios = [
        m["samples_ms"][0] / statistics.median(m["samples_ms"][1:])
        for m in ok
        if len(m["samples_ms"]) >= 3 and statistics.median(m["samples_ms"][1:]) > 0
    ]
    cold = [m["cold_ms"] for m in ok if m.get("cold_ms") is not None]
    recorded = item.recorded_ms
    ratio = remeasured / recorded if remeasured is not None and recorded else None
    by_layout: dict[str, list[float]] = {}
    for m in ok:
        for layout, value in (m.get("layout_ms") or {}).items():
            by_layout.setdefault(layout, []).append(value)
    layout_ms = {layout: float(statistics.median(values)) for layout, values in by_layout.items()}
    placement_ratio = (
        layout_ms["aligned"] / layout_ms[DEFAULT_LAYOUT]
        if "aligned" in layout_ms and layout_ms.get(DEFAULT_LAYOUT)
        else None
    )
    reference_ms = _median([m["reference_ms"] for m in ok if m.get("reference_ms")])
    drift = (
        reference_ms / item.recorded_reference_ms
        if reference_ms is not None and item.recorded_reference_ms
        else None
    )
    quiet = [m for m in ok if m.get("telemetry") and _quiet(m["telemetry"])]
    quiet_ms = _median([x for m in quiet for x in m["samples_ms"]])
    entry: dict[str, Any] = {
        "label": item.label,
        "trial_id": item.trial_id,
        "config": item.config,
        "recorded_ms": recorded,
        "recorded_samples_ms": list(item.recorded_samples_ms),
        "recorded_kind": "confirmed" if item.session_ms is not None else "session",
        "session_ms": item.session_ms,
        # other trials the session measured at or below this schedule's re-measured figure
        "rivals": (sum(1 for x in item.rivals_ms if x <= remeasured) if remeasured is not None else None),
        "recorded_telemetry": item.recorded_telemetry,
        "remeasured_ms": remeasured,
        "ratio": ratio,
        "mean_ms": statistics.fmean(samples) if samples else None,
        "min_ms": min(samples) if samples else None,
        "max_ms": max(samples) if samples else None,
        "q1_ms": quart[0] if quart else None,
        "q3_ms": quart[1] if quart else None,
        "cv": cv,
        "run_cv": run_cv,
        "runs": len(ok),
        "runs_tried": len(ms),
        # the runs during which telemetry saw no other busy process and no throttling
        "quiet_runs": len(quiet),
        "quiet_ms": quiet_ms,
        "quiet_ratio": quiet_ms / recorded if quiet_ms is not None and recorded else None,
        "run_medians_ms": run_medians,
        "samples_ms": samples,
        "cold_ms": _median(cold),
        "first_sample_ratio": _median(first_ratios),
        # per buffer layout (tunelab.core.measure.placement): the median of the runs' medians, and aligned / staggered
        "layout_ms": layout_ms,
        "placement_ratio": placement_ratio,
        # the reference kernel now and when the figure was recorded: > 1 means the machine itself is slower
        "reference_ms": reference_ms,
        "recorded_reference_ms": item.recorded_reference_ms,
        "machine_drift": drift,
        "drift_corrected_ratio": ratio / drift if ratio is not None and drift else None,
        "gflops": problem.flops / (remeasured * 1e-3) / 1e9 if remeasured else None,
        "throttled": throttled_runs > 0,
        "busy_fraction": busy_runs / n_win if n_win else 0.0,
        "throttled_fraction": throttled_runs / n_win if n_win else 0.0,
        "other_busy_pids": sorted({p for w in windows for p in w["other_busy_pids"]}),
        "process_names": {str(p): n for p, n in names.items()},
        "errors": [m["error"] for m in ms if not m.get("ok")],
        "measurements": [
            {
                k: m.get(k)
                for k in (
                    "run",
                    "position",
                    "pid",
                    "ok",
                    "error",
                    "load_ms",
                    "cold_ms",
                    "samples_ms",
                    "t0",
                    "t1",
                    "telemetry",
                )
            }
            for m in ms
        ],
    }
    verdict, cause = _verdict(entry, windows, names, build_error, len(ms), gpu_runs)
    entry["verdict"], entry["cause"] = verdict, cause
    return entry


def _quiet(window: dict[str, Any]) -> bool:
    return not (window["other_busy_pids"] or window["other_gpu_pids"] or window["throttled"])


def _verdict(
    e: dict[str, Any],
    windows: list[dict[str, Any]],
    names: dict[int, str],
    build_error: str | None,
    n_runs: int,
    gpu_runs: int,
) -> tuple[str, str | None]:
    if build_error:
        return "regressed", f"it no longer builds: {build_error}"
    if e["errors"]:
        failed = len(e["errors"])
        return "regressed", f"it failed in {failed} of {n_runs} runs: {e['errors'][0]}"
    disturbed = (
        e["busy_fraction"] >= DISTURBED_FRACTION
        or e["throttled_fraction"] >= DISTURBED_FRACTION
        or (windows and gpu_runs / len(windows) >= DISTURBED_FRACTION)
    )
    unstable = any(c is not None and c > NOISY_CV for c in (e["cv"], e["run_cv"]))
    recorded, ratio = e["recorded_ms"], e["ratio"]
    deviates = (
        recorded is not None
        and ratio is not None
        and abs(ratio - 1) > REGRESS_TOL
        and e["q1_ms"] is not None
        and not (e["q1_ms"] <= recorded <= e["q3_ms"])
    )
    if unstable or disturbed:
        # Runs that shared the machine with another busy process (or a throttled GPU) prove nothing
        # either way, even where the figures happen to agree: stable and regressed need a quiet machine.
        return "noisy", _noise_cause(e, windows, names)
    if deviates and e["runs"] < MIN_RUNS_TO_JUDGE:
        return "noisy", (
            f"re-measured {_ms(e['remeasured_ms'])} vs {_ms(recorded)} recorded, but {e['runs']} run(s) "
            f"are too few to tell a change from noise (use {MIN_RUNS_TO_JUDGE} or more)"
        )
    drift = e.get("machine_drift")
    if (
        deviates
        and drift is not None
        and abs(drift - 1) > DRIFT_TOL
        and abs(e["drift_corrected_ratio"] - 1) <= REGRESS_TOL
    ):
        return "noisy", (
            f"the machine itself was {_pct(abs(drift - 1))} {'slower' if drift > 1 else 'faster'} than when "
            f"the figure was recorded (a reference BLAS kernel moved by as much; other tenants of the host "
            f"or clock limits, which no process list shows): re-measured {_ms(e['remeasured_ms'])} vs "
            f"{_ms(recorded)} recorded is {e['drift_corrected_ratio']:.2f}x once that is taken out"
        )
    if deviates and ratio > 1 and e.get("rivals"):
        n = e["rivals"]
        return "noisy", (
            f"winner's curse: the session's figure {_ms(recorded)} was the luckiest of close rivals — "
            f"{n} other trial(s) of the session measured at or below the {_ms(e['remeasured_ms'])} "
            f"re-measured here ({_pct(ratio - 1)} slower), and the fastest of several noisy figures "
            "is biased low; the re-measured figure is the one to trust"
        )
    if deviates and ratio > 1:
        return "regressed", (
            f"re-measured median {_ms(e['remeasured_ms'])} is {_pct(ratio - 1)} slower than the "
            f"recorded {_ms(recorded)}, outside the re-measured IQR "
            f"[{_ms(e['q1_ms'])}, {_ms(e['q3_ms'])}], on a quiet machine"
        )
    if deviates:
        cause = (
            f"the recorded {_ms(recorded)} is {_pct(1 - ratio)} slower than every typical re-measurement "
            f"({_ms(e['remeasured_ms'])}): the session's own measurement was probably disturbed"
        )
        stamp = e.get("recorded_telemetry") or {}
        if stamp.get("other_busy_pids"):
            cause += f" (busy then: pid {', pid '.join(str(p) for p in stamp['other_busy_pids'][:3])})"
        elif stamp.get("throttled"):
            cause += f" (throttled then: {', '.join(stamp.get('throttle_reasons') or [])})"
        return "noisy", cause
    return "stable", None


def _noise_cause(e: dict[str, Any], windows: list[dict[str, Any]], names: dict[int, str]) -> str:
    """The likeliest reason the runs disagree, from the telemetry; the strongest signal first."""
    n = len(windows) or 1
    causes: list[tuple[float, str]] = []
    busy = Counter(p for w in windows for p in set(w["other_busy_pids"]))
    if busy:
        frac = sum(1 for w in windows if w["other_busy_pids"]) / n
        pids = [p for p, _ in busy.most_common(MAX_NAMED)]
        who = "; ".join(f"pid {p}, {names.get(p, 'exited')}" for p in pids)
        more = f" and {len(busy) - MAX_NAMED} more" if len(busy) > MAX_NAMED else ""
        text = (
            f"another process ({who}) was busy on the CPU"
            if len(busy) == 1
            else f"other processes ({who}{more}) were busy on the CPU"
        )
        causes.append((frac, f"{text} during {_pct(frac)} of the runs"))
    gpu = Counter(p for w in windows for p in set(w["other_gpu_pids"]))
    if gpu:
        frac = sum(1 for w in windows if w["other_gpu_pids"]) / n
        who = "; ".join(f"pid {p}, {names.get(p, 'exited')}" for p, _ in gpu.most_common(3))
        causes.append((frac, f"another process ({who}) was using the GPU during {_pct(frac)} of the runs"))
    reasons = Counter(r for w in windows if w["throttled"] for r in w["throttle_reasons"])
    if reasons:
        frac = sum(1 for w in windows if w["throttled"]) / n
        kinds = [(_THERMAL, "thermal throttling"), (_POWER, "power capping")]
        for names_set, what in kinds:
            seen = sorted(r for r in reasons if r in names_set)
            if seen:
                causes.append((frac, f"{what} ({', '.join(seen)}) during {_pct(frac)} of the runs"))
        other = sorted(r for r in reasons if not any(r in s for s, _ in kinds))
        if other:
            causes.append((frac, f"clock slowdown ({', '.join(other)}) during {_pct(frac)} of the runs"))
    if causes:
        causes.sort(key=lambda c: -c[0])
        return "; ".join(text for _, text in causes[:2])
    freqs = [w["cpu_freq_mhz"] for w in windows if w.get("cpu_freq_mhz")]
    if freqs and min(freqs) < 0.85 * max(freqs):
        return (
            f"the CPU clock varied from {min(freqs):.0f} to {max(freqs):.0f} MHz between runs "
            "(power or thermal limits)"
        )
    first = e.get("first_sample_ratio")
    if first is not None and first >= FIRST_SAMPLE_RATIO:
        return (
            f"first-run JIT/allocation cost: the first timed sample of each fresh process was {first:.1f}x the "
            f"rest (more warm-up runs would hide it)"
        )
    cold = e.get("cold_ms")
    remeasured = e.get("remeasured_ms")
    text = "run-to-run variation with nothing seen in the telemetry"
    if remeasured is not None and remeasured < 0.05:
        text += f" (a {_ms(remeasured)} kernel is near the timer's and the OS's noise floor)"
    elif cold is not None and remeasured and cold > 3 * remeasured:
        text += f" (the first call of each process took {_ms(cold)}: first-run allocation cost)"
    return text


def _summarize(
    problem: _Problem,
    schedules: list[dict[str, Any]],
    runs: int,
    options: MeasureOptions,
    source: dict[str, Any],
    whole: dict[str, Any],
) -> dict[str, Any]:
    best = schedules[0]
    verdicts = [s["verdict"] for s in schedules]
    if "regressed" in verdicts:
        lead = schedules[verdicts.index("regressed")]
    elif "noisy" in verdicts:
        lead = schedules[verdicts.index("noisy")]
    else:
        lead = best
    verdict = lead["verdict"]
    ranking = _ranking(schedules)
    if best["runs"]:
        figure = (
            f"{best['label']} re-measured {_ms(best['remeasured_ms'])} vs {_ms(best['recorded_ms'])} recorded"
            + (f" (cv {100 * best['cv']:.1f}%)" if best["cv"] is not None else "")
            + f" over {best['runs']} fresh-process runs"
        )
    else:
        figure = f"{best['label']} gave no timing in {best['runs_tried']} fresh-process runs"
    if verdict == "stable":
        summary = f"the figures hold: {figure}"
        if ranking["ranking_holds"] is False:
            summary += "; but the ranking changed"
    else:
        summary = (
            f"{lead['cause']}; {figure}" if lead is best else f"{lead['label']}: {lead['cause']}; {figure}"
        )
    if best.get("placement_ratio") is not None and best["placement_ratio"] > 1 + PLACEMENT_TOL:
        summary += f"; {_placement_text(best)}"
    if best.get("machine_drift") is not None and abs(best["machine_drift"] - 1) > DRIFT_TOL:
        summary += f"; {_drift_text(best)}"
    return {
        "source": source,
        "workload": problem.workload,
        "shape": problem.shape,
        "dtype": problem.dtype,
        "target": problem.target,
        "verdict": verdict,
        "cause": lead["cause"],
        "summary": summary,
        "recorded_ms": best["recorded_ms"],
        "remeasured_ms": best["remeasured_ms"],
        "cv": best["cv"],
        "runs": best["runs"],
        "throttled": any(s["throttled"] for s in schedules),
        "placement_ratio": best.get("placement_ratio"),
        "machine_drift": best.get("machine_drift"),
        "reference_ms": best.get("reference_ms"),
        **ranking,
        "options": {**options.to_json(), "runs": runs},
        "telemetry": {
            k: whole.get(k)
            for k in (
                "n",
                "cpu_load_mean",
                "cpu_freq_mhz",
                "cpu_temp_c",
                "gpu_temp_c",
                "gpu_power_w",
                "gpu_sm_clock_mhz",
                "throttled",
                "throttle_reasons",
                "other_busy_procs_max",
                "other_busy_pids",
                "other_gpu_pids",
            )
        },
        "schedules": schedules,
    }


def _own_shape_row(problem: _Problem, best: dict[str, Any]) -> dict[str, Any]:
    """The per-shape row of the validated shape itself (the rows ``across_shapes`` gives, in brief)."""
    text = ",".join(f"{k}={v}" for k, v in problem.shape.items())
    return {
        "shape": problem.shape,
        "shape_text": text,
        "status": "ok" if best["runs"] else "failed",
        "latency_ms": best["remeasured_ms"],
        "samples_ms": best["samples_ms"],
        "gflops": best["gflops"],
        "recorded_ms": best["recorded_ms"],
        "verdict": best["verdict"],
        "label": best["label"],
    }


def _ranking(schedules: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the recorded order holds: no pair the re-measurement clearly (IQRs apart) inverts."""
    have = [s for s in schedules if s["remeasured_ms"] is not None and s["recorded_ms"] is not None]
    recorded = [s["label"] for s in sorted(have, key=lambda s: s["recorded_ms"])]
    remeasured = [s["label"] for s in sorted(have, key=lambda s: s["remeasured_ms"])]
    if len(have) < 2:
        return {
            "recorded_order": recorded,
            "remeasured_order": remeasured,
            "ranking_holds": None,
            "kendall_tau": None,
        }
    by_rec = sorted(have, key=lambda s: s["recorded_ms"])
    holds = True
    concordant = discordant = 0
    for i, a in enumerate(by_rec):
        for b in by_rec[i + 1 :]:
            if b["q3_ms"] < a["q1_ms"]:  # the one recorded slower is now clearly faster
                holds = False
            sign = (a["remeasured_ms"] - b["remeasured_ms"]) * (a["recorded_ms"] - b["recorded_ms"])
            concordant += sign > 0
            discordant += sign < 0
    pairs = len(have) * (len(have) - 1) / 2
    tau = (concordant - discordant) / pairs if pairs else None
    return {
        "recorded_order": recorded,
        "remeasured_order": remeasured,
        "ranking_holds": holds,
        "kendall_tau": tau,
    }


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else text.strip()


def _error_text(exc: BaseException) -> str:
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


# ------------------------------------------------------------------------------------------ the worker


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
    # Before any kernel of ours: TVM's pool threads spin for a while after each parallel kernel.
    reference_ms = reference_kernel_ms()
    results = []
    for index in order:
        result = _worker_measure(tvm, dev, job, job["items"][index], inputs, expected)
        result["index"] = index
        results.append(result)
    doc = {"pid": os.getpid(), "results": results, "reference_ms": reference_ms}
    sys.stdout.write(RESULT_MARK + json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


def reference_kernel_ms(samples: int = 9, min_sample_ms: float = 10.0) -> float:
    """The median time (ms) of a fixed reference kernel, NumPy's BLAS on a 256^3 float32 product (one
    BLAS thread in a worker: two threads on a small product make a noisy ruler). Measured with every
    validation run and confirmation, it tells "the machine got slower" (other tenants of a virtual
    machine's host, clock limits: things no process list shows) from "the schedule got slower"."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    for _ in range(3):
        a @ b
    t = time.perf_counter()
    a @ b
    one = max(time.perf_counter() - t, 1e-6)
    calls = max(1, int(min_sample_ms * 1e-3 / one))
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        for _ in range(calls):
            a @ b
        times.append((time.perf_counter() - t) / calls * 1e3)
    return float(statistics.median(times))


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
        t = time.perf_counter()
        func(*args)  # the cold call: module init, thread pool start, first-touch allocation
        dev.sync()
        cold_ms = (time.perf_counter() - t) * 1e3
        for _ in range(max(int(job["warmup"]) - 1, 0)):
            func(*args)
        dev.sync()
        if job["check"]:
            got = args[-1].numpy()
            if got.shape != expected.shape or not np.allclose(
                got, expected, rtol=job["rtol"], atol=job["atol"]
            ):
                err = (
                    float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
                    if got.shape == expected.shape
                    else math.nan
                )
                return {
                    "ok": False,
                    "error": f"wrong result: max abs error {err:.3g} exceeds atol {job['atol']:g} "
                    f"+ rtol {job['rtol']:g}",
                    "load_ms": load_ms,
                    "cold_ms": cold_ms,
                }
        timer = lib.time_evaluator(
            entry,
            dev,
            number=int(job["number"]),
            repeat=int(job["repeat"]),
            min_repeat_ms=int(job["min_repeat_ms"]),
            f_preproc="cache_flush_cpu_non_first_arg" if job["cache_flush"] else "",
        )
        dev.sync()
        t0 = time.time()
        res = timer(*args)
        t1 = time.time()
        layout_ms = {layouts[0]: float(statistics.median(res.results)) * 1e3}
        for layout in layouts[1:]:  # the same kernel with its buffers placed otherwise: placement sensitivity
            other = placed_tensors(arrays, dev, layout)
            func(*other)
            dev.sync()
            layout_ms[layout] = float(statistics.median(timer(*other).results)) * 1e3
        return {
            "ok": True,
            "error": None,
            "samples_ms": [float(x) * 1e3 for x in res.results],
            "layout_ms": layout_ms,
            "load_ms": load_ms,
            "cold_ms": cold_ms,
            "t0": t0,
            "t1": t1,
        }
    except Exception as exc:  # a crash of one kernel is reported, the others still run
        return {"ok": False, "error": f"run error: {_error_text(exc)}"}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2]))
    print(
        "usage: python -m tunelab.core.trust.validate --worker JOB.json (started by tunelab.core.trust.validate)",
        file=sys.stderr,
    )
    sys.exit(2)

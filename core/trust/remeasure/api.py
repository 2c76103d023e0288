"""Re-measure tuned schedules in fresh processes and say whether the session's figures hold.

``validate_session(store, id)`` takes a session's top-k trials, ``validate_schedule_file(path)`` one
exported ``*.schedule.json``. Either way:

1. Each schedule is compiled (the session's own build function) to a shared library in a temp folder;
   the workload's inputs and NumPy reference are written beside them as ``.npy`` files.
2. ``runs`` fresh worker processes (:mod:`~tunelab.core.trust.remeasure.pool`, TVM's runtime library
   only) each load every library afresh, run it on those inputs, check the output and time it with
   ``time_evaluator`` using the session's measurement options, with the buffers placed as the
   session placed them (:mod:`tunelab.core.measure.placement`; on a CPU each is timed a second time with every buffer
   at the same page offset, which tells how placement-sensitive it is), interleaved.
3. A :class:`~tunelab.core.telemetry.sampler.TelemetrySampler` runs meanwhile; each measurement window is matched with
   what the machine did (other busy processes, GPU throttling, clocks).
4. Each schedule gets a verdict in plain words (:mod:`~tunelab.core.trust.remeasure.verdict`): stable,
   noisy or regressed, with its likely cause.

A session measured on the servers of a TVM RPC tracker is re-measured there, under its key
(:mod:`~tunelab.core.trust.remeasure.remote_pool`): each fresh process is a fresh server session, each
library a ``.tar`` the server links, no telemetry (this machine's says nothing of a server), the report
naming the servers. A tracker that does not answer is one :class:`~tunelab.core.measure.remote.RemoteError`
before anything is built.

A session's trials that a confirmation (:mod:`tunelab.core.trust.confirm`) re-measured are judged against the
confirmed figure, not the session's (``against="session"`` compares with the session's own).

The report (a :class:`~tunelab.core.trust.remeasure.report.ValidationReport`) is stored as its JSON with
:meth:`tunelab.core.store.Store.add_validation` so the app can show it.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunelab.core.errors import TunelabError
from tunelab.core.records import MeasureOptions
from tunelab.core.trust.remeasure.build_cache import BuildCache
from tunelab.core.trust.remeasure.job import prepare_job
from tunelab.core.trust.remeasure.pool import (
    CancelFn,
    ProgressFn,
    ValidationCancelled,
    check_cancelled,
    run_workers,
)
from tunelab.core.trust.remeasure.recorded import compact_stamp, file_disturbance, recorded_item
from tunelab.core.trust.remeasure.report import Measurement, ValidationReport, ValidationSource
from tunelab.core.trust.remeasure.summary import summarize
from tunelab.core.trust.remeasure.verdict import Problem, RecordedSchedule, judge

if TYPE_CHECKING:
    from tunelab.core.store import Store

__all__ = [
    "DEFAULT_RUNS",
    "DEFAULT_TOP_K",
    "CancelFn",
    "ProgressFn",
    "ValidationCancelled",
    "parse_source",
    "validate_schedule_file",
    "validate_schedules",
    "validate_session",
]

DEFAULT_RUNS = 5  # fresh processes per validation (each measures every schedule once)
DEFAULT_TOP_K = 3
MAX_RIVALS = 64  # the session's figures kept per schedule to recognise a winner's curse


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
    builds: BuildCache | None = None,
) -> ValidationReport:
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
    ``builds``: libraries already built for these schedules (a confirmation measured again).
    """
    _check_counts(top_k, runs)
    rec = store.session(session_id)  # before the (slow) TVM imports: bad input fails fast

    tasks = store.tasks(session_id)
    if tasks and not 0 <= task < len(tasks):
        raise TunelabError(
            f"session {session_id} tunes {len(tasks)} shape(s); the task must be 0..{len(tasks) - 1}",
            option="task",
        )

    opts = options or MeasureOptions.from_json(_known_options(rec.measure))
    if not opts.remote:  # a session measured on RPC servers is re-measured there
        _refuse_foreign_target(rec.target, f"session {session_id}")  # before any of its workload's code runs
    chosen = tasks[task] if tasks else None
    trials = _trials_of(store, session_id, chosen, task, len(tasks))
    items = _session_items(store, rec, chosen, trials, top_k, opts, against)
    shape = dict(chosen.shape) if chosen is not None else dict(rec.shape)
    flops = float(chosen.flops) if chosen is not None else float(rec.flops)
    problem = Problem(rec.workload, shape, rec.dtype, dict(rec.target), rec.custom_source, rec.seed, flops)
    source = ValidationSource("session", session_id=session_id, name=rec.name, top_k=top_k, task=task)
    report = validate_schedules(
        problem, items, runs, opts, source, on_progress, is_cancelled=is_cancelled, builds=builds
    )
    check_cancelled(is_cancelled)
    if record:
        report = replace(report, id=store.add_validation(report.to_json()))
    return report


def _trials_of(store: Store, session_id: int, chosen: Any, task: int, n_tasks: int) -> list[Any]:
    """The session's successful trials of shape ``task`` (``chosen``, None for a session without tasks),
    fastest first; TunelabError where there is none."""

    def of_task(t: Any) -> bool:  # a trial stored before sessions had tasks belongs to the primary shape
        task_id = t.task_id
        return chosen is None or task_id == chosen.id or (task_id is None and task == 0)

    trials = [
        t
        for t in store.trials(session_id, with_samples=True)
        if t.ok and t.latency_ms is not None and of_task(t)
    ]
    if not trials:
        raise TunelabError(
            f"session {session_id} has no successful trial to validate"
            + (f" for shape {task}" if n_tasks > 1 else "")
        )
    trials.sort(key=lambda t: (t.latency_ms, t.id))
    return trials


def _session_items(
    store: Store,
    rec: Any,
    chosen: Any,
    trials: list[Any],
    top_k: int,
    opts: MeasureOptions,
    against: str,
) -> list[RecordedSchedule]:
    """The ``top_k`` fastest ``trials`` as the validation judges them, their schedules rebuilt in the
    space of shape ``chosen``, against their confirmations' figures unless ``against`` is "session"."""
    from tunelab.core.search.space.factory import space_for_session

    session_id = rec.id
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
        recorded_item(
            t,
            confirmed.get(t.id),
            # this machine's readings during a trial measured on a server say nothing of the server
            None if opts.remote else compact_stamp(stamps.get(t.id)),
            space,
            tuple(
                x.latency_ms
                for x in trials[: MAX_RIVALS + top_k]
                if x.id != t.id and x.latency_ms is not None
            )[:MAX_RIVALS],
        )
        for t in trials[:top_k]
    ]
    return items


def validate_schedule_file(
    path: str | os.PathLike[str],
    *,
    store: Store | None = None,
    runs: int = DEFAULT_RUNS,
    options: MeasureOptions | None = None,
    on_progress: ProgressFn | None = None,
    is_cancelled: CancelFn | None = None,
    trust_custom: bool = False,
) -> ValidationReport:
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
        RecordedSchedule(
            label=Path(path).name,
            trial_id=session.get("trial_id"),
            config=doc.get("config"),
            recorded_ms=stats.get("median_ms"),
            recorded_samples_ms=tuple(stats.get("samples_ms") or ()),
            recorded_telemetry=None,
            schedule=sch,
            recorded_reference_ms=stats.get("reference_ms"),
            recorded_disturbance=file_disturbance(stats),
        )
    ]
    problem = Problem(
        doc["workload"],
        shape,
        doc["dtype"],
        dict(doc["target"]),
        doc.get("custom_source"),
        int(doc.get("seed", 0)),
        float(workload.flops(shape)),
    )
    opts = options or MeasureOptions.from_json(_known_options(stats.get("measure") or {}))
    source = ValidationSource("file", path=str(Path(path).resolve()), file_session=session)
    report = validate_schedules(problem, items, runs, opts, source, on_progress, is_cancelled=is_cancelled)
    check_cancelled(is_cancelled)
    if store is not None:
        report = replace(report, id=store.add_validation(report.to_json()))
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


def parse_source(text: str) -> int | Path:
    """A CLI argument as a session id (digits that are not a file's name) or a schedule file path."""
    if text.strip().isdigit() and not Path(text).is_file():
        return int(text)
    return Path(text)


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


def validate_schedules(
    problem: Problem,
    items: list[RecordedSchedule],
    runs: int,
    options: MeasureOptions,
    source: ValidationSource,
    on_progress: ProgressFn | None,
    *,
    is_cancelled: CancelFn | None = None,
    builds: BuildCache | None = None,
) -> ValidationReport:
    """Build, measure in fresh processes (here, or on the RPC servers of a session measured through a
    tracker: :mod:`~tunelab.core.trust.remeasure.remote_pool`), judge and summarize.

    ``items`` are schedules of one ``problem``, from one session or several: each fresh process measures
    every one of them once, in a rotated order, so schedules tuned on different days are compared on
    the same machine state (a benchmark re-measures the bests of many sessions this way)."""
    remote = options.remote
    if remote:
        # the tracker first: one sentence, before anything is built
        from tunelab.core.measure.remote import TrackerAddress, require_servers

        require_servers(TrackerAddress.parse(options.rpc_tracker), options.rpc_key)
    else:
        # Every local path comes through here: a schedule for a target this host cannot execute would
        # die of SIGILL in its workers and read as "regressed". (A server runs what it can: the
        # session's own measurement and its self-check ran there.)
        _refuse_foreign_target(problem.target, source.path or f"session {source.session_id}")
    check_cancelled(is_cancelled)
    started = time.time()
    folder = Path(tempfile.mkdtemp(prefix="tunelab-validate-"))
    whole: dict[str, Any] = {}  # the telemetry over the whole validation: none of a server
    where: str | None = None  # where it was measured, in words, when not here
    try:
        job, build_errors = prepare_job(problem, items, options, folder, builds, remote=remote)
        check_cancelled(is_cancelled)
        if remote:
            from tunelab.core.trust.remeasure.remote_pool import NO_TELEMETRY, run_on_servers

            there = run_on_servers(job, len(items), runs, options, on_progress, is_cancelled=is_cancelled)
            measurements = there.measurements
            hostname, telemetry_status, where = there.where, NO_TELEMETRY, there.sentence()
        else:
            measurements, whole, telemetry_status = _run_here(
                job, folder, len(items), runs, options, on_progress, started, is_cancelled
            )
            hostname = socket.gethostname()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    finished = time.time()
    schedules = [
        judge(item, [m[i] for m in measurements], build_errors.get(i), problem)
        for i, item in enumerate(items)
    ]
    if remote:  # no telemetry there: how many runs were quiet is unknown, not none
        schedules = [replace(s, quiet_runs=None) for s in schedules]
    report = summarize(
        problem,
        schedules,
        runs,
        options,
        source,
        whole,
        started_at=started,
        finished_at=finished,
        hostname=hostname,
        telemetry_status=telemetry_status,
    )
    return report if where is None else replace(report, summary=f"{report.summary}; {where}")


def _run_here(
    job: dict[str, Any],
    folder: Path,
    n_items: int,
    runs: int,
    options: MeasureOptions,
    on_progress: ProgressFn | None,
    started: float,
    is_cancelled: CancelFn | None,
) -> tuple[list[list[Measurement]], dict[str, Any], str]:
    """Fresh worker processes on this machine, with telemetry: (measurements, the whole's telemetry
    summary, the sampler's GPU status)."""
    from tunelab.core.telemetry.sampler import TelemetrySampler

    sampler = TelemetrySampler()
    sampler.start()
    try:
        measurements = run_workers(
            job, folder, n_items, runs, options, sampler, on_progress, is_cancelled=is_cancelled
        )
        whole = sampler.summary_between(started, time.time())
    finally:
        sampler.stop()
    return measurements, whole, sampler.gpu_status

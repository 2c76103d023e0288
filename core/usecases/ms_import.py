"""Importing a MetaSchedule run: a ``tune_tir`` / ``tune_relax`` work folder (or tunelab's own database export)
becomes sessions, one per workload, each tuning record a trial, for the command line and the app alike.

MetaSchedule reads the folder: ``JSONDatabase`` must accept it as a whole (its own checks: JSON, registered
instructions), and each line is read back with ``Workload.from_json`` / ``TuningRecord.from_json``, so the
trials keep the file's order (``JSONDatabase`` hands records back sorted by run time) and a bad line is named.

A workload the catalog recognises (:mod:`tunelab.core.workloads.recognise`) becomes a finished session of that
workload and shape whose trials are points of tunelab's own search space (the auto space, else the template
space, whichever holds every record's schedule), so each trial's schedule is rebuilt from its config as for a
session tuned here (shown, compared, exported, validated alike). Records of tunelab's template space are found
only when their trace carries the sketch annotation (schedules the evolutionary tuner proposed); a template
trial of another tuner is refused, naming its line.

A workload the catalog does not know still imports, as an opaque ``tir`` workload
(:mod:`tunelab.core.workloads.tir`: its PrimFunc kept as TVMScript, the unscheduled PrimFunc its reference)
whose space holds just the imported records (:mod:`tunelab.core.search.space.records`): it can be viewed,
compared, re-measured and exported, not re-tuned.

Everything is checked before anything is stored: bad input is one TunelabError and the store is unchanged.
A folder imported a second time is refused the same way, naming the session that already holds its records.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.records import NewTrial, SessionSpec, config_key
from tunelab.core.store import Store

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
# MetaSchedule's run time of a candidate that failed to build or run (1e10 s; tvm's task_scheduler).
FAILED_RUN_S = 1e9
IMPORT_TUNER = "evolutionary"  # what tune_tir searched with, and what a resumed import goes on with


@dataclass(frozen=True)
class ImportedRecord:
    """One tuning record, ready to store: its line in the records file, config, trace and samples."""

    line: int
    config: dict[str, Any]
    trace_json: Any
    samples_ms: tuple[float, ...]  # empty: the run failed


@dataclass(frozen=True)
class ImportedWorkload:
    workload: str
    shape: dict[str, int]
    dtype: str
    target_json: dict[str, Any]
    space_kind: str
    space: Any  # the SearchSpace the configs are points of
    records: tuple[ImportedRecord, ...]
    custom_source: str | None = None  # workload "tir": the PrimFunc as TVMScript


def _last_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[-1][:300] if lines else type(exc).__name__


def _target_json(target: Any) -> dict[str, Any]:
    """A record's target as tunelab stores targets: plain JSON, without what TVM derives from its kind."""
    data = json.loads(json.dumps(dict(target.export()), default=list))
    for derived in ("tag", "keys"):
        data.pop(derived, None)
    return data


def read_work_dir(work_dir: str | os.PathLike[str]) -> list[ImportedWorkload]:
    """The workloads and records of a MetaSchedule work folder, checked and decoded; TunelabError (one line)
    for a missing folder or file, a file MetaSchedule refuses, an empty database, a record whose trace does
    not apply to its workload, and a workload the catalog does not know."""
    from tvm.s_tir import meta_schedule as ms

    folder = Path(work_dir)
    if not folder.exists():
        raise TunelabError(f"{folder} does not exist")
    if not folder.is_dir():
        raise TunelabError(f"{folder} is a file, not a MetaSchedule work folder")
    missing = [name for name in (WORKLOAD_FILE, RECORD_FILE) if not (folder / name).is_file()]
    if len(missing) == 2:
        raise TunelabError(f"{folder} holds no MetaSchedule database ({WORKLOAD_FILE}, {RECORD_FILE})")
    if missing:
        raise TunelabError(f"{folder} holds no {missing[0]} (a MetaSchedule database needs both files)")
    try:
        # allow_missing=False: JSONDatabase would otherwise create the files in the person's folder
        database = ms.database.JSONDatabase(
            str(folder / WORKLOAD_FILE), str(folder / RECORD_FILE), allow_missing=False
        )
    except Exception as exc:  # noqa: BLE001 - TVM's errors are RuntimeError/ValueError/TVMError alike
        # Its message rarely says which line ("parallel_for_dynamic error with (not rendered)"): read the
        # lines one by one to name it, and say MetaSchedule's words only when no line is to blame.
        _read_lines(folder)
        raise TunelabError(f"MetaSchedule cannot read the database in {folder}: {_last_line(exc)}") from None
    if len(database) == 0:
        raise TunelabError(f"the MetaSchedule database in {folder} holds no tuning records")
    workloads, grouped = _read_lines(folder)
    return [_import_workload(workloads[index].mod, entries, index) for index, entries in grouped.items()]


def _json_lines(path: Path) -> list[Any]:
    lines = []
    for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if text.strip():
            try:
                lines.append((number, json.loads(text)))
            except json.JSONDecodeError as exc:
                raise TunelabError(f"{path.name} line {number} is not JSON (cut short?): {exc}") from None
    return lines


def _read_lines(folder: Path) -> tuple[list[Any], dict[int, list[tuple[int, Any, Any]]]]:
    """The workloads, and each workload's (line, TuningRecord, Schedule with its trace applied) in the
    file's order, read line by line with MetaSchedule's own ``from_json``; a bad line is a TunelabError
    naming it."""
    from tvm.s_tir import Schedule, Trace
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.export.files import _trace_problem

    workloads = []
    for number, entry in _json_lines(folder / WORKLOAD_FILE):
        try:
            workloads.append(ms.database.Workload.from_json(entry))
        except Exception as exc:  # noqa: BLE001
            raise TunelabError(
                f"{WORKLOAD_FILE} line {number} is not a workload this TVM reads: {_last_line(exc)}"
            ) from None
    grouped: dict[int, list[tuple[int, Any, Any]]] = {}
    for line, entry in _json_lines(folder / RECORD_FILE):
        where = f"{RECORD_FILE} line {line}"
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)):
            raise TunelabError(f"{where} is not a MetaSchedule tuning record")
        if not 0 <= entry[0] < len(workloads):
            raise TunelabError(
                f"{where} names workload {entry[0]}, but {WORKLOAD_FILE} holds {len(workloads)}"
            )
        trace_json = entry[1][0] if isinstance(entry[1], list) and entry[1] else None
        problem = _trace_problem(trace_json)  # traces TVM would crash on (SIGSEGV) rather than refuse
        if problem:
            raise TunelabError(f"{where}: {problem}")
        sch = Schedule(workloads[entry[0]].mod)
        try:
            # applied on its own first: TuningRecord.from_json applies it too, but its error reads
            # "(not rendered)"
            Trace.apply_json_to_schedule(trace_json, sch)
        except Exception as exc:  # noqa: BLE001
            raise TunelabError(
                f"{where}: its trace does not apply to its workload: {_last_line(exc)}"
            ) from None
        try:
            record = ms.database.TuningRecord.from_json(entry[1], workloads[entry[0]])
        except Exception as exc:  # noqa: BLE001
            raise TunelabError(f"{where} is not a record this TVM reads: {_last_line(exc)}") from None
        grouped.setdefault(entry[0], []).append((line, record, sch))
    return workloads, grouped


def _import_workload(mod: Any, schedules: list[tuple[int, Any, Any]], index: int) -> ImportedWorkload:
    """One workload's records as a session's trials: the catalog workload it is, and each record's
    schedule as a point of one of tunelab's spaces."""
    from tunelab.core.search.space.factory import make_space
    from tunelab.core.search.space.tvm_context import InvalidSchedule
    from tunelab.core.target.info import target_from_json
    from tunelab.core.workloads.catalog import get_workload
    from tunelab.core.workloads.recognise import recognise

    target_json = _target_json(schedules[0][1].target)
    for line, record, _ in schedules:
        if _target_json(record.target) != target_json:
            raise TunelabError(
                f"{RECORD_FILE} line {line} was tuned for another target than line {schedules[0][0]} "
                f"(one session has one target)"
            )
    known = recognise(mod)
    if known is None:
        return _opaque_workload(mod, schedules, target_json, index)
    workload = get_workload(known.workload)
    target = target_from_json(target_json)
    misfit = schedules[0][0]  # the first line the auto space holds no point for
    for kind in ("auto", "template"):
        try:
            space = make_space(workload, known.shape, known.dtype, target, kind)
        except TunelabError:
            continue
        configs = []
        for line, record, sch in schedules:
            try:
                config = space.decode(sch.trace, sch.mod)  # type: ignore[attr-defined]
            except InvalidSchedule:
                config = None
            if config is None:
                if kind == "auto":
                    misfit = line
                break
            configs.append(
                ImportedRecord(line, config, _trace_json(record.trace), _samples_ms(record.run_secs))
            )
        else:
            return ImportedWorkload(
                known.workload, known.shape, known.dtype, target_json, kind, space, tuple(configs)
            )
    raise TunelabError(
        f"{RECORD_FILE} line {misfit}: its schedule "
        f"is a point of neither of tunelab's spaces (auto, template) for {known.workload}"
    )


def _opaque_workload(
    mod: Any, schedules: list[tuple[int, Any, Any]], target_json: dict[str, Any], index: int
) -> ImportedWorkload:
    """A workload the catalog does not know, kept as its TIR with its records as the only points."""
    from tunelab.core.errors import WorkloadError
    from tunelab.core.search.space.records import RECORDS_KIND, RecordSpace
    from tunelab.core.target.info import target_from_json
    from tunelab.core.workloads.tir import TIR_NAME, TIRWorkload, tir_source

    funcs = [func for _, func in mod.functions.items()]
    try:
        if len(funcs) != 1:
            raise WorkloadError(f"tir: the module holds {len(funcs)} functions; one workload is one PrimFunc")
        workload = TIRWorkload(tir_source(funcs[0]))
    except WorkloadError as exc:
        raise TunelabError(f"{WORKLOAD_FILE} line {index + 1}: {exc}") from None
    traces = [_trace_json(record.trace) for _, record, _ in schedules]
    space = RecordSpace(workload, {}, workload.dtypes[0], target_from_json(target_json), {"traces": traces})
    records = tuple(
        ImportedRecord(line, {"record": i}, traces[i], _samples_ms(record.run_secs))
        for i, (line, record, _) in enumerate(schedules)
    )
    return ImportedWorkload(
        TIR_NAME, {}, workload.dtypes[0], target_json, RECORDS_KIND, space, records, workload.source
    )


def _trace_json(trace: Any) -> Any:
    # as_json still holds IntImm values (TVM_NOTES 5): plain numbers, as the store keeps JSON.
    return json.loads(json.dumps(trace.as_json(remove_postproc=False), default=lambda o: o.value))


def _samples_ms(run_secs: Any) -> tuple[float, ...]:
    """MetaSchedule's run seconds as samples in ms; none when the run failed (no run_secs, or 1e10 s)."""
    if run_secs is None:
        return ()
    seconds = [float(s) for s in run_secs]
    if not seconds or any(not math.isfinite(s) or s >= FAILED_RUN_S for s in seconds):
        return ()
    return tuple(s * 1e3 for s in seconds)


def import_work_dir(store: Store, work_dir: str | os.PathLike[str]) -> list[int]:
    """Store a MetaSchedule work folder's workloads as finished sessions (one per workload, its records as
    trials in the file's order); return their ids. Bad input raises TunelabError and stores nothing."""
    return store_imported(store, read_work_dir(work_dir), work_dir)


def store_imported(
    store: Store, imported: list[ImportedWorkload], work_dir: str | os.PathLike[str]
) -> list[int]:
    """Store what :func:`read_work_dir` read, one finished session per workload; return their ids. All or
    nothing: a store that fails half way keeps none of them."""
    import time

    import tvm

    store.require_writable()
    store.check_intact()
    where = str(Path(work_dir).resolve())
    for item in imported:  # an import done twice would double every trial of every view and comparison
        earlier = _already_imported(store, item)
        if earlier is not None:
            from tunelab.core.workloads.base import format_shape

            raise TunelabError(
                f"{work_dir}: its {item.workload} {format_shape(item.shape)} records are already in the "
                f"store as session {earlier} (imported before); nothing was imported"
            )
    created: list[int] = []
    try:
        for item in imported:
            created.append(_store_session(store, item, where, tvm.__version__, time.time()))
    except BaseException:
        for session_id in created:  # all or nothing: a failing disk leaves no half import
            store.delete_session(session_id)
        raise
    return created


def _already_imported(store: Store, item: ImportedWorkload) -> int | None:
    """The session that holds exactly these records already (same workload, shape, dtype and target,
    the same schedules with the same samples, in order), or None."""
    wanted = [(config_key(r.config), tuple(r.samples_ms)) for r in item.records]
    for session in store.sessions():
        if (
            session.tuner != IMPORT_TUNER
            or session.workload != item.workload
            or session.shape != item.shape
            or session.dtype != item.dtype
            or session.target != item.target_json
            or session.n_trials != len(wanted)
            or session.custom_source != item.custom_source
        ):
            continue
        held = [(config_key(t.config), t.samples_ms) for t in store.trials(session.id, with_samples=True)]
        if held == wanted:
            return session.id
    return None


def _store_session(store: Store, item: ImportedWorkload, where: str, tvm_version: str, now: float) -> int:
    from tunelab.core.workloads.base import format_shape
    from tunelab.core.workloads.catalog import get_workload

    workload = get_workload(item.workload, item.custom_source)
    flops = float(workload.flops(item.shape))
    title = item.workload if item.custom_source is None else f"{item.workload} {workload.main_block}"
    spec = SessionSpec(
        workload=item.workload,
        shape=item.shape,
        dtype=item.dtype,
        target=json.dumps(item.target_json),
        space_kind=item.space_kind,
        tuner=IMPORT_TUNER,
        trials=len(item.records),
        name=f"{title} {format_shape(item.shape)}".strip() + f" imported from {where}",
        custom_source=item.custom_source,
    )
    session_id = store.create_session(
        spec,
        target_json=item.target_json,
        target_kind=item.target_json.get("kind", "llvm"),
        space_json=item.space.to_json(),
        tvm_version=tvm_version,
        flops=flops,
    )
    try:
        keys: set[str] = set()
        for record in item.records:
            key = config_key(record.config)
            if key in keys:  # MetaSchedule measured one schedule twice: both records are kept
                key = f"{key}@line{record.line}"
            keys.add(key)
            ok = bool(record.samples_ms)
            store.add_trial(
                session_id,
                NewTrial(
                    round=0,
                    config=record.config,
                    status="ok" if ok else "run_error",
                    error=None
                    if ok
                    else "MetaSchedule recorded no run time for it (run_secs 1e10 s: it failed to build or run)",
                    samples_ms=record.samples_ms,
                    predicted_ms=None,
                    build_s=None,
                    run_s=None,
                    started_at=now,
                    finished_at=now,
                    trace_json=record.trace_json,
                ),
                key,
            )
        store.set_status(session_id, "finished")
    except BaseException:
        store.delete_session(session_id)
        raise
    return session_id

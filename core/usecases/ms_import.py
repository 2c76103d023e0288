"""Importing a MetaSchedule run: a ``tune_tir`` / ``tune_relax`` work folder (or tunelab's own database export)
becomes sessions, one per workload, each tuning record a trial, for the command line and the app alike.

MetaSchedule reads the folder: each line is read with ``Workload.from_json`` / ``TuningRecord.from_json``
(what ``JSONDatabase`` reads each line with), one line at a time, so the trials keep the file's order
(``JSONDatabase`` hands records back sorted by run time), a bad line is named, and a large file is streamed
(``JSONDatabase`` held twenty times the file in memory: a 300 MB file ended in MemoryError).

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
import os
from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.core.records import NewTrial, SessionSpec, config_key
from tunelab.core.store import Store
from tunelab.core.usecases.ms_read import (
    FAILED_RUN_S,
    IMPORT_TUNER,
    RECORD_FILE,
    WORKLOAD_FILE,
    ImportedRecord,
    ImportedWorkload,
    read_work_dir,
)

__all__ = [
    "FAILED_RUN_S",
    "IMPORT_TUNER",
    "RECORD_FILE",
    "WORKLOAD_FILE",
    "ImportedRecord",
    "ImportedWorkload",
    "import_work_dir",
    "read_work_dir",
    "store_imported",
]


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
                    trace_json=json.loads(record.trace_text),
                ),
                key,
            )
        store.set_status(session_id, "finished")
    except BaseException:
        store.delete_session(session_id)
        raise
    return session_id

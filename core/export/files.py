"""Export a tuned trial, and load an exported schedule back without tuning (shared/DESIGN.md).

Files written into the output folder (NAME = workload and shape, e.g. ``gemm_M512_N512_K512``):

- ``NAME.schedule.json``: workload, shape, dtype, target, the replayable config (knob values or
  sketch decisions) and the MetaSchedule trace as JSON, measured statistics, TVM version; the
  statistics are the fresh-process confirmation's when the session was confirmed (tunelab.core.trust.confirm;
  see _chosen_best for which trial), with the session's own figures beside them;
- ``NAME.tvmscript.py``: the scheduled module as TVMScript;
- ``NAME.so``: the compiled library (``tvm.runtime.load_module`` + ``lib["main"](...)``);
- ``database/database_workload.json`` and ``database/database_tuning_record.json``: a MetaSchedule
  JSON database that plain TVM loads with ``JSONDatabase`` and ``compile_tir``.

An export never overwrites one already in the folder unless asked (``force``), and a folder that cannot
be written is one line (TunelabError) before anything is built. The files are written into a hidden
temporary folder beside them and moved into place only once every one is whole (read back and checked):
a disk that fills leaves no part of an export, and is an OutOfSpace (the disk's fault, not the input's).
A schedule file of a custom workload carries that workload's code (``custom_source``): loading such a file
runs the code only when the caller trusts it (``trust_custom``), since a file can come from anyone.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.export.pick import export_pick

# Reading a schedule file back (schedule_file), what it says (schedule_doc) and writing an export's files
# whole (staging) are modules of their own; the names callers import from here stay importable.
from tunelab.core.export.schedule_doc import SCHEDULE_FORMAT, _trace_json, schedule_doc  # noqa: F401
from tunelab.core.export.schedule_file import (  # noqa: F401
    _trace_problem,
    build_schedule_file,
    load_schedule_file,
    schedule_from_file,
)
from tunelab.core.export.staging import (
    check_database,
    check_out_dir,
    export_paths,
    guard,
    move_into_place,
    staging_folder,
    write_text,
)
from tunelab.core.faults import OutOfSpace, out_of_space_error
from tunelab.core.store import Store
from tunelab.core.target.build import build_scope

FORMATS = ("schedule", "tvmscript", "library", "database")
# The root-block annotation by which a template schedule in an exported MetaSchedule database names its
# config (see _database_trace; tunelab.core.usecases.ms_import reads it).
CONFIG_ANNOTATION = "tunelab.config"


def _name(workload: str, shape: dict[str, int]) -> str:
    return workload + "_" + "_".join(f"{k}{v}" for k, v in shape.items())


def export_trial(
    store: Store,
    session_id: int,
    trial_id: int | None = None,
    *,
    out_dir: str | os.PathLike[str],
    formats: tuple[str, ...] = FORMATS,
    force: bool = False,
    robust: bool = False,
) -> dict[str, str]:
    """Write the chosen (default: best) trial of a session; return {format: path}. Which trial and the
    figure it states: :func:`tunelab.core.export.pick.export_pick` (``robust``: the confirmed trial whose
    worst buffer placement is fastest).

    A file of an earlier export at one of those paths is a TunelabError unless ``force``; so is an
    ``out_dir`` that is a file or cannot be written (checked before anything is built)."""
    from tunelab.core.search.space.factory import space_for_task

    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise TunelabError(f"unknown export format(s) {sorted(unknown)}; formats are {list(FORMATS)}")
    record = store.session(session_id)
    pick = export_pick(store, session_id, trial_id, robust=robust)
    task = pick.task if pick.task is not None else store.tasks(session_id)[0]
    space = space_for_task(record, task)
    sch = space.schedule(pick.trial.config)
    out = Path(out_dir)
    name = _name(record.workload, task.shape)
    check_out_dir(out, [export_paths(out, name)[f] for f in formats], force)
    staging = staging_folder(out, name)
    try:
        _write_formats(staging, name, formats, store, record, pick, task, space, sch)
        return move_into_place(staging, out, name, formats)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_formats(
    out: Path,
    name: str,
    formats: tuple[str, ...],
    store: Store,
    record: Any,
    pick: Any,
    task: Any,
    space: Any,
    sch: Any,
) -> None:
    """Every format asked for, written into ``out`` (the staging folder)."""
    from tunelab.core.target.info import target_from_json

    target = target_from_json(record.target)
    if "schedule" in formats:
        doc = schedule_doc(store, record, pick, task, sch)
        write_text(out / f"{name}.schedule.json", json.dumps(doc, indent=1))
    if "tvmscript" in formats:
        write_text(out / f"{name}.tvmscript.py", sch.mod.script())
    if "library" in formats:
        _write_library(out / f"{name}.so", sch, target)
    if "database" in formats:
        _write_database(out / "database", record, pick, space, sch, target)


def _write_library(path: Path, sch: Any, target: Any) -> None:
    """The compiled library at ``path`` (in the staging folder)."""
    import tvm

    try:
        with build_scope(sch.mod, target.tvm_target()):
            tvm.compile(sch.mod, target.tvm_target()).export_library(str(path))
    except Exception as exc:  # the linker's failure is a RuntimeError, a write's an OSError
        if out_of_space_error(exc):  # ld: "final link failed: No space left on device"
            raise OutOfSpace(
                f"no space left to write the library {path.name} into {path.parent.parent} (or the temporary "
                f"folder {tempfile.gettempdir()} it is linked in); nothing was exported"
            ) from None
        if isinstance(exc, OSError):
            raise TunelabError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def _write_database(folder: Path, record: Any, pick: Any, space: Any, sch: Any, target: Any) -> None:
    """A MetaSchedule JSON database in ``folder`` holding the picked trial at its stated figure, read back whole."""
    from tvm.s_tir import meta_schedule as ms

    guard(folder, folder.mkdir)  # JSONDatabase does not create it (TVM_NOTES 5)
    db = ms.database.JSONDatabase(work_dir=str(folder))
    workload = db.commit_workload(space.ir_module())
    args = ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"])
    db.commit_tuning_record(
        ms.database.TuningRecord(
            _database_trace(sch, pick.trial.config, record.space_kind),
            workload,
            [pick.stated_ms * 1e-3],
            target.tvm_target(),
            args,
        )
    )
    check_database(folder, ms)


def _database_trace(sch: Any, config: dict[str, Any], space_kind: str) -> Any:
    """The trace the MetaSchedule database holds. A template schedule's trace (fixed splits) does not say
    which point of the template it is, so it carries its config as an annotation of the root block
    (:data:`CONFIG_ANNOTATION`, a no-op for TVM's build): ``tunelab import`` reads the config from it
    and accepts it only when the template rebuilds that very schedule."""
    if space_kind != "template":
        return sch.trace
    marked = sch.copy()
    marked.annotate(marked.get_sblock("root"), CONFIG_ANNOTATION, json.dumps(config, sort_keys=True))
    return marked.trace

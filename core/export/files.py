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

import errno
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError, shown
from tunelab.core.export.pick import CI_LEVEL, export_pick
from tunelab.core.faults import OutOfSpace, out_of_space
from tunelab.core.measure.placement import DEFAULT_LAYOUT
from tunelab.core.measure.threads import tvm_default_threads
from tunelab.core.store import Store
from tunelab.core.target.build import build_scope

SCHEDULE_FORMAT = 1
FORMATS = ("schedule", "tvmscript", "library", "database")
# The root-block annotation by which a template schedule in an exported MetaSchedule database names its
# config (see _database_trace; tunelab.core.usecases.ms_import reads it).
CONFIG_ANNOTATION = "tunelab.config"


def _name(workload: str, shape: dict[str, int]) -> str:
    return workload + "_" + "_".join(f"{k}{v}" for k, v in shape.items())


def _trace_json(sch: Any) -> Any:
    # as_json still holds IntImm values (TVM_NOTES 5): plain numbers for json.
    return json.loads(json.dumps(sch.trace.as_json(remove_postproc=False), default=lambda o: o.value))


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
    _check_out_dir(out, [_paths(out, name)[f] for f in formats], force)
    staging = _staging_folder(out, name)
    try:
        _write_formats(staging, name, formats, store, record, pick, task, space, sch)
        return _move_into_place(staging, out, name, formats)
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
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.target.info import target_from_json

    trial, confirmation = pick.trial, pick.confirmation
    shape, flops = task.shape, task.flops
    target = target_from_json(record.target)
    # The figure an export states: the confirmed one where there is one (the session's own figure of
    # its winner is biased low, see tunelab.core.trust.confirm), and the session's beside it.
    latency_ms = pick.stated_ms
    if "schedule" in formats:
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
        doc = {
            "tunelab_schedule": SCHEDULE_FORMAT,
            "workload": record.workload,
            "shape": shape,
            "dtype": record.dtype,
            "custom_source": record.custom_source,
            "target": record.target,
            "space_kind": record.space_kind,
            "space": record.space,
            "config": trial.config,
            "trace": _trace_json(sch),
            "stats": stats,
            "session": {"id": record.id, "name": record.name, "trial_id": trial.id, "tuner": record.tuner},
            "tvm_version": tvm.__version__,
            "exported_at": time.time(),
        }
        _write(out / f"{name}.schedule.json", json.dumps(doc, indent=1))
    if "tvmscript" in formats:
        _write(out / f"{name}.tvmscript.py", sch.mod.script())
    if "library" in formats:
        path = out / f"{name}.so"
        try:
            with build_scope(sch.mod, target.tvm_target()):
                tvm.compile(sch.mod, target.tvm_target()).export_library(str(path))
        except Exception as exc:  # the linker's failure is a RuntimeError, a write's an OSError
            if _disk_full(exc):  # ld: "final link failed: No space left on device"
                raise OutOfSpace(
                    f"no space left to write the library {path.name} into {out.parent} (or the temporary "
                    f"folder {tempfile.gettempdir()} it is linked in); nothing was exported"
                ) from None
            if isinstance(exc, OSError):
                raise TunelabError(f"cannot write {path}: {exc.strerror or exc}") from None
            raise
    if "database" in formats:
        folder = out / "database"
        _guard(folder, folder.mkdir)  # JSONDatabase does not create it (TVM_NOTES 5)
        db = ms.database.JSONDatabase(work_dir=str(folder))
        workload = db.commit_workload(space.ir_module())
        args = ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"])
        db.commit_tuning_record(
            ms.database.TuningRecord(
                _database_trace(sch, trial.config, record.space_kind),
                workload,
                [latency_ms * 1e-3],
                target.tvm_target(),
                args,
            )
        )
        _check_database(folder, ms)


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


def _paths(out: Path, name: str) -> dict[str, Path]:
    """What each format writes (the database: its records file, the one an earlier export left)."""
    return {
        "schedule": out / f"{name}.schedule.json",
        "tvmscript": out / f"{name}.tvmscript.py",
        "library": out / f"{name}.so",
        "database": out / "database" / "database_tuning_record.json",
    }


def _check_out_dir(out: Path, paths: list[Path], force: bool) -> None:
    """The export folder exists (created) and can be written, and holds no earlier export at these paths
    (unless ``force``); else TunelabError, before anything is built or written."""
    if out.exists() and not out.is_dir():
        raise TunelabError(f"cannot export into {out}: it is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TunelabError(f"cannot export into {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise TunelabError(f"cannot export into {out}: the folder is read-only")
    earlier = [p for p in paths if p.exists()]
    if earlier and not force:
        raise TunelabError(
            f"{out} already holds an export ({earlier[0].relative_to(out)}); choose another "
            f"folder, or overwrite it",
            option="force",
        )


def _disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return out_of_space(str(exc))


def _guard(path: Path, write: Any) -> None:
    """``write()``; a full disk is an OutOfSpace (exit 3), any other failure to write a TunelabError,
    each one line naming the export's folder."""
    try:
        write()
    except OSError as exc:
        where = path.parent.parent if path.parent.name.startswith(".") else path.parent
        if _disk_full(exc):
            raise OutOfSpace(
                f"no space left to write the export into {where} ({exc.strerror or exc}); nothing was exported"
            ) from None
        raise TunelabError(f"cannot write the export into {where}: {exc.strerror or exc}") from None


def _write(path: Path, text: str) -> None:
    _guard(path, lambda: path.write_text(text, encoding="utf-8"))


def _staging_folder(out: Path, name: str) -> Path:
    """A hidden folder inside ``out`` (the same disk: moving from it is a rename) for one export."""
    try:
        return Path(tempfile.mkdtemp(prefix=f".{name}.exporting-", dir=out))
    except OSError as exc:
        if _disk_full(exc):
            raise OutOfSpace(f"no space left to write the export into {out}: {exc.strerror or exc}") from None
        raise TunelabError(f"cannot export into {out}: {exc.strerror or exc}") from None


def _check_database(folder: Path, ms: Any) -> None:
    """The database files as MetaSchedule wrote them must read back whole: its writer does not report a
    full disk (a workload file cut at 4096 bytes, an empty records file were left, and the export said
    it succeeded)."""
    try:
        db = ms.database.JSONDatabase(
            str(folder / "database_workload.json"),
            str(folder / "database_tuning_record.json"),
            allow_missing=False,
        )
        whole = len(db) == 1
    except Exception:  # noqa: BLE001 - a cut line is TVM's parse error
        whole = False
    if not whole:
        free = shutil.disk_usage(folder).free
        raise OutOfSpace(
            f"the MetaSchedule database written into {folder.parent.parent} came out cut short (its disk "
            f"has {free:,} bytes free); nothing was exported"
        )


def _move_into_place(staging: Path, out: Path, name: str, formats: tuple[str, ...]) -> dict[str, str]:
    """Move the whole export from ``staging`` into ``out`` (renames on one disk); the schedule file, which
    makes a folder read as an export, last."""
    written: dict[str, str] = {}
    paths = _paths(out, name)
    for kind in sorted(formats, key=lambda f: f == "schedule"):
        final = paths[kind]
        if kind == "database":
            folder = out / "database"
            if not folder.is_dir():
                _guard(folder, lambda d=folder: os.replace(staging / "database", d))
            else:  # an earlier export's (force): its two files replaced, anything else there kept
                for file in ("database_workload.json", "database_tuning_record.json"):
                    _guard(
                        folder / file, lambda f=file, d=folder: os.replace(staging / "database" / f, d / f)
                    )
            written[kind] = str(folder)
        else:
            _guard(final, lambda k=kind, f=final: os.replace(staging / f.name, f))
            written[kind] = str(final)
    return {kind: written[kind] for kind in formats if kind in written}


def load_schedule_file(path: str | os.PathLike[str], *, trust_custom: bool = False) -> dict[str, Any]:
    """Read and check a ``*.schedule.json``; bad files raise TunelabError with the reason.

    A file that carries a custom workload's code (``custom_source``) is refused unless ``trust_custom``:
    loading its workload would run that code in this process."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TunelabError(f"schedule file {path} does not exist") from None
    except IsADirectoryError:
        raise TunelabError(f"schedule file {path} is a folder, not a file") from None
    except OSError as exc:
        raise TunelabError(f"cannot read schedule file {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TunelabError(f"schedule file {path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise TunelabError(f"schedule file {path} is not a schedule: it is nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("tunelab_schedule") != SCHEDULE_FORMAT:
        raise TunelabError(f"{path} is not a tunelab schedule file (format {SCHEDULE_FORMAT})")
    for key in ("workload", "shape", "dtype", "target", "trace"):
        if key not in doc:
            raise TunelabError(f"schedule file {path} has no {key!r}")
    # What the readers (schedule_from_file, tunelab.core.trust.remeasure) take from the file, by type.
    for key, kinds, words in (
        ("workload", str, "a string"),
        ("dtype", str, "a string"),
        ("shape", dict, "an object"),
        ("target", dict, "an object"),
        ("custom_source", (str, type(None)), "a string or null"),
        ("config", (dict, type(None)), "an object or null"),
        ("stats", (dict, type(None)), "an object or null"),
        ("session", (dict, type(None)), "an object or null"),
    ):
        if not isinstance(doc.get(key), kinds):
            raise TunelabError(f"schedule file {path}: {key!r} must be {words}")
    problem = _trace_problem(doc["trace"])
    if problem:
        raise TunelabError(f"schedule file {path}: {problem}")
    problem = _stats_problem(doc.get("stats"))
    if problem:
        raise TunelabError(f"schedule file {path}: {problem}")
    if doc.get("custom_source") is not None and not trust_custom:
        raise TunelabError(
            f"schedule file {path} carries the code of a custom workload (custom_source), which "
            f"would run in this process; read it, then pass --trust-custom to run it"
        )
    return doc


# The figures a schedule file states, which validate and jitter compare a re-measurement with: each a
# finite number above 0 (a spread at least 0), or null where the export had none.
_POSITIVE_STATS = ("median_ms", "session_median_ms", "mean_ms", "min_ms", "max_ms", "reference_ms")
_NON_NEGATIVE_STATS = ("std_ms", "gflops")  # a workload of no arithmetic (a copy) states 0 GFLOP/s


def _stats_problem(stats: Any) -> str:
    """Why a file's ``stats`` cannot be a measurement, or "": a median of -5 or NaN read as a figure
    gave 'busy neighbours -102 %'."""
    if stats is None:
        return ""
    for key in (*_POSITIVE_STATS, *_NON_NEGATIVE_STATS):
        value = stats.get(key)
        if value is None:
            continue
        zero_ok = key in _NON_NEGATIVE_STATS
        if not (_is_number(value) and math.isfinite(value) and (value >= 0 if zero_ok else value > 0)):
            return (
                f"stats.{key} must be a finite number {'>= 0' if zero_ok else 'above 0'}, not {shown(value)}"
            )
    for key in ("samples_ms", "session_samples_ms"):
        samples = stats.get(key)
        if samples is None:
            continue
        if not isinstance(samples, list) or not all(
            _is_number(x) and math.isfinite(x) and x > 0 for x in samples
        ):
            return f"stats.{key} must be a list of finite times above 0"
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _has_null(value: Any) -> bool:
    stack = [
        value
    ]  # not recursive: json.loads reads nesting deeper than Python's recursion limit allows here
    while stack:
        item = stack.pop()
        if item is None:
            return True
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return False


def _trace_problem(trace: Any) -> str:
    """Why a trace's JSON must not reach TVM's replay, or "". TVM checks most of a trace itself and raises,
    but a few malformed ones crash the process instead (SIGSEGV, SIGFPE, abort): a null attribute or
    decision, a decision for an instruction that does not exist, a zero tile factor."""
    if not (isinstance(trace, list) and len(trace) == 2 and all(isinstance(part, list) for part in trace)):
        return "the trace must be a list of two lists (instructions, decisions)"
    insts, decisions = trace
    for i, inst in enumerate(insts):
        if not (
            isinstance(inst, list)
            and len(inst) == 4
            and isinstance(inst[0], str)
            and all(isinstance(part, list) for part in inst[1:])
            and all(isinstance(o, str) for o in inst[3])
        ):
            return f"instruction {i} of the trace is not [kind, inputs, attributes, outputs]"
        if _has_null(inst[2]):
            return f"instruction {i} of the trace ({inst[0][:40]}) has a null attribute"
    for entry in decisions:
        if not (
            isinstance(entry, list) and len(entry) == 2 and _is_int(entry[0]) and 0 <= entry[0] < len(insts)
        ):
            return f"a decision of the trace is not [instruction index, value] for one of its {len(insts)} instructions"
        index, value = entry
        kind, _, attrs, _ = insts[index]
        if _has_null(value):
            return f"the decision for instruction {index} of the trace is null"
        if kind == "SamplePerfectTile" and not (
            isinstance(value, list) and value and all(_is_int(f) and f >= 1 for f in value)
        ):
            return f"the decision for instruction {index} (SamplePerfectTile) must be a list of positive integers"
        if kind == "SampleCategorical" and not (
            _is_int(value) and attrs and isinstance(attrs[0], list) and 0 <= value < len(attrs[0])
        ):
            return (
                f"the decision for instruction {index} (SampleCategorical) must be the index of a candidate"
            )
    return ""


def schedule_from_file(
    path: str | os.PathLike[str], *, trust_custom: bool = False
) -> tuple[dict[str, Any], Any]:
    """Apply an exported schedule to its workload, without tuning: (file contents, tvm Schedule).
    A custom workload's code in the file runs only with ``trust_custom`` (:func:`load_schedule_file`)."""
    import tvm
    from tvm.s_tir import Schedule, Trace

    from tunelab.core.workloads.catalog import get_workload

    doc = load_schedule_file(path, trust_custom=trust_custom)
    workload = get_workload(doc["workload"], doc.get("custom_source"))
    _check_config(path, doc, workload)
    mod = tvm.IRModule({"main": workload.prim_func(doc["shape"], doc["dtype"])})
    sch = Schedule(mod)
    try:
        Trace.apply_json_to_schedule(doc["trace"], sch)
    except Exception as exc:  # noqa: BLE001 - TVM's trace replay raises many kinds; each means the file's schedule does not fit
        raise TunelabError(
            f"the schedule in {path} does not apply to {doc['workload']}: {str(exc).splitlines()[-1]}"
        ) from None
    return doc, sch


def _check_config(path: str | os.PathLike[str], doc: dict[str, Any], workload: Any) -> None:
    """The file's ``config`` must be a point of the space it names for its own workload and shape (a tile
    of 10^9, or of 3 on an axis of 64, is none): the trace is what runs, and a config that no trace
    of that space could have would be stated beside it as if it were."""
    from tunelab.core.errors import SpaceError
    from tunelab.core.search.space.factory import _space_data, make_space
    from tunelab.core.target.info import target_from_json

    kind, config = doc.get("space_kind"), doc.get("config")
    if config is None or kind not in ("template", "auto"):
        return
    data = doc.get("space") if isinstance(doc.get("space"), dict) else None
    try:
        space = make_space(
            workload,
            doc["shape"],
            doc["dtype"],
            target_from_json(doc["target"]),
            kind,
            _space_data(kind, data) if data else None,
        )
    except TunelabError as exc:
        raise TunelabError(f"schedule file {path}: its {kind} space cannot be rebuilt here: {exc}") from None
    try:
        space.check_config(config)
    except SpaceError as exc:
        raise TunelabError(
            f"schedule file {path}: its config is not a point of its {kind} space for {doc['workload']}: {exc}"
        ) from None


def build_schedule_file(
    path: str | os.PathLike[str], target: dict[str, Any] | None = None, *, trust_custom: bool = False
) -> Any:
    """Compile an exported schedule: a tvm runtime Executable whose ``["main"]`` runs the kernel."""
    import tvm

    doc, sch = schedule_from_file(path, trust_custom=trust_custom)
    tvm_target = tvm.target.Target(target or doc["target"])
    with build_scope(sch.mod, tvm_target):
        return tvm.compile(sch.mod, tvm_target)

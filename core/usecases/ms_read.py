"""Reading a MetaSchedule work folder (``database_workload.json``, ``database_tuning_record.json``) line by
line into imported workloads and their trials, every line checked; nothing is stored (`ms_import` stores them).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
# MetaSchedule's run time of a candidate that failed to build or run (1e10 s; tvm's task_scheduler).
FAILED_RUN_S = 1e9
IMPORT_TUNER = "evolutionary"  # what tune_tir searched with, and what a resumed import goes on with
# The longest line read (characters): a workload's line holds its module (a large model's is a few MB), a
# record's its trace (KB). A longer line is refused before it is parsed (a 200 MB line of digits was
# parsed, and ended in a traceback).
MAX_LINE_CHARS = 64 * 2**20
# Records remembered while reading, so that a schedule measured again is decoded once (bounded: memory).
SEEN_RECORDS = 4096


@dataclass(frozen=True)
class ImportedRecord:
    """One tuning record, ready to store: its line in the records file, config, trace and samples."""

    line: int
    config: dict[str, Any]
    trace_text: str  # the trace as compact JSON text (a parsed trace is ten times its text in memory)
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


@dataclass
class _Group:
    """One workload of the file while its records are read (internal, filled line by line)."""

    index: int
    workload: Any  # MetaSchedule's Workload, as its line reads
    known: Any  # the catalog workload it is (tunelab.core.workloads.recognise), None: kept opaque
    kind: str | None = None  # the space of tunelab's its records are read as points of (None: opaque)
    space: Any = None
    target_json: dict[str, Any] | None = None
    first_line: int = 0
    records: list[ImportedRecord] = field(default_factory=list)
    misfit: int | None = None  # the first line ``kind`` holds no point for
    auto_misfit: int | None = None  # the first line the auto space held no point for


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
    for a missing folder or file, a line MetaSchedule's own readers refuse (``Workload.from_json``,
    ``TuningRecord.from_json``, the checks ``JSONDatabase`` makes of each line), an empty database, a
    record whose trace does not apply to its workload, and a record of no space of tunelab's.

    The files are streamed: one line at a time is held (at most :data:`MAX_LINE_CHARS`), and each record
    is kept as its config, its trace's text and its samples, so memory grows with the file's size, not
    twenty times it as when ``JSONDatabase`` read the whole file."""
    folder = Path(work_dir)
    if not folder.exists():
        raise TunelabError(f"{folder} does not exist")
    if not folder.is_dir():
        raise TunelabError(f"{folder} is a file, not a MetaSchedule work folder")
    missing = [name for name in (WORKLOAD_FILE, RECORD_FILE) if not (folder / name).is_file()]
    if len(missing) == 2 and all(
        (folder / "database" / name).is_file() for name in (WORKLOAD_FILE, RECORD_FILE)
    ):
        folder, missing = folder / "database", []  # a folder tunelab exported into: its database folder
    if len(missing) == 2:
        raise TunelabError(f"{folder} holds no MetaSchedule database ({WORKLOAD_FILE}, {RECORD_FILE})")
    if missing:
        raise TunelabError(f"{folder} holds no {missing[0]} (a MetaSchedule database needs both files)")
    groups = [_new_group(index, workload) for index, workload in enumerate(_read_workloads(folder))]
    if _scan_records(folder, groups, set(range(len(groups)))) == 0:
        raise TunelabError(f"the MetaSchedule database in {folder} holds no tuning records")
    # Records not all points of the auto space: read that workload's again as template points.
    again = {g.index for g in groups if g.misfit is not None and g.kind == "auto"}
    for index in again:
        _as_template(groups[index])
    if again:
        _scan_records(folder, groups, again)
    for g in groups:
        if g.misfit is not None:
            raise TunelabError(
                f"{RECORD_FILE} line {g.auto_misfit or g.misfit}: its schedule "
                f"is a point of neither of tunelab's spaces (auto, template) for {g.known.workload}"
            )
    return [_imported(g) for g in groups if g.records]


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each non-blank line, read one line at a time; a line that is not JSON,
    or longer than :data:`MAX_LINE_CHARS`, is a TunelabError naming it."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            number = 0
            while True:
                text = f.readline(MAX_LINE_CHARS + 1)
                if not text:
                    return
                number += 1
                if len(text) > MAX_LINE_CHARS and not text.endswith("\n"):
                    raise TunelabError(
                        f"{path.name} line {number} is longer than {MAX_LINE_CHARS // 2**20} MiB: "
                        "not a MetaSchedule workload or tuning record"
                    )
                if not text.strip():
                    continue
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise TunelabError(f"{path.name} line {number} is not JSON (cut short?): {exc}") from None
                except (ValueError, RecursionError) as exc:  # a 10^5-digit number, nesting past the limit
                    reason = _last_line(exc) if isinstance(exc, ValueError) else "it is nested too deeply"
                    raise TunelabError(
                        f"{path.name} line {number} is not a JSON record: {reason[:120]}"
                    ) from None
                yield number, value
    except OSError as exc:
        raise TunelabError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_workloads(folder: Path) -> list[Any]:
    from tvm.s_tir import meta_schedule as ms

    workloads = []
    for number, entry in _json_lines(folder / WORKLOAD_FILE):
        try:
            workloads.append(ms.database.Workload.from_json(entry))
        except Exception as exc:  # noqa: BLE001 - TVM's errors are RuntimeError/ValueError/TVMError alike
            raise TunelabError(
                f"{WORKLOAD_FILE} line {number} is not a workload this TVM reads: {_last_line(exc)}"
            ) from None
    return workloads


def _new_group(index: int, workload: Any) -> _Group:
    """A workload of the file, with the first of tunelab's spaces its records are tried as points of."""
    from tunelab.core.workloads.recognise import recognise

    group = _Group(index, workload, recognise(workload.mod))
    if group.known is not None:
        group.kind = "auto"
    return group


def _space(group: _Group, target_json: dict[str, Any]) -> None:
    """``group.space``: its kind's space for the catalog workload on the records' target (the auto space
    refused there: the template space)."""
    from tunelab.core.search.space.factory import make_space
    from tunelab.core.target.info import target_from_json
    from tunelab.core.workloads.catalog import get_workload

    known = group.known
    target = target_from_json(target_json)
    kind = group.kind or "template"  # records read as no space's points are opaque: never asked here
    try:
        group.space = make_space(get_workload(known.workload), known.shape, known.dtype, target, kind)
    except TunelabError:
        if kind != "auto":
            raise
        group.kind = "template"
        group.space = make_space(get_workload(known.workload), known.shape, known.dtype, target, "template")


def _as_template(group: _Group) -> None:
    group.auto_misfit, group.misfit = group.misfit, None
    group.kind, group.space, group.records = "template", None, []


def _scan_records(folder: Path, groups: list[_Group], active: set[int]) -> int:
    """Read the records file line by line into the ``active`` groups' records; return how many records it
    holds. A record already read (the same workload, trace, target and arguments: MetaSchedule measured a
    schedule again) is decoded once (:data:`SEEN_RECORDS` remembered)."""
    seen: dict[str, tuple[dict[str, Any] | None, str]] = {}
    count = 0
    for line, entry in _json_lines(folder / RECORD_FILE):
        count += 1
        where = f"{RECORD_FILE} line {line}"
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and _is_int(entry[0])
            and isinstance(entry[1], list)
            and len(entry[1]) >= 2
        ):
            raise TunelabError(f"{where} is not a MetaSchedule tuning record")
        if not 0 <= entry[0] < len(groups):
            raise TunelabError(f"{where} names workload {entry[0]}, but {WORKLOAD_FILE} holds {len(groups)}")
        group = groups[entry[0]]
        if group.index not in active or group.misfit is not None:
            continue
        key = json.dumps([entry[0], entry[1][0], entry[1][2:]], separators=(",", ":"))
        if key in seen:
            config, trace_text = seen[key]
            samples = _samples_ms(_run_secs(entry[1][1], where))
        else:
            config, trace_text, samples = _decode(group, line, entry)
            if len(seen) >= SEEN_RECORDS:
                seen.pop(next(iter(seen)))
            seen[key] = (config, trace_text)
        if config is None:
            group.misfit = line
            continue
        if group.kind is None:  # opaque: each record is its own point
            config = {"record": len(group.records)}
        group.records.append(ImportedRecord(line, config, trace_text, samples))
    return count


def _run_secs(value: Any, where: str) -> Any:
    if value is None or (isinstance(value, list) and all(_is_number(s) for s in value)):
        return value
    raise TunelabError(f"{where}: its run times are not a list of numbers")


def _decode(
    group: _Group, line: int, entry: list[Any]
) -> tuple[dict[str, Any] | None, str, tuple[float, ...]]:
    """A record read with MetaSchedule's own ``from_json`` (its trace applied first, for a message that
    names what is wrong): (its config in the group's space, None when it is no point of it; its trace as
    text; its samples)."""
    from tvm.s_tir import Schedule, Trace
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.export.files import _trace_problem
    from tunelab.core.search.space.tvm_context import InvalidSchedule

    where = f"{RECORD_FILE} line {line}"
    trace_json = entry[1][0]
    problem = _trace_problem(trace_json)  # traces TVM would crash on (SIGSEGV) rather than refuse
    if problem:
        raise TunelabError(f"{where}: {problem}")
    sch = Schedule(group.workload.mod)
    try:
        # applied on its own first: TuningRecord.from_json applies it too, but its error reads "(not rendered)"
        Trace.apply_json_to_schedule(trace_json, sch)
    except Exception as exc:  # noqa: BLE001
        raise TunelabError(f"{where}: its trace does not apply to its workload: {_last_line(exc)}") from None
    try:
        record = ms.database.TuningRecord.from_json(entry[1], group.workload)
    except Exception as exc:  # noqa: BLE001
        raise TunelabError(f"{where} is not a record this TVM reads: {_last_line(exc)}") from None
    target_json = _target_json(record.target)
    if group.target_json is None:
        group.target_json, group.first_line = target_json, line
    elif target_json != group.target_json:
        raise TunelabError(
            f"{RECORD_FILE} line {line} was tuned for another target than line {group.first_line} "
            f"(one session has one target)"
        )
    trace_text = json.dumps(_trace_json(record.trace), separators=(",", ":"))
    samples = _samples_ms(record.run_secs)
    if group.kind is None:
        return {}, trace_text, samples
    if group.space is None:
        _space(group, target_json)
    try:
        config = group.space.decode(sch.trace, sch.mod)
    except InvalidSchedule:
        config = None
    if config is None and group.kind == "template":
        config = _exported_template_config(group.space, sch)
    return config, trace_text, samples


def _imported(group: _Group) -> ImportedWorkload:
    assert group.target_json is not None  # a group with records met its first one in _decode
    if group.kind is None:
        return _opaque_workload(group.workload.mod, group.records, group.target_json, group.index)
    known = group.known
    return ImportedWorkload(
        known.workload,
        known.shape,
        known.dtype,
        group.target_json,
        group.kind,
        group.space,
        tuple(group.records),
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _exported_template_config(space: Any, sch: Any) -> dict[str, Any] | None:
    """The config a template schedule of tunelab's own export names (its root block's
    ``tunelab.config`` annotation, tunelab.core.export.files), when the template rebuilds exactly that
    schedule from it; None otherwise (no such annotation, or a config that is not this schedule's)."""
    import tvm_ffi

    from tunelab.core.export.files import CONFIG_ANNOTATION

    named = [
        inst.inputs[1]
        for inst in sch.trace.insts
        if inst.kind.name == "Annotate" and str(inst.attrs[0]) == CONFIG_ANNOTATION
    ]
    if len(named) != 1:
        return None
    try:
        config = json.loads(str(named[0]))
        if not isinstance(config, dict):
            return None
        space.check_config(config)
        rebuilt = space.schedule(config)
        rebuilt.annotate(rebuilt.get_sblock("root"), CONFIG_ANNOTATION, str(named[0]))
    except Exception:  # noqa: BLE001 - bad JSON, a config off the template, TVM refusing it: not this schedule's
        return None
    return config if tvm_ffi.structural_equal(rebuilt.mod, sch.mod) else None


def _opaque_workload(
    mod: Any, records: list[ImportedRecord], target_json: dict[str, Any], index: int
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
    traces = [json.loads(r.trace_text) for r in records]
    space = RecordSpace(workload, {}, workload.dtypes[0], target_from_json(target_json), {"traces": traces})
    return ImportedWorkload(
        TIR_NAME, {}, workload.dtypes[0], target_json, RECORDS_KIND, space, tuple(records), workload.source
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

"""Read an exported schedule file back: check it, apply its trace to its workload, compile it."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError, shown
from tunelab.core.export.schedule_doc import SCHEDULE_FORMAT
from tunelab.core.target.build import build_scope


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
    decision, a decision for an instruction that does not exist, a zero tile factor, a null input."""
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
        # TVM writes a split's inferred factor as the string "None": a null input is never its own, and a
        # null where a loop or block belongs crashes the replay (SIGSEGV: found by test_fuzz_parsers).
        if _has_null(inst[1]):
            return f"instruction {i} of the trace ({inst[0][:40]}) has a null input"
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

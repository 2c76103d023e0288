"""Catch engine work that the app runs on the GUI thread: a profile hook on the main thread.

Engine work is anything that runs TVM, a cost-model or sampler library, or tunelab's own engine
(sessions, measuring, spaces, tuners, cost models, target checks, the trust reports, exports,
workloads): see ENGINE_ROOTS. The GUI thread may read the store, format records and draw; the rest
belongs to a worker (tunelab.app.workers) or a child process.

``sys.setprofile`` sets the hook for the calling thread only, so the app's worker threads run
unwatched, as they should. A call is a violation only when app code is on the stack below it: the
tests themselves (and their fixtures) call the engine on the main thread to plant what they check.
"""

from __future__ import annotations

import sys
import sysconfig
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path


def _package_dir(name: str) -> str | None:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).resolve()) + "/"


_CORE = Path(find_spec("tunelab.core").submodule_search_locations[0]).resolve()  # type: ignore[index,union-attr]
_APP = str(Path(find_spec("tunelab.app").submodule_search_locations[0]).resolve()) + "/"  # type: ignore[index,union-attr]

# The engine: third-party libraries that compile, measure or model (importing one is work: optuna takes
# about a second), and tunelab's packages that call them.
LIBRARIES: tuple[str, ...] = tuple(
    root for root in (_package_dir(name) for name in ("tvm", "xgboost", "optuna", "torch", "sklearn")) if root
)
ENGINE_ROOTS: tuple[str, ...] = LIBRARIES + tuple(
    str(_CORE / sub) + "/"
    for sub in ("session", "measure", "search", "target", "trust", "export", "workloads", "telemetry")
)
# TVM installs these process-wide (an import finder, inspect.getfile): every import passes through them,
# on any thread, so they say nothing about where engine work runs.
TVM_HOOKS = frozenset({"find_spec", "_patched_inspect_getfile"})
# Engine files that only hold words and tables (no computing): the app may read them on the GUI thread.
NOT_ENGINE: tuple[str, ...] = (str(_CORE / "workloads" / "shape_text.py"),)
# App functions that run a full garbage collection on purpose (at moments busy anyway): the finalizers of
# engine objects that workers left in reference cycles (a TVM process pool, an XGBoost booster) run there,
# on whichever thread collects, and which objects are still cyclic garbage then depends on when the
# collector last ran. Those finalizers are where objects die, not engine work the app asked for.
COLLECTS_GARBAGE = frozenset({"settle_heap"})
# Functions in engine packages that only read the store, word a record or look up a table: the GUI
# thread may call them (what a view shows must be worded somewhere). "package path:function".
WORDS_READS_AND_TABLES: dict[str, str] = {
    "core/export/pick.py:export_pick": "reads the store: which trial an export would write, and its figures",
    "core/export/pick.py:stated_ms": "a pick's stated figure",
    "core/export/pick.py:summary": "a pick's one line",
    "core/export/pick.py:sensitive": "a pick's placement words",
    "core/export/pick.py:untrusted_because": "a pick's reason not to trust it",
    "core/export/stated.py:mark": "a stated figure's mark",
    "core/export/stated.py:trusted": "a stated figure's trust",
    "core/export/stated.py:words": "a stated figure in words",
    "core/export/stated.py:stated_best": "a session's stated best, from its record",
    "core/export/stated.py:stated_from_pick": "a stated figure from a pick",
    "core/trust/jitter_records.py:pct": "a percentage in words",
    "core/trust/jitter_records.py:signed": "a signed number in words",
    "core/trust/jitter_records.py:title": "a cause's title",
    "core/trust/remeasure/report.py:from_json": "a stored validation report, decoded",
    "core/trust/remeasure/schedule_result.py:confirmed": "a validation result's field",
    "core/trust/roofline.py:compute_dtype": "a session's dtype, from its spec",
    "core/trust/roofline.py:schedule_sentence": "a roofline figure in words",
    "core/trust/baselines.py:doubt": "a vendor baseline's doubt in words",
    "core/telemetry/readings.py:throttled": "a stored reading's throttle flag",
    "core/search/models.py:cost_model_names": "the cost models' names",
    "core/search/tuners/registry.py:tuner_names": "the tuners' names",
    "core/search/tuners/registry.py:tuner_description": "a tuner's one line",
    "core/search/tuners/registry.py:tuner_space_kinds": "the space kinds a tuner drives",
    "core/search/tuners/registry.py:recommend_tuner": "a table of space sizes (the size comes from a worker)",
    "core/workloads/base.py:parse_shape": "a shape's text, parsed",
    "core/workloads/catalog.py:list_workloads": "the catalog's table of operators",
}


@dataclass
class GuiThreadWatch:
    """What the hook saw: each engine entry point the app reached on the GUI thread, with its app caller."""

    violations: dict[tuple[str, str], str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"{engine}  <-  {caller}" for (engine, caller) in sorted(self.violations)]


# Python's own frames between a caller and what it reached (an import, a class statement's metaclass).
_PASSED_OVER = ("<frozen ", sysconfig.get_paths()["stdlib"] + "/")
_ROOT = str(_CORE.parent) + "/"  # core/ and app/ sit here (the repository, in an editable install)


def _where(path: str, name: str) -> str:
    """`path` (resolved) shortened to its package path: "core/search/scoring.py:score_curve", "tvm/te/..."."""
    if "/site-packages/" in path:
        path = path.split("/site-packages/", 1)[1]
    elif path.startswith(_ROOT):
        path = path[len(_ROOT) :]
    return f"{path}:{name}"


def _is_engine(path: str) -> bool:
    return path.startswith(ENGINE_ROOTS) and not path.startswith(NOT_ENGINE)


def _is_entry(path: str, name: str, caller_path: str | None) -> bool:
    """An engine call entered from outside the engine. A library's import counts once (where the first of
    its modules runs); a tunelab module's own import runs definitions, not work (what it imports may be)."""
    if not _is_engine(path):
        return False
    if name == "<module>":
        return path.startswith(LIBRARIES) and not (caller_path or "").startswith(LIBRARIES)
    return caller_path is None or not _is_engine(caller_path)


@contextmanager
def engine_calls_on_gui_thread() -> Iterator[GuiThreadWatch]:
    """Watch the main thread while the body runs; yields the record of what the app ran there."""
    assert threading.current_thread() is threading.main_thread(), "watch from the GUI (main) thread"
    watch = GuiThreadWatch()
    resolved: dict[str, str] = {}

    def real(path: str) -> str:
        found = resolved.get(path)
        if found is None:
            found = resolved[path] = str(Path(path).resolve()) if path.startswith("/") else path
        return found

    def hook(frame, event, _arg) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name in TVM_HOOKS:
            return
        path = real(code.co_filename)
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename.startswith(_PASSED_OVER):
            caller = caller.f_back  # the import machinery, abc's metaclass: who called it is the caller
        if not _is_entry(path, code.co_name, None if caller is None else real(caller.f_code.co_filename)):
            return
        if code.co_name == "__del__" and caller is not None and caller.f_code.co_name in COLLECTS_GARBAGE:
            return
        entry = _where(path, code.co_name)
        if entry in WORDS_READS_AND_TABLES:
            return
        while caller is not None:
            caller_path = real(caller.f_code.co_filename)
            if caller_path.startswith(_APP):
                watch.violations.setdefault((entry, _where(caller_path, caller.f_code.co_name)), "")
                return
            caller = caller.f_back

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield watch
    finally:
        sys.setprofile(previous)

"""TVM, imported once, on one thread, before anything in the app uses it.

TVM's packages import each other in cycles (``tvm`` -> ``tvm.runtime`` -> ``tvm.target`` -> ``tvm``).
When two threads import them at once, Python's deadlock avoidance hands one thread a module that the
other is still running, and TVM is left half initialised for the rest of the process
(``cannot import name 'Device' from partially initialized module 'tvm.runtime'``, then
``module 'tvm.runtime._ffi_node_api' has no attribute '_const'`` on every later use). A relaunch on a
store with sessions did exactly that: the target probe's worker imported TVM while the session list
described a stored target on the GUI thread.

So the app imports TVM in one place: :func:`start` begins the import on a thread of its own (about
1.5 s; the main window starts it before anything else), every worker waits for it before its work
(:func:`wait`), and the GUI thread only uses TVM once :func:`ready` says the import has finished, so
what it touches is already in ``sys.modules`` and nothing is imported on it.
"""

from __future__ import annotations

import importlib
import threading

from tunelab.core.errors import TunelabError

THREAD_NAME = "tunelab-tvm-import"
# What the app's workers and the GUI's look-ups reach: the packages with import cycles among them, and
# MetaSchedule (which pulls in the schedule, script and transform packages). Not tvm.s_tir.tensor_intrin:
# it takes over 10 s and only tensor-core spaces need it (imported in the worker that builds one,
# after this import, when every package it reaches is complete).
TVM_MODULES = (
    "tvm",
    "tvm.runtime",
    "tvm.target",
    "tvm.target.codegen",
    "tvm.tirx",
    "tvm.te",
    "tvm.script",
    "tvm.s_tir",
    "tvm.s_tir.meta_schedule",
    "tvm.rpc",
    "tvm.support",
    "tvm.support.popen_pool",
    "tvm.ir",
    "tvm_ffi",
)


class TvmImportFailed(TunelabError):
    """TVM could not be imported in this process: no engine work can run until the app restarts."""


_started = threading.Lock()
_done = threading.Event()
_thread: threading.Thread | None = None
_error: str | None = None


def _load() -> None:
    global _error
    try:
        for name in TVM_MODULES:
            importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - said to every waiter, never raised in this thread
        _error = f"{type(exc).__name__}: {exc}"
    finally:
        _done.set()


def start() -> None:
    """Begin importing TVM on its own thread (once per process; later calls do nothing)."""
    global _thread
    with _started:
        if _thread is None:
            _thread = threading.Thread(target=_load, name=THREAD_NAME, daemon=True)
            _thread.start()


def ready() -> bool:
    """True once TVM is imported completely (the GUI thread may then use it: nothing is imported)."""
    return _done.is_set() and _error is None


def wait(timeout_s: float | None = None) -> None:
    """Block until TVM is imported (starting the import if nobody has), or raise TvmImportFailed."""
    start()
    if not _done.wait(timeout_s):
        raise TvmImportFailed(f"TVM is still being imported after {timeout_s:g} s")
    if _error is not None:
        raise TvmImportFailed(f"TVM could not be imported ({_error}); restart tunelab after fixing it")

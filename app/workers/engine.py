"""The one owner of engine work started from the GUI: tuning and the bias report in `tunelab` child
processes, validation, export and figures in threads; the GUI learns their progress only from here.

A child runs a `tunelab` command (the same use cases the command line runs) with ``--events-fd``, and
this module reads its JSON-lines events (tunelab.core.cli.protocol): a session's id, when it listens
to signals, its stages, its trials, its error in one line and its end. Its stderr is kept only as the
details of an error. Pause / resume / stop reach a tuning child as SIGUSR1 / SIGUSR2 / SIGTERM.

In a thread, superqt's GeneratorWorker shape: the thread opens its own Store (SQLite connections belong
to the thread that made them), calls the core and emits the result (and, for a StreamWorker, what it
reports as it goes). Stopping is cooperative: cancel only sets a flag the core checks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import tempfile
import threading
import traceback
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QThread, Signal
from shiboken6 import isValid

from tunelab.app.workers import tvm_loader
from tunelab.app.workers.child import ChildFailed, EngineChild
from tunelab.core.errors import Cancelled as CoreCancelled
from tunelab.core.errors import TunelabError
from tunelab.core.records import BiasReport, SessionRecord, SessionSpec
from tunelab.core.store import Store

WorkerT = TypeVar("WorkerT", bound=QThread)

_live: weakref.WeakSet[QThread] = weakref.WeakSet()
_kept: set[QThread] = set()


def running_workers() -> list[QThread]:
    """Workers whose thread is still running (tests use it to catch leaked threads)."""
    return [w for w in list(_live) if isValid(w) and w.isRunning()]


def keep_alive(worker: WorkerT) -> WorkerT:
    """Hold a parentless worker until its thread has finished, then delete it: a view that goes away
    while its worker still runs must not take the running QThread with it."""
    _kept.add(worker)

    def done() -> None:
        _kept.discard(worker)
        worker.deleteLater()

    worker.finished.connect(done)
    return worker


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(message for people, details). A TunelabError's message is meant for the user as is."""
    if isinstance(exc, ChildFailed):
        return str(exc), exc.details
    if isinstance(exc, TunelabError | CoreCancelled):
        return str(exc), ""
    return f"Unexpected error: {type(exc).__name__}: {exc}", traceback.format_exc()


class TuningWorker(QThread):
    """Creates (from a spec) or resumes (from an id) one session and runs it to its end.

    Everything that needs TVM runs in a child process, `tunelab tune --spec FILE` for a new session
    (the spec written to a temporary file) or `tunelab tune --resume ID`: importing the tuning loop,
    building the search space, building schedules, extracting features and fitting models hold
    Python's GIL for long stretches, which in this process would stall the GUI thread. This thread
    starts the child, learns a new session's id from its ``session`` event, relays pause / resume /
    stop to it as signals once its ``ready`` event says it listens, and emits each trial the child
    stores (read from the store when the child's ``trial`` event says one is there).
    """

    session_ready = Signal(int)  # the session id, once it is stored
    trial_done = Signal(object)  # tunelab.core.records.TrialRecord
    stage = Signal(str)  # what the session does besides trials (e.g. confirming its winners), in words
    failed = Signal(str, str)  # message, details

    POLL_S = 0.1  # the longest wait for news from the child

    def __init__(
        self,
        db_path: str | Path,
        *,
        spec: SessionSpec | None = None,
        session_id: int | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        if (spec is None) == (session_id is None):
            raise ValueError("give a spec (new session) or a session_id (resume), not both")
        self._db_path = Path(db_path)
        self._spec = spec
        self._session_id = session_id
        self._child: EngineChild | None = None
        self._ready = (
            threading.Event()
        )  # the child has installed its signal handlers (and stored the session)
        self._news = threading.Event()  # the child stored a trial, or ended
        self._lock = threading.Lock()
        self._paused = False
        self._cancelled = False
        self._left_running = False
        self.n_yielded = 0
        _live.add(self)

    # ---- control (GUI thread) ------------------------------------------------------------------
    @property
    def session_id(self) -> int | None:
        """The session's id; for a new session None until the child has stored it (`session_ready`)."""
        return self._session_id

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def pause(self) -> None:
        with self._lock:
            self._paused = True
            self._signal(signal.SIGUSR1)

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            self._signal(signal.SIGUSR2)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            self._paused = False
            self._signal(signal.SIGTERM)

    def leave_running(self) -> None:
        """Let go of the child without stopping it: the session tunes on by itself (it is in the
        store, with its runner's pid) and this thread ends soon after. The next window that opens the
        store follows it as it follows any `tunelab tune` run, and can pause or stop it."""
        with self._lock:
            self._left_running = True
        self._news.set()

    def _signal(self, signum: int) -> None:
        """Send now if the child listens; otherwise `_on_event` applies the flags once it does."""
        child = self._child
        if child is not None and child.poll() is None and self._ready.is_set():
            os.kill(child.pid, signum)

    # ---- the thread ----------------------------------------------------------------------------
    def run(self) -> None:
        store: Store | None = None
        spec_file: str | None = None
        try:
            store = Store(self._db_path)
            last_id = 0
            if self._spec is None:
                assert self._session_id is not None  # a resume names its session (see __init__)
                session_id = self._session_id = store.session(self._session_id).id
                self.session_ready.emit(session_id)
                if self._cancelled:
                    store.set_status(session_id, "cancelled")
                    return
                last_id = max((t.id for t in store.trials(session_id)), default=0)
                what = ["--resume", str(session_id)]
            else:
                # The child checks the spec (a bad one exits 2 with one line, storing nothing) and
                # creates the session; a cancel before it is ready still lets it store the session
                # and end it as cancelled, as a cancel right after the start always did.
                fd, spec_file = tempfile.mkstemp(prefix="tunelab-spec-", suffix=".json")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(self._spec.to_json(), f)
                what = ["--spec", spec_file]
            with self._lock:
                self._child = EngineChild(
                    ["tune", *what, "--db", str(self._db_path), "--json"],
                    what="the tuning process",
                    on_event=self._on_event,
                    outlive_app=True,
                )
            child = self._child
            while True:
                self._news.wait(self.POLL_S)
                self._news.clear()
                if self._left_running:
                    return
                done = child.poll() is not None
                if done:
                    child.wait()  # every event read: the session id, the last stage, the error
                if self._session_id is not None and (self._spec is None or self._ready.is_set()):
                    for trial in store.trials(self._session_id, since_id=last_id):
                        last_id = trial.id
                        self.n_yielded += 1
                        self.trial_done.emit(trial)
                if done:
                    break
            failure = child.failure()  # a stop (SIGINT / SIGTERM: the session cancelled) is not one
            if failure is not None:
                self.failed.emit(*failure)
        except BaseException as exc:  # noqa: BLE001 - everything becomes a message, never a crash
            self.failed.emit(*describe_error(exc))
        finally:
            if self._child is not None and not self._left_running:
                self._child.stop()
            # A child left running before it stored the session may not have read its spec yet.
            if spec_file is not None and (not self._left_running or self._session_id is not None):
                with contextlib.suppress(OSError):
                    os.unlink(spec_file)
            if store is not None:
                store.close()

    def _on_event(self, event: dict[str, Any]) -> None:
        """One event from the child (its events reader thread)."""
        kind = event["event"]
        if kind == "stage":
            self.stage.emit(str(event.get("text", "")))
        elif kind == "session" and self._spec is not None and self._session_id is None:
            # Before `_ready`: the run loop polls trials only after that, so session_ready reaches the
            # GUI before the first trial_done.
            self._session_id = int(event["session_id"])
            self.session_ready.emit(self._session_id)
        elif kind == "ready" and not self._ready.is_set():
            with self._lock:
                self._ready.set()
                # What the GUI asked for while the child was starting.
                child = self._child
                if child is not None:
                    if self._cancelled:
                        os.kill(child.pid, signal.SIGTERM)
                    elif self._paused:
                        os.kill(child.pid, signal.SIGUSR1)
        elif kind in ("trial", "done"):
            self._news.set()


def runner_pid(record: SessionRecord) -> int | None:
    """The pid of the `tunelab` process on this host that tunes ``record``'s session (a `tunelab tune`
    run, or a session a closed window left running), None when there is none to steer from here.

    The store already reads a session whose runner is gone as crashed; the command line is checked as
    well, so that a pid the OS has handed to some other program never gets tunelab's signals."""
    if record.status not in ("running", "paused") or record.pid is None or record.pid == os.getpid():
        return None
    if record.hostname != socket.gethostname():
        return None
    try:
        import psutil

        command = " ".join(psutil.Process(record.pid).cmdline())
    except Exception:  # noqa: BLE001 - gone, or not ours to read: not ours to signal either
        return None
    return record.pid if "tunelab" in command else None


def signal_runner(record: SessionRecord, signum: int) -> None:
    """Send ``signum`` (SIGUSR1 pause, SIGUSR2 resume, SIGTERM stop; tunelab.core.cli.tuning) to the
    process tuning ``record``'s session; a TunelabError in words when there is none."""
    pid = runner_pid(record)
    if pid is None:
        raise TunelabError(f"session {record.id} is not being tuned by a tunelab process on this machine")
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        raise TunelabError(f"session {record.id}'s tuning process (pid {pid}) has just ended") from None


def bias_report_in_child(
    store: Store, session_ids: list[int], k: int, model: str | None = None
) -> BiasReport:
    """tunelab.core.trust.bias's report by task, with the points for the plots
    (:func:`tunelab.core.trust.bias.bias_report_by_task`), computed in a child process
    (``tunelab bias --by-task --json``): on 100k trials it is seconds of Python that, in a thread of
    this process, held the GIL long enough to stall the GUI for 0.5 s. ``model``: that cost model's
    predictions (``--model``: a shadow model's, or the model refit out of sample) instead of the stored
    ones. Its error is a ChildFailed."""
    child = EngineChild(
        [
            "bias",
            *(str(i) for i in session_ids),
            "--top-k",
            str(k),
            *(["--model", model] if model is not None else []),
            "--by-task",
            "--json",
            "--db",
            str(store.path),
        ],
        what="the bias report's process",
        capture_stdout=True,
    )
    try:
        child.wait()
    finally:
        child.stop()
    failure = child.failure()
    if failure is not None:
        raise ChildFailed(*failure)
    if child.proc.returncode != 0:
        raise CoreCancelled("the bias report was stopped")
    return BiasReport.from_json(json.loads(child.stdout))


class CallWorker(QThread):
    """Runs `fn(store, *args)` once in a thread with its own Store (`fn(*args)` without one when
    ``db_path`` is None: work that touches no store, e.g. a target's self-check); emits the result or
    the error."""

    succeeded = Signal(object)
    failed = Signal(str, str)

    def __init__(
        self,
        db_path: str | Path | None,
        fn: Callable[..., Any],
        *args: Any,
        parent: QObject | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(parent)
        self._db_path = None if db_path is None else Path(db_path)
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        _live.add(self)

    def run(self) -> None:
        store: Store | None = None
        try:
            # Any core call may reach TVM, often through a lazy import deep inside: every worker
            # waits for the app's one import of it (tvm_loader) rather than risk a second one.
            tvm_loader.wait()
            if self._db_path is None:
                result = self._fn(*self._args, **self._kwargs)
            else:
                store = Store(self._db_path)
                result = self._fn(store, *self._args, **self._kwargs)
        except BaseException as exc:  # noqa: BLE001
            self.failed.emit(*describe_error(exc))
        else:
            self.succeeded.emit(result)
        finally:
            if store is not None:
                store.close()


class Cancelled(CoreCancelled):
    """Raised inside a StreamWorker's function once the GUI asked it to stop."""


class StreamWorker(CallWorker):
    """A CallWorker whose function also reports as it goes: it is called as
    ``fn(store, *args, emit=..., is_cancelled=..., **kwargs)``; whatever it passes to ``emit`` arrives
    on the GUI thread as ``progress``, and ``is_cancelled()`` turns true after :meth:`cancel`
    (stopping is cooperative: the function checks it where it can stop cleanly)."""

    progress = Signal(object)

    def __init__(
        self,
        db_path: str | Path,
        fn: Callable[..., Any],
        *args: Any,
        parent: QObject | None = None,
        **kwargs: Any,
    ) -> None:
        self._cancel = threading.Event()
        super().__init__(
            db_path,
            fn,
            *args,
            parent=parent,
            emit=self._emit,
            is_cancelled=self._cancel.is_set,
            **kwargs,
        )

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()

    def _emit(self, item: Any) -> None:
        self.progress.emit(item)


class BiasWorker(CallWorker):
    """The bias report of `session_ids` (top `k`; of cost model `model`, None: the stored predictions) in a
    child process (:func:`bias_report_in_child`), from a thread; `succeeded` carries the BiasReport."""

    def __init__(
        self,
        db_path: str | Path,
        session_ids: list[int],
        k: int,
        model: str | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(db_path, bias_report_in_child, list(session_ids), k, model, parent=parent)

"""Workers: the tuning loop (and other slow core calls) off the GUI thread.

superqt's GeneratorWorker shape: the thread opens its own Store (SQLite connections belong to the
thread that made them), iterates the core's generator and emits one signal per yielded record.
Stopping is cooperative: pause / resume / cancel only set flags the core's loop checks.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal
from shiboken6 import isValid

from tunelab.core.errors import Cancelled as CoreCancelled
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionSpec
from tunelab.core.store import Store

_live: weakref.WeakSet[QThread] = weakref.WeakSet()
_kept: set[QThread] = set()


def running_workers() -> list[QThread]:
    """Workers whose thread is still running (tests use it to catch leaked threads)."""
    return [w for w in list(_live) if isValid(w) and w.isRunning()]


def keep_alive(worker: QThread) -> QThread:
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
    if isinstance(exc, TunelabError | CoreCancelled):
        return str(exc), ""
    return f"Unexpected error: {type(exc).__name__}: {exc}", traceback.format_exc()


class TuningWorker(QThread):
    """Creates (from a spec) or resumes (from an id) one session and runs it to its end.

    Everything that needs TVM runs in a child process, `tunelab tune --spec FILE` for a new session
    (the spec written to a temporary file) or `tunelab tune --resume ID`: importing the tuning loop,
    building the search space, building schedules, extracting features and fitting models hold
    Python's GIL for long stretches, which in this process would stall the GUI thread. This thread
    starts the child, learns a new session's id from the child's "session N: <CONTROL_READY>" line
    on stderr, relays pause / resume / stop to it as signals and emits each trial the child stores.
    """

    session_ready = Signal(int)  # the session id, once it is stored
    trial_done = Signal(object)  # tunelab.core.records.TrialRecord
    stage = Signal(str)  # what the session does besides trials (e.g. confirming its winners), in words
    failed = Signal(str, str)  # message, details

    POLL_S = 0.1

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
        self._proc: subprocess.Popen | None = None
        self._ready = (
            threading.Event()
        )  # the child has installed its signal handlers (and stored the session)
        self._lock = threading.Lock()
        self._paused = False
        self._cancelled = False
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

    def _signal(self, signum: int) -> None:
        """Send now if the child listens; otherwise `_read_stderr` applies the flags once it does."""
        if self._proc is not None and self._proc.poll() is None and self._ready.is_set():
            os.kill(self._proc.pid, signum)

    # ---- the thread ----------------------------------------------------------------------------
    def run(self) -> None:
        store: Store | None = None
        spec_file: str | None = None
        stderr_lines: list[str] = []
        try:
            store = Store(self._db_path)
            last_id = 0
            if self._spec is None:
                session_id = self._session_id = store.session(int(self._session_id)).id
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
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "tunelab", "tune", *what, "--db", str(self._db_path), "--json"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    bufsize=1,
                )
            reader = threading.Thread(target=self._read_stderr, args=(self._proc, stderr_lines), daemon=True)
            reader.start()
            while True:
                done = self._proc.poll() is not None
                if done:
                    reader.join(timeout=5)  # every line read: the session id, the last stage, the error
                if self._session_id is not None and (self._spec is None or self._ready.is_set()):
                    for trial in store.trials(self._session_id, since_id=last_id):
                        last_id = trial.id
                        self.n_yielded += 1
                        self.trial_done.emit(trial)
                if done:
                    break
                time.sleep(self.POLL_S)
            # 130 / 143: stopped by SIGINT / SIGTERM (tunelab.core.cli.main), the session cancelled; not a failure.
            if self._proc.returncode not in (0, 130, 143, -signal.SIGTERM):
                message = next((line for line in reversed(stderr_lines) if line.strip()), "").strip()
                message = message.removeprefix("tunelab: error: ").removeprefix("tunelab: ") or (
                    f"the tuning process ended with exit code {self._proc.returncode}"
                )
                self.failed.emit(message, "".join(stderr_lines[-40:]))
        except BaseException as exc:  # noqa: BLE001 - everything becomes a message, never a crash
            self.failed.emit(*describe_error(exc))
        finally:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()
                self._proc.wait(timeout=60)
            if spec_file is not None:
                with contextlib.suppress(OSError):
                    os.unlink(spec_file)
            if store is not None:
                store.close()

    def _read_stderr(self, proc: subprocess.Popen, lines: list[str]) -> None:
        from tunelab.core.cli.main import CONTROL_READY, STAGE_MARK

        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if line.startswith(STAGE_MARK):
                self.stage.emit(line[len(STAGE_MARK) :].strip())
            if CONTROL_READY in line and not self._ready.is_set():
                announce = self._spec is not None
                found = _SESSION_LINE.match(line)
                with self._lock:
                    if announce and found is not None:
                        # Before `_ready`: the run loop polls trials only after this, so
                        # session_ready reaches the GUI before the first trial_done.
                        self._session_id = int(found.group(1))
                        self.session_ready.emit(self._session_id)
                    self._ready.set()
                    # What the GUI asked for while the child was starting.
                    if self._cancelled:
                        os.kill(proc.pid, signal.SIGTERM)
                    elif self._paused:
                        os.kill(proc.pid, signal.SIGUSR1)


_SESSION_LINE = re.compile(r"\s*session (\d+): ")


class CallWorker(QThread):
    """Runs `fn(store, *args)` once in a thread with its own Store; emits the result or the error."""

    succeeded = Signal(object)
    failed = Signal(str, str)

    def __init__(
        self,
        db_path: str | Path,
        fn: Callable[..., Any],
        *args: Any,
        parent: QObject | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(parent)
        self._db_path = Path(db_path)
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        _live.add(self)

    def run(self) -> None:
        store: Store | None = None
        try:
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
            db_path, fn, *args, parent=parent, emit=self._emit, is_cancelled=self._cancel.is_set, **kwargs
        )

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()

    def _emit(self, item: Any) -> None:
        self.progress.emit(item)

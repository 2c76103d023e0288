"""The events a `tunelab` child process reports to the process that started it: JSON lines on a pipe.

A controller (the desktop app runs `tunelab tune` and `tunelab bias` as child processes) opens a pipe,
passes its write end to the child (``pass_fds``) and names it with ``--events-fd N``. The child writes
one JSON object per line to that descriptor and nothing else; stderr stays for people (the progress
bar, notes, the one-line error), stdout for the command's ``--json`` document. Without ``--events-fd``
no event is written anywhere.

Every event has ``"event"``; the others, in the order a child writes them::

    {"event": "session", "session_id": 7}          the session is stored (new) or loaded (resumed)
    {"event": "ready", "session_id": 7}            SIGUSR1 pauses, SIGUSR2 resumes, SIGTERM stops it from
                                                   now on (before this a SIGUSR1 or SIGUSR2 would kill it)
    {"event": "trial", "trial_id": 42, "ok": true, "done": 5, "total": 64}
                                                   a trial is stored (`done` of the budget `total`)
    {"event": "stage", "text": "confirming ..."}   what the session does besides trials, in words
    {"event": "error", "message": "...", "exit_code": 2}
                                                   the command failed; `message` is the line stderr shows
                                                   after ``tunelab: error: `` (or ``tunelab: ``)
    {"event": "done", "exit_code": 0}              always the last event: the command is over

``session``, ``ready``, ``trial`` and ``stage`` come from `tunelab tune` only; ``error`` and ``done`` from
every command given ``--events-fd``. A stop (SIGINT, SIGTERM) is no error: the child writes ``done`` with
exit code 130 or 143. A command line that cannot be parsed is said on stderr only (its events
descriptor is not known yet), and a child that dies writes no ``done``: the controller then goes by
the exit status. Exit codes: tunelab.core.cli.main.

Qt-free and without TVM: the command line writes these events, the desktop app reads them
(:func:`parse_event`).
"""

from __future__ import annotations

import json
import os
import threading
from typing import IO, Any

from tunelab.core.errors import TunelabError

EVENTS_FD_OPTION = "--events-fd"
EVENTS = ("session", "ready", "trial", "stage", "error", "done")


class EventWriter:
    """Writes events as JSON lines to one file; a writer without a file writes nothing.

    A controller that went away (a closed pipe) does not stop the work: later events are dropped,
    as a closed stderr would drop the progress bar."""

    def __init__(self, file: IO[str] | None) -> None:
        self._file = file
        self._lock = threading.Lock()  # stage events may come from another thread than trial events

    @property
    def active(self) -> bool:
        return self._file is not None

    def emit(self, event: str, **fields: Any) -> None:
        if event not in EVENTS:
            raise ValueError(f"unknown event {event!r}")
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.write(json.dumps({"event": event, **fields}) + "\n")
                self._file.flush()
            except (OSError, ValueError):  # the reader closed its end
                self._file = None

    def session(self, session_id: int) -> None:
        self.emit("session", session_id=session_id)

    def ready(self, session_id: int) -> None:
        self.emit("ready", session_id=session_id)

    def trial(self, trial_id: int, *, ok: bool, done: int, total: int) -> None:
        self.emit("trial", trial_id=trial_id, ok=ok, done=done, total=total)

    def stage(self, text: str) -> None:
        self.emit("stage", text=text)

    def error(self, message: str, exit_code: int) -> None:
        self.emit("error", message=message, exit_code=exit_code)

    def done(self, exit_code: int) -> None:
        self.emit("done", exit_code=exit_code)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError:
                    pass
                self._file = None


NO_EVENTS = EventWriter(None)


def open_events(fd: int | None) -> EventWriter:
    """The writer for descriptor `fd` (``--events-fd``), or one that writes nothing without it; a
    descriptor that is not open for writing is a TunelabError."""
    if fd is None:
        return EventWriter(None)
    if fd < 3:  # stdin, stdout (the --json document) and stderr (people) are taken
        raise TunelabError(
            f"events need a file descriptor of their own (3 or more), not {fd}", option="events_fd"
        )
    try:
        return EventWriter(os.fdopen(fd, "w", encoding="utf-8", buffering=1))
    except OSError as exc:
        raise TunelabError(
            f"cannot write events to file descriptor {fd}: {exc.strerror or exc}", option="events_fd"
        ) from None


def parse_event(line: str) -> dict[str, Any] | None:
    """One line a child wrote, as its event; None for a line that is not one (the controller skips it)."""
    try:
        event = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(event, dict) or event.get("event") not in EVENTS:
        return None
    return event

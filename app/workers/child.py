"""One `tunelab` command in a child process (``python -m tunelab ARGS --events-fd N``): its JSON-lines
events read as they come (tunelab.core.cli.protocol), its stderr kept for an error's details, its stdout
when asked, and its end in words."""

from __future__ import annotations

import collections
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import IO, Any

from tunelab.core.cli.protocol import EVENTS_FD_OPTION, parse_event
from tunelab.core.errors import TunelabError
from tunelab.core.faults import describe_exit
from tunelab.core.usecases.monitor import ROOT_PID_ENV

STOPPED_EXIT_CODES = (130, 143, -signal.SIGTERM)  # SIGINT / SIGTERM: the work was stopped, not failed
DETAIL_LINES = 40  # the end of a failed child's stderr kept as the error's details


class ChildFailed(TunelabError):
    """A `tunelab` child process ended in failure: its message, and the end of its stderr as details."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


class EngineChild:
    """One `tunelab` command in a child process (``python -m tunelab ARGS --events-fd N``).

    Threads read its events (each handed to `on_event` as it comes), its stderr (kept for details)
    and, given ``capture_stdout``, its stdout (the command's ``--json`` document)."""

    def __init__(
        self,
        args: list[str],
        *,
        what: str,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        capture_stdout: bool = False,
        outlive_app: bool = False,
    ) -> None:
        self.what = what  # the child in words, for a message: "the tuning process"
        self._on_event = on_event
        self.error: dict[str, Any] | None = None  # its "error" event
        self.done: dict[str, Any] | None = None  # its "done" event
        self._stdout: list[str] = []
        # stderr goes to an unlinked file, not a pipe: a child that outlives the app (a session left
        # running) would otherwise write its warnings into a pipe nobody reads and die of EPIPE.
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", prefix="tunelab-child-")
        # The child shares this file's offset: append mode makes its writes land at the end whatever
        # this process's reads of the tail do to the offset.
        fcntl.fcntl(
            self._stderr.fileno(),
            fcntl.F_SETFL,
            fcntl.fcntl(self._stderr.fileno(), fcntl.F_GETFL) | os.O_APPEND,
        )
        self._stderr_tail = ""
        read_end, write_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tunelab", *args, EVENTS_FD_OPTION, str(write_end)],
                pass_fds=(write_end,),
                # The app and all it starts are one tunelab: the child's telemetry never calls them
                # busy neighbours (tunelab.core.telemetry.cpu.session_root_pid).
                env={**os.environ, ROOT_PID_ENV: str(os.getpid())},
                stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
                stderr=self._stderr,
                text=True,
                bufsize=1,
                # Its own session and process group: the terminal's Ctrl-C or hang-up, meant for the app,
                # does not reach a child that is to outlive it; the app stops it with a signal of its own.
                start_new_session=outlive_app,
            )
        except BaseException:
            os.close(read_end)
            self._stderr.close()
            raise
        finally:
            os.close(write_end)  # the child holds it now: the events end when the child does
        events = os.fdopen(read_end, encoding="utf-8")
        self._readers = [threading.Thread(target=self._read_events, args=(events,), daemon=True)]
        if capture_stdout:
            assert self.proc.stdout is not None
            self._readers.append(
                threading.Thread(target=self._read_lines, args=(self.proc.stdout, self._stdout), daemon=True)
            )
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self) -> int:
        """Wait for the child to end and for every event and line it wrote to be read."""
        code = self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        self._close_stderr()
        return code

    def stop(self) -> None:
        """End a child still running (SIGTERM: it stops cleanly) and wait for it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self._close_stderr()

    @property
    def stdout(self) -> str:
        return "".join(self._stdout)

    def failure(self) -> tuple[str, str] | None:
        """(message, details) when the child ended in failure, None when it succeeded or was stopped.
        The message is its error event's; without one (it died) the exit status in words."""
        code = self.proc.returncode
        if code is None or code == 0 or code in STOPPED_EXIT_CODES:
            return None
        message = self.error["message"] if self.error else f"{self.what} {describe_exit(code)}"
        return str(message), self.stderr_tail()

    def stderr_tail(self) -> str:
        """The last lines (DETAIL_LINES) the child wrote to stderr, so far or, once it ended, in all."""
        if self._stderr.closed:
            return self._stderr_tail
        self._stderr.flush()
        self._stderr.seek(0)
        tail = "".join(collections.deque(self._stderr, maxlen=DETAIL_LINES))
        self._stderr.seek(0, os.SEEK_END)
        return tail

    def _close_stderr(self) -> None:
        """Keep the end of an ended child's stderr and close its file."""
        if not self._stderr.closed:
            self._stderr_tail = self.stderr_tail()
            self._stderr.close()

    def _read_events(self, stream: IO[str]) -> None:
        with stream:
            for line in stream:
                event = parse_event(line)
                if event is None:
                    continue
                if event["event"] == "error":
                    self.error = event
                elif event["event"] == "done":
                    self.done = event
                if self._on_event is not None:
                    self._on_event(event)

    @staticmethod
    def _read_lines(stream: IO[str], lines: list[str]) -> None:
        with stream:
            for line in stream:
                lines.append(line)

"""Sessions in the store: creating, claiming and heartbeating one, its status, reading and deleting it.

A session has one runner at a time, the process that claimed it (pid, hostname). A "running" or
"paused" session whose runner is gone reads as "crashed": on this host its pid must be alive (and
not reused), on another its heartbeat must be fresh (:data:`HEARTBEAT_STALE_S`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import psutil

from tunelab.core.errors import SessionBusyError, StoreError
from tunelab.core.records import SESSION_STATUSES, SessionRecord, SessionSpec, trial_number
from tunelab.core.store.connection import StoreConnection, _reader
from tunelab.core.store.json_text import _dumps, inserted_id

# A "running" session on another host whose heartbeat is older than this is reported as crashed.
HEARTBEAT_STALE_S = 120.0

_SESSION_COLUMNS = (
    "s.id, s.name, s.workload, s.shape, s.dtype, s.target, s.target_kind, s.space_kind, s.space, s.tuner, "
    "s.tuner_options, s.measure, s.trials_budget, s.batch, s.early_stop, s.seed, s.status, s.error, "
    "s.created_at, s.updated_at, s.pid, s.hostname, s.tvm_version, s.flops, s.custom_source, s.shadow_models"
)

# One statement: a consistent snapshot. Every sub-select is an index lookup or a covering-index range.
_SESSION_SELECT = f"""
SELECT {_SESSION_COLUMNS},
    (SELECT count(*) FROM trials WHERE session_id = s.id) AS n_trials,
    (SELECT count(*) FROM trials WHERE session_id = s.id AND status = 'ok') AS n_ok,
    b.id AS best_trial_id,
    b.idx AS best_trial_index,
    b.latency_ms AS best_ms
FROM sessions s
LEFT JOIN trials b ON b.id = (
    SELECT id FROM trials
    WHERE session_id = s.id AND status = 'ok' AND latency_ms IS NOT NULL
        AND (task_id IS NULL OR task_id = (SELECT min(id) FROM tasks WHERE session_id = s.id))
    ORDER BY latency_ms, id LIMIT 1
)
"""


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.pid_exists(pid)
    except Exception:  # noqa: BLE001 - be conservative: an unknowable pid counts as alive
        return True


def _runner_alive(pid: int, updated_at: float) -> bool:
    """Whether process ``pid`` of this host is alive and can be the one that last wrote a session row
    (at ``updated_at``): a zombie is dead, and a pid the OS gave to a process started after that write
    belongs to someone else."""
    if pid == os.getpid():
        return True
    if not _pid_alive(pid):
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.create_time() <= updated_at + 2.0  # create_time is rounded; a margin, not a race
    except psutil.NoSuchProcess:
        return False
    except Exception:  # noqa: BLE001 - be conservative: an unknowable pid counts as alive
        return True


class SessionStore(StoreConnection):
    """The Store's session methods: the sessions table (and a new session's tasks)."""

    def create_session(
        self,
        spec: SessionSpec,
        *,
        target_json: dict[str, Any],
        target_kind: str,
        space_json: dict[str, Any],
        tvm_version: str,
        flops: float,
        tasks: Sequence[tuple[dict[str, int], float]] | None = None,
    ) -> int:
        """Store a new session (status "created", owned by this process) and its task; return its id."""
        now = time.time()
        with self._write() as conn:
            cur = conn.execute(
                """INSERT INTO sessions (name, workload, shape, dtype, target, target_kind, space_kind, space,
                    tuner, tuner_options, measure, trials_budget, batch, early_stop, seed, status, error,
                    created_at, updated_at, pid, hostname, tvm_version, flops, custom_source, tuner_state)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'created', NULL, ?, ?, ?, ?, ?, ?, ?, NULL)""",
                (
                    spec.name,
                    spec.workload,
                    _dumps(spec.shape),
                    spec.dtype,
                    _dumps(target_json),
                    target_kind,
                    spec.space_kind,
                    _dumps(space_json),
                    spec.tuner,
                    _dumps(spec.tuner_options),
                    _dumps(spec.measure.to_json()),
                    spec.trials,
                    spec.batch,
                    spec.early_stop,
                    spec.seed,
                    now,
                    now,
                    os.getpid(),
                    self._hostname,
                    tvm_version,
                    float(flops),
                    spec.custom_source,
                ),
            )
            session_id = inserted_id(cur)
            if spec.shadow_models:  # a column of schema 8; NULL (the most sessions) means none
                conn.execute(
                    "UPDATE sessions SET shadow_models = ? WHERE id = ?",
                    (_dumps(list(spec.shadow_models)), session_id),
                )
            for shape, task_flops in tasks or [(spec.shape, flops)]:
                conn.execute(
                    "INSERT INTO tasks (session_id, workload, shape, dtype, flops) VALUES (?, ?, ?, ?, ?)",
                    (session_id, spec.workload, _dumps(shape), spec.dtype, float(task_flops)),
                )
        return session_id

    def set_status(self, session_id: int, status: str, error: str | None = None) -> None:
        """Set a session's status (and error, cleared when None). "running" also records this process."""
        if status not in SESSION_STATUSES:
            raise ValueError(f"unknown session status {status!r}; expected one of {SESSION_STATUSES}")
        with self._write() as conn:
            if status == "running":
                cur = conn.execute(
                    "UPDATE sessions SET status = ?, error = ?, updated_at = ?, pid = ?, hostname = ? WHERE id = ?",
                    (status, error, time.time(), os.getpid(), self._hostname, session_id),
                )
            else:
                cur = conn.execute(
                    "UPDATE sessions SET status = ?, error = ?, updated_at = ? WHERE id = ?",
                    (status, error, time.time(), session_id),
                )
            if cur.rowcount == 0:
                raise StoreError(f"session {session_id} does not exist in {self.path}")

    def session_runner(self, session_id: int) -> tuple[int, str] | None:
        """The (pid, hostname) of another live process that is tuning the session now, or None when
        nobody (or this very process) is. Reads only."""
        row = self._conn.execute(
            "SELECT status, pid, hostname, updated_at FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise StoreError(f"session {session_id} does not exist in {self.path}")
        return self._other_runner(*row)

    def _other_runner(
        self, status: str, pid: int | None, hostname: str | None, updated_at: float
    ) -> tuple[int, str] | None:
        if status not in ("running", "paused") or pid is None:
            return None
        if hostname == self._hostname and int(pid) == os.getpid():
            return None
        if not self._runner_live(pid, hostname, updated_at, time.time()):
            return None
        return int(pid), str(hostname)

    def _busy_message(self, session_id: int, pid: int, hostname: str) -> str:
        where = "" if hostname == self._hostname else f" on {hostname}"
        return (
            f"session {session_id} is being tuned by pid {pid}{where}; a session has one runner at a "
            f"time: stop that process (or let it finish), then resume"
        )

    def claim_session(self, session_id: int) -> None:
        """Become the session's runner: status "running", owned by this process (pid, hostname).

        Checked and written in one write transaction, so of two processes resuming the same session
        at once only one gets it. A session another live process is running (or has paused) raises
        :class:`SessionBusyError` naming that pid, and nothing is written; one whose process is gone
        (crashed, killed) is taken over."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT status, pid, hostname, updated_at FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"session {session_id} does not exist in {self.path}")
            other = self._other_runner(*row)
            if other is not None:
                raise SessionBusyError(self._busy_message(session_id, *other))
            conn.execute(
                "UPDATE sessions SET status = 'running', error = NULL, updated_at = ?, pid = ?, hostname = ? "
                "WHERE id = ?",
                (time.time(), os.getpid(), self._hostname, session_id),
            )

    def refuse_if_running(self, session_id: int) -> None:
        """Raise :class:`SessionBusyError` (naming the pid) if another live process tunes the session."""
        other = self.session_runner(session_id)
        if other is not None:
            raise SessionBusyError(self._busy_message(session_id, *other))

    def heartbeat(self, session_id: int) -> None:
        """Mark the session as alive and owned by this process (updated_at, pid, hostname)."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET updated_at = ?, pid = ?, hostname = ? WHERE id = ?",
                (time.time(), os.getpid(), self._hostname, session_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"session {session_id} does not exist in {self.path}")

    def delete_session(self, session_id: int) -> None:
        """Delete a session with its tasks, trials, samples and rounds."""
        with self._write() as conn:
            self._require_session(session_id)
            conn.execute(
                "DELETE FROM samples WHERE trial_id IN (SELECT id FROM trials WHERE session_id = ?)",
                (session_id,),
            )
            conn.execute(
                "DELETE FROM trial_predictions WHERE trial_id IN (SELECT id FROM trials WHERE session_id = ?)",
                (session_id,),
            )
            conn.execute("DELETE FROM trials WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM rounds WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM tasks WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    @_reader
    def session(self, session_id: int) -> SessionRecord:
        rows = self._rows(_SESSION_SELECT + " WHERE s.id = ?", (session_id,))
        if not rows:
            raise StoreError(f"session {session_id} does not exist in {self.path}")
        return self._session_record(rows[0], time.time())

    @_reader
    def sessions(self) -> list[SessionRecord]:
        """All sessions, newest first."""
        rows = self._rows(_SESSION_SELECT + " ORDER BY s.created_at DESC, s.id DESC")
        now = time.time()
        return [self._session_record(r, now) for r in rows]

    @_reader
    def session_stamps(self) -> dict[int, float]:
        """Every session's ``updated_at``, by id: every write to a session row sets it, so a change
        here (or a new or missing id) says which sessions to read again."""
        return dict(self._conn.execute("SELECT id, updated_at FROM sessions").fetchall())

    @_reader
    def sessions_with_trials_after(self, trial_id: int) -> set[int]:
        """The ids of the sessions that have a trial with ``id > trial_id`` (a range of the rowid)."""
        rows = self._conn.execute("SELECT DISTINCT session_id FROM trials WHERE id > ?", (trial_id,))
        return {r[0] for r in rows}

    @_reader
    def session_updated_at(self, session_id: int) -> float:
        row = self._conn.execute("SELECT updated_at FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise StoreError(f"session {session_id} does not exist in {self.path}")
        return float(row[0])

    def _derived_status(self, row: sqlite3.Row, now: float) -> str:
        """A "running" (or "paused") session whose process is gone is reported as "crashed" (nothing is
        written)."""
        status = row["status"]
        if status not in ("running", "paused"):
            return status
        return status if self._runner_live(row["pid"], row["hostname"], row["updated_at"], now) else "crashed"

    def _runner_live(self, pid: int | None, hostname: str | None, updated_at: float, now: float) -> bool:
        """Whether the process that last marked a session running (or paused) is still there: on this
        host its pid must be alive (and not reused); on another its heartbeat must be fresh."""
        if hostname == self._hostname and pid is not None:
            return _runner_alive(int(pid), updated_at)
        return now - updated_at <= HEARTBEAT_STALE_S

    def _session_record(self, row: sqlite3.Row, now: float) -> SessionRecord:
        n_trials = int(row["n_trials"])
        return SessionRecord(
            id=row["id"],
            name=row["name"],
            workload=row["workload"],
            shape=json.loads(row["shape"]),
            dtype=row["dtype"],
            target=json.loads(row["target"]),
            target_kind=row["target_kind"],
            space_kind=row["space_kind"],
            space=json.loads(row["space"]),
            tuner=row["tuner"],
            tuner_options=json.loads(row["tuner_options"]),
            measure=json.loads(row["measure"]),
            trials_budget=row["trials_budget"],
            batch=row["batch"],
            early_stop=row["early_stop"],
            seed=row["seed"],
            status=self._derived_status(row, now),
            error=row["error"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            pid=row["pid"],
            hostname=row["hostname"],
            tvm_version=row["tvm_version"],
            flops=row["flops"],
            n_trials=n_trials,
            n_failed=n_trials - int(row["n_ok"]),
            best_ms=row["best_ms"],
            best_trial_id=row["best_trial_id"],
            custom_source=row["custom_source"],
            shadow_models=tuple(json.loads(row["shadow_models"])) if row["shadow_models"] else (),
            best_trial_number=None
            if row["best_trial_index"] is None
            else trial_number(row["best_trial_index"]),
        )

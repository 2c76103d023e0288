"""The SQLite store: tunelab's single source of truth (sessions, tasks, trials, samples, rounds).

One file holds everything. The tuning process writes; the GUI, the CLI and other tuning processes read
the same file at the same time. The rules that make that safe:

* WAL journal, ``synchronous=NORMAL``, ``busy_timeout`` 10 s: readers never block the writer and the
  writer never blocks readers.
* Every write is one short ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction. A trial and all its samples
  are committed together the moment they are added, so no reader ever sees a trial without its samples.
* Every read is a single statement or a short read transaction that is finished before the method
  returns; no transaction (and no cursor) is ever left open.
* A connection belongs to the thread that opened it (sqlite3's ``check_same_thread``). Each thread and
  each process opens its own :class:`Store`; :meth:`Store.reopen` gives a new one on the same file for
  another thread.

The schema evolves through :data:`MIGRATIONS`: version *n* is the schema after the first *n* functions
have run. To change the schema, write one function decorated with :func:`migration` below the others.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import os
import socket
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import quote

import numpy as np
import platformdirs
import psutil
from sqlite_utils import Database

from tunelab.core.errors import SessionBusyError, StoreError, StoreFailure, StoreLockedError
from tunelab.core.records import (
    SESSION_STATUSES,
    TRIAL_STATUSES,
    Config,
    MachineProfile,
    NewTrial,
    RoundRecord,
    SessionRecord,
    SessionSpec,
    TaskRecord,
    TrialRecord,
    VendorBaseline,
)
from tunelab.core.stats import median
from tunelab.core.telemetry.readings import TelemetrySample

APP_ID = "tunelab"
BUSY_TIMEOUT_S = 10.0
# How long a tuning session's writes wait for a write lock held by another process (a long query in
# a `sqlite3` shell, a backup) before the session gives up and ends as crashed: SQLite's busy handler
# waits BUSY_TIMEOUT_S, then the write is retried with back-off until this much time has passed.
SESSION_WRITE_PATIENCE_S = 120.0
WRITE_PATIENCE_ENV = "TUNELAB_WRITE_PATIENCE_S"  # overrides it (tests use a few seconds)
# A "running" session on another host whose heartbeat is older than this is reported as crashed.
HEARTBEAT_STALE_S = 120.0


def default_db_path() -> Path:
    """``$TUNELAB_DB`` if set, else ``<user data dir>/tunelab/tunelab.sqlite`` (the folder is created)."""
    env = os.environ.get("TUNELAB_DB")
    if env:
        return Path(env).expanduser()
    folder = Path(platformdirs.user_data_dir(APP_ID))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "tunelab.sqlite"


# --------------------------------------------------------------------------------------------- schema

Migration = Callable[[Database], None]

# Applied in order, each inside the same write transaction that bumps meta.schema_version.
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next schema version (keep them in definition order; never edit old ones)."""
    MIGRATIONS.append(fn)
    return fn


@migration
def _v1_initial(db: Database) -> None:
    statements = [
        """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL DEFAULT '',
            workload TEXT NOT NULL,
            shape TEXT NOT NULL,
            dtype TEXT NOT NULL,
            target TEXT NOT NULL,
            target_kind TEXT NOT NULL,
            space_kind TEXT NOT NULL,
            space TEXT NOT NULL,
            tuner TEXT NOT NULL,
            tuner_options TEXT NOT NULL,
            measure TEXT NOT NULL,
            trials_budget INTEGER NOT NULL,
            batch INTEGER NOT NULL,
            early_stop INTEGER,
            seed INTEGER NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            pid INTEGER,
            hostname TEXT,
            tvm_version TEXT NOT NULL,
            flops REAL NOT NULL,
            custom_source TEXT,
            tuner_state TEXT
        )""",
        """CREATE TABLE tasks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            workload TEXT NOT NULL,
            shape TEXT NOT NULL,
            dtype TEXT NOT NULL,
            flops REAL NOT NULL
        )""",
        "CREATE INDEX idx_tasks_session ON tasks(session_id)",
        """CREATE TABLE trials (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            task_id INTEGER REFERENCES tasks(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            round INTEGER NOT NULL,
            config TEXT NOT NULL,
            config_key TEXT NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            latency_ms REAL,
            mean_ms REAL,
            std_ms REAL,
            min_ms REAL,
            max_ms REAL,
            predicted_ms REAL,
            build_s REAL,
            run_s REAL,
            started_at REAL NOT NULL,
            finished_at REAL NOT NULL,
            trace_json TEXT
        )""",
        "CREATE INDEX idx_trials_session_id ON trials(session_id, id)",
        "CREATE UNIQUE INDEX idx_trials_session_key ON trials(session_id, config_key)",
        "CREATE UNIQUE INDEX idx_trials_session_idx ON trials(session_id, idx)",
        # n_ok / best trial per session without touching the table rows
        "CREATE INDEX idx_trials_session_status_latency ON trials(session_id, status, latency_ms)",
        """CREATE TABLE samples (
            trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            ms REAL NOT NULL,
            PRIMARY KEY (trial_id, idx)
        )""",
        "CREATE INDEX idx_samples_trial ON samples(trial_id)",
        """CREATE TABLE rounds (
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            round INTEGER NOT NULL,
            n INTEGER NOT NULL,
            spearman REAL,
            best_ms REAL,
            finished_at REAL NOT NULL,
            PRIMARY KEY (session_id, round)
        )""",
    ]
    for sql in statements:
        db.execute(sql)


@migration
def _v2_telemetry(db: Database) -> None:
    # One row per telemetry sample (10 a second while a session runs); pid lists and per-core loads are
    # compact text, everything a plot or a query filters on is a column.
    statements = [
        """CREATE TABLE telemetry (
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            t REAL NOT NULL,
            gpu_temp_c REAL,
            gpu_power_w REAL,
            gpu_power_limit_w REAL,
            gpu_sm_clock_mhz REAL,
            gpu_mem_clock_mhz REAL,
            gpu_util_pct REAL,
            gpu_mem_util_pct REAL,
            gpu_mem_used_mib REAL,
            throttle_reasons TEXT NOT NULL DEFAULT '',
            other_gpu_procs INTEGER,
            other_gpu_pids TEXT NOT NULL DEFAULT '',
            cpu_load_per_core TEXT NOT NULL DEFAULT '[]',
            cpu_load_mean REAL,
            cpu_freq_mhz REAL,
            cpu_temp_c REAL,
            other_busy_procs INTEGER NOT NULL DEFAULT 0,
            other_busy_pids TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX idx_telemetry_session_t ON telemetry(session_id, t)",
        # What the hardware did while each trial ran (telemetry.summarize), with the values a trials
        # table sorts or filters on as columns.
        """CREATE TABLE trial_telemetry (
            trial_id INTEGER PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            n INTEGER NOT NULL,
            throttled INTEGER NOT NULL,
            gpu_temp_max REAL,
            gpu_power_max REAL,
            gpu_sm_clock_min REAL,
            cpu_load_mean REAL,
            other_procs_max INTEGER,
            summary TEXT NOT NULL
        )""",
        "CREATE INDEX idx_trial_telemetry_session ON trial_telemetry(session_id)",
    ]
    for sql in statements:
        db.execute(sql)


@migration
def _v3_validation_baselines_roofline(db: Database) -> None:
    # Re-measurements of tuned schedules (tunelab.core.trust.validate), vendor-library baselines
    # (tunelab.core.trust.baselines) and
    # this machine's roofline (tunelab.core.trust.roofline). Reports and details are JSON text; what a table sorts or
    # filters on is a column.
    statements = [
        """CREATE TABLE validations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
            schedule_file TEXT,
            created_at REAL NOT NULL,
            hostname TEXT,
            runs INTEGER NOT NULL,
            verdict TEXT NOT NULL,
            cause TEXT,
            summary TEXT NOT NULL DEFAULT '',
            report TEXT NOT NULL
        )""",
        "CREATE INDEX idx_validations_session ON validations(session_id, id)",
        """CREATE TABLE validation_results (
            validation_id INTEGER NOT NULL REFERENCES validations(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            trial_id INTEGER,
            label TEXT NOT NULL,
            recorded_ms REAL,
            remeasured_ms REAL,
            cv REAL,
            runs INTEGER NOT NULL,
            throttled INTEGER NOT NULL,
            verdict TEXT NOT NULL,
            cause TEXT,
            detail TEXT NOT NULL,
            PRIMARY KEY (validation_id, idx)
        )""",
        """CREATE TABLE baselines (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            hostname TEXT NOT NULL,
            workload TEXT NOT NULL,
            shape TEXT NOT NULL,
            dtype TEXT NOT NULL,
            target_kind TEXT NOT NULL,
            library TEXT NOT NULL,
            median_ms REAL NOT NULL,
            gflops REAL,
            measured_at REAL NOT NULL,
            detail TEXT NOT NULL,
            UNIQUE (hostname, workload, shape, dtype, target_kind)
        )""",
        """CREATE TABLE machine_profile (
            hostname TEXT NOT NULL,
            target_kind TEXT NOT NULL,
            measured_at REAL NOT NULL,
            peak_gflops TEXT NOT NULL,
            bandwidth_gbs REAL NOT NULL,
            detail TEXT NOT NULL,
            PRIMARY KEY (hostname, target_kind)
        )""",
    ]
    for sql in statements:
        db.execute(sql)


@migration
def _v4_vendor_baselines(db: Database) -> None:
    # "baselines" is a name other code may want (a test's stand-in migration creates one): the vendor
    # baselines of v3 keep a name of their own.
    tables = set(db.table_names())
    if "baselines" in tables and "vendor_baselines" not in tables:
        db.execute("ALTER TABLE baselines RENAME TO vendor_baselines")


@migration
def _v5_task_index(db: Database) -> None:
    # Per-task counts and bests (Store.tasks, asked on every refresh of a running session) would
    # otherwise scan every trial in the file.
    db.execute("CREATE INDEX IF NOT EXISTS idx_trials_task ON trials(task_id, status, latency_ms)")


def schema_version() -> int:
    """The schema version this code writes (the number of migrations)."""
    return len(MIGRATIONS)


# ---------------------------------------------------------------------------------------------- helpers


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


_json_decode = json.JSONDecoder().decode


def _loads(text: str | None) -> Any:
    return None if text is None else _json_decode(text)


def _sample_stats(samples: Sequence[float]) -> dict[str, float | None]:
    if not samples:
        return dict.fromkeys(("latency_ms", "mean_ms", "std_ms", "min_ms", "max_ms"))
    return {
        "latency_ms": median(samples),
        "mean_ms": float(statistics.fmean(samples)),
        "std_ms": float(statistics.pstdev(samples)) if len(samples) > 1 else 0.0,
        "min_ms": float(min(samples)),
        "max_ms": float(max(samples)),
    }


_SESSION_COLUMNS = (
    "s.id, s.name, s.workload, s.shape, s.dtype, s.target, s.target_kind, s.space_kind, s.space, s.tuner, "
    "s.tuner_options, s.measure, s.trials_budget, s.batch, s.early_stop, s.seed, s.status, s.error, "
    "s.created_at, s.updated_at, s.pid, s.hostname, s.tvm_version, s.flops, s.custom_source"
)

# One statement: a consistent snapshot. Every sub-select is an index lookup or a covering-index range.
_SESSION_SELECT = f"""
SELECT {_SESSION_COLUMNS},
    (SELECT count(*) FROM trials WHERE session_id = s.id) AS n_trials,
    (SELECT count(*) FROM trials WHERE session_id = s.id AND status = 'ok') AS n_ok,
    b.id AS best_trial_id,
    b.latency_ms AS best_ms
FROM sessions s
LEFT JOIN trials b ON b.id = (
    SELECT id FROM trials
    WHERE session_id = s.id AND status = 'ok' AND latency_ms IS NOT NULL
        AND (task_id IS NULL OR task_id = (SELECT min(id) FROM tasks WHERE session_id = s.id))
    ORDER BY latency_ms, id LIMIT 1
)
"""

_TRIAL_COLUMNS = (
    "id, session_id, idx, round, config, status, error, latency_ms, mean_ms, std_ms, min_ms, max_ms, "
    "predicted_ms, build_s, run_s, started_at, finished_at, trace_json, task_id"
)


# Store.trial_columns: the fields it returns, and the numeric ones read in one SELECT.
TRIAL_COLUMNS = (
    "id",
    "index",
    "round",
    "status",
    "ok",
    "latency_ms",
    "mean_ms",
    "std_ms",
    "predicted_ms",
    "started_at",
    "finished_at",
    "task_id",
    "error",
)
_COLUMNS_NUMERIC = (
    "id",
    "index",
    "round",
    "status",
    "latency_ms",
    "mean_ms",
    "std_ms",
    "predicted_ms",
    "started_at",
    "finished_at",
    "task_id",
)
_STATUS_CODE = (
    "CASE status " + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(TRIAL_STATUSES)) + " ELSE -1 END"
)
_COLUMNS_SELECT = (
    f"SELECT id, idx, round, {_STATUS_CODE}, latency_ms, mean_ms, std_ms, predicted_ms, started_at, "
    "finished_at, task_id FROM trials WHERE session_id = ? AND id > ? ORDER BY id"
)
_ERRORS_SELECT = (
    "SELECT id, error FROM trials WHERE session_id = ? AND id > ? AND error IS NOT NULL ORDER BY id"
)
_IN_CHUNK = 500  # ids per "id IN (...)" (SQLite allows at least 999 parameters)


# SQLite result codes that mean the file or the disk failed, not that the file named is wrong.
_FAILURE_CODES = (
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_NOMEM",
    "SQLITE_PROTOCOL",
    "SQLITE_CANTOPEN",
)
_FAILURE_WORDS = ("disk i/o error", "database or disk is full", "database is locked", "out of memory")


def is_store_failure(exc: BaseException, *, opening: bool = False) -> bool:
    """Whether an sqlite3 error is the disk or the file failing (a StoreFailure), not bad input.

    Opening a file SQLite cannot open (a bad path, a folder) is bad input; once open, being unable to
    reopen its journal is a failure. A read-only file, a constraint or a file that is not a database
    is never a failure of the disk."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name:
        if opening and name.startswith("SQLITE_CANTOPEN"):
            return False
        return name.startswith(_FAILURE_CODES)
    return any(w in str(exc).lower() for w in _FAILURE_WORDS)


def _store_error(message: str, exc: BaseException, *, opening: bool = False) -> StoreError:
    if not opening and "readonly" in str(getattr(exc, "sqlite_errorname", "")).lower():
        message = f"{message[:-1]} (the file or its folder is read-only)."
    return (StoreFailure if is_store_failure(exc, opening=opening) else StoreError)(message)


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is open; a rollback that fails too (the disk is gone) is left to the
    error already being raised."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _unwritable(path: Path) -> str:
    """Why this process cannot write the database at ``path`` (or create it), or "" when it can.

    SQLite needs the folder as well as the file: its WAL and shared-memory files live beside it."""
    folder = path.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} is read-only"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only"
    return ""


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection that works in a read-only folder.

    ``mode=ro`` needs the WAL's shared-memory file to exist or be creatable; where neither is possible
    (a cleanly closed database in a read-only folder has no -wal or -shm) the file cannot change
    under us either, so it is opened ``immutable``."""
    base = f"file:{quote(str(path.absolute()))}"
    conn = sqlite3.connect(f"{base}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
    except sqlite3.DatabaseError:  # not a database at all: _check_schema says so
        return conn
    return sqlite3.connect(
        f"{base}?mode=ro&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
    )


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


def session_write_patience() -> float:
    """How long a tuning session waits for the write lock: $TUNELAB_WRITE_PATIENCE_S or
    :data:`SESSION_WRITE_PATIENCE_S`."""
    text = os.environ.get(WRITE_PATIENCE_ENV, "").strip()
    try:
        return max(float(text), 0.0) if text else SESSION_WRITE_PATIENCE_S
    except ValueError:
        return SESSION_WRITE_PATIENCE_S


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _is_damage(exc: sqlite3.Error) -> bool:
    """SQLite's word for a file whose pages were cut short or overwritten (not a lock, not a full disk)."""
    return getattr(exc, "sqlite_errorname", "").startswith("SQLITE_CORRUPT")


def _damaged(path: Path, why: Any, what: str = "tunelab") -> str:
    return f"{path} is a damaged {what} database ({why}): it was cut short or overwritten; restore it from a backup."


def _is_lock(exc: sqlite3.Error) -> bool:
    """Another connection kept the file locked for longer than the busy timeout (a program holding it in
    exclusive locking mode: WAL readers are not blocked by ordinary writers)."""
    return getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def _locked(path: Path, exc: sqlite3.Error) -> str:
    return (
        f"{path} is locked by another process ({exc}) for longer than {BUSY_TIMEOUT_S:g} s; "
        "try again once it lets go."
    )


_Reader = TypeVar("_Reader", bound=Callable[..., Any])


def _reader(method: _Reader) -> _Reader:
    """A Store reader: a damaged page met on the way is a StoreError naming the file (one line), where
    sqlite3 raises a bare DatabaseError (a traceback in the CLI). Only damage is translated."""

    @functools.wraps(method)
    def read(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                raise
            raise StoreError(_damaged(self.path, exc)) from exc

    return cast(_Reader, read)


# ------------------------------------------------------------------------------------------------ store


class Store:
    """A connection to one tunelab database file.

    ``Store(path)`` opens (and creates, unless ``create=False``) the database and brings its schema up to
    date. ``readonly=True`` opens it read-only (it must exist and be up to date); so does a database
    this process may not write (a read-only folder or file): it is read, and every write raises a
    :class:`StoreError` saying why (:meth:`require_writable` asks first). A path that is not a
    tunelab database raises :class:`StoreError` and is never modified. A disk that fails while the
    store works (full, I/O error, locked beyond the busy timeout) raises :class:`StoreFailure`.

    A Store must only be used by the thread that created it; other threads call :meth:`reopen` and other
    processes construct their own Store on the same path. Close it with :meth:`close` (or ``with``).
    """

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False, create: bool = True) -> None:
        self.path = Path(path).expanduser()
        self._hostname = socket.gethostname()
        # Seconds a write may wait for another process's write lock in all (0: the busy timeout only,
        # so a GUI thread never hangs on it); a running session sets SESSION_WRITE_PATIENCE_S.
        self.write_patience_s = 0.0
        # Called once per write that waits past the busy timeout, with the seconds it will wait at most.
        self.on_lock_wait: Callable[[float], None] | None = None
        self._busy_ms = int(BUSY_TIMEOUT_S * 1000)
        exists = self.path.exists()
        if not exists and (readonly or not create):
            raise StoreError(f"There is no tunelab database at {self.path}.")
        if exists and not self.path.is_file():
            raise StoreError(f"{self.path} is not a file, so it cannot be a tunelab database.")
        # Why this store cannot be written ("" when it can): asked for read-only, or a file or folder
        # this process may not write (a read-only mount, another user's folder). Such a database is
        # still read, through SQLite's read-only (or immutable) open.
        self._asked_readonly = readonly
        self.read_only_reason = "it is open read-only" if readonly else _unwritable(self.path)
        if self.read_only_reason and not exists:
            raise StoreError(f"Cannot create the tunelab database {self.path}: {self.read_only_reason}.")
        self.readonly = bool(self.read_only_reason)
        if not exists:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"Cannot create the tunelab database {self.path}: {exc.strerror}.") from None

        try:
            if self.readonly:
                conn = _connect_readonly(self.path)
            else:
                uri = f"file:{quote(str(self.path.absolute()))}?mode={'rwc' if create else 'rw'}"
                conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise _store_error(
                f"Cannot open the tunelab database {self.path}: {exc}.", exc, opening=True
            ) from exc
        self._conn = conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self.db = Database(conn, execute_plugins=False, recursive_triggers=False)
            version = self._check_schema(create=create and not self.readonly)
            if not self.readonly:
                # Only now, once the file is known to be ours (or empty), may anything be written to it.
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                if version < schema_version():
                    self._migrate()
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            conn.close()
            raise _store_error(
                f"Cannot open the tunelab database {self.path}: {exc}.", exc, opening=True
            ) from exc
        except BaseException:
            conn.close()
            raise

    @property
    def writable(self) -> bool:
        return not self.readonly

    def require_writable(self) -> None:
        """StoreError (one line) when this store cannot be written: check before work that ends in a write."""
        if self.readonly:
            raise StoreError(f"Cannot write to {self.path}: {self.read_only_reason}.")

    # ----------------------------------------------------------------------------------- lifecycle

    def reopen(self) -> Store:
        """A new Store on the same file (same mode). Call it in the thread that will use the new Store."""
        return Store(self.path, readonly=self._asked_readonly, create=False)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}{', readonly=True' if self.readonly else ''})"

    # ----------------------------------------------------------------------------------- schema

    def _check_schema(self, *, create: bool) -> int:
        """The stored schema version (0: an empty database we may initialise). Reads only."""
        try:
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            if _is_damage(exc):
                raise StoreError(_damaged(self.path, exc, "SQLite")) from exc
            if _is_lock(exc):
                raise StoreError(_locked(self.path, exc)) from exc
            raise StoreError(
                f"{self.path} is not a tunelab database (it is not an SQLite file: {exc})."
            ) from exc
        if not tables:
            size = self.path.stat().st_size
            if (
                0 < size < 100
            ):  # what is left of a file cut inside SQLite's 100-byte header: SQLite sees no tables
                raise StoreError(
                    f"{self.path} is not a tunelab database ({size} bytes, less than an SQLite header)."
                )
            if not create:
                raise StoreError(f"{self.path} is an empty SQLite file, not a tunelab database.")
            return 0
        if "meta" not in tables:
            raise StoreError(f"{self.path} is an SQLite database of another application, not a tunelab one.")
        try:
            meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
            version = int(meta["schema_version"])
        except (sqlite3.Error, KeyError, ValueError, TypeError) as exc:
            if isinstance(exc, sqlite3.Error) and _is_damage(exc):
                raise StoreError(_damaged(self.path, exc)) from exc
            if isinstance(exc, sqlite3.Error) and _is_lock(exc):
                raise StoreError(_locked(self.path, exc)) from exc
            raise StoreError(
                f"{self.path} is an SQLite database of another application, not a tunelab one."
            ) from exc
        if meta.get("app") != APP_ID:
            raise StoreError(f"{self.path} is an SQLite database of another application, not a tunelab one.")
        if version > schema_version():
            raise StoreError(
                f"{self.path} was written by a newer tunelab (schema {version}, this one knows {schema_version()})."
            )
        if version < schema_version() and self.readonly:
            raise StoreError(
                f"{self.path} has an older schema ({version}); open it once read-write to upgrade it."
            )
        return version

    def _migrate(self) -> None:
        with self._write():
            # Re-read inside the write lock: another process may have migrated meanwhile.
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version == 0:
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('app', ?), ('created_at', ?)",
                    (APP_ID, repr(time.time())),
                )
            for fn in MIGRATIONS[version:]:
                fn(self.db)
            self._conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(len(MIGRATIONS)),),
            )

    def check_intact(self) -> None:
        """Raise StoreError when the file has damaged pages (SQLite's quick_check reads every page once:
        about 0.25 s for 100,000 trials). A session calls it before it writes, so a file that was cut
        short or overwritten is never written to; opening and reading check only what they read."""
        try:
            rows = self._conn.execute("PRAGMA quick_check(1)").fetchall()
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                raise
            raise StoreError(_damaged(self.path, exc)) from exc
        if rows != [("ok",)]:
            found = " ".join(str(rows[0][0]).replace("*** in database main ***", "").split())[:200]
            raise StoreError(_damaged(self.path, f"SQLite finds: {found}"))

    @_reader
    def schema_version(self) -> int:
        """The schema version stored in this database."""
        return int(self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])

    # ----------------------------------------------------------------------------------- transactions

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction, holding the write lock from its start (no lock upgrades)."""
        self.require_writable()
        self._begin_write()
        try:
            yield self._conn
        except BaseException as exc:
            _rollback(self._conn)
            if isinstance(exc, sqlite3.Error):
                raise _store_error(f"Cannot write to {self.path}: {exc}.", exc) from exc
            raise
        else:
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(self._conn)
                raise _store_error(f"Cannot write to {self.path}: {exc}.", exc) from exc

    def _begin_write(self) -> None:
        """BEGIN IMMEDIATE, waiting for another process's write lock: SQLite's busy handler waits up
        to the busy timeout; with ``write_patience_s`` the attempt is repeated, with back-off between
        attempts, until that much time has passed in all. Then :class:`StoreLockedError`."""
        patience = self.write_patience_s if self.write_patience_s > 0 else BUSY_TIMEOUT_S
        started = time.monotonic()
        left, pause, announced = patience, 0.05, False
        while True:
            # Each attempt waits no longer than the patience left, and never longer than the busy timeout.
            self._set_busy_ms(int(max(min(left, BUSY_TIMEOUT_S), 0.001) * 1000))
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise _store_error(f"Cannot write to {self.path}: {exc}.", exc) from exc
                left = patience - (time.monotonic() - started)
                if left <= 0.01:
                    raise StoreLockedError(
                        f"Cannot write to {self.path}: another process held its write lock for more than "
                        f"{patience:g} s ({exc})."
                    ) from exc
                if not announced and self.on_lock_wait is not None:
                    announced = True
                    self.on_lock_wait(patience)
                time.sleep(min(pause, left))
                pause = min(pause * 2, 2.0)
                left = patience - (time.monotonic() - started)

    def _set_busy_ms(self, ms: int) -> None:
        if ms != self._busy_ms:
            self._conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._busy_ms = ms

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A short read transaction: several statements, one snapshot. Never held beyond the block."""
        self._conn.execute("BEGIN")
        try:
            yield self._conn
        finally:
            if self._conn.in_transaction:
                self._conn.execute("COMMIT")

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        cur = self._conn.cursor()
        cur.row_factory = sqlite3.Row
        try:
            return cur.execute(sql, params).fetchall()
        finally:
            cur.close()

    def _require_session(self, session_id: int) -> None:
        if self._conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise StoreError(f"session {session_id} does not exist in {self.path}")

    # ----------------------------------------------------------------------------------- writer API

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
            session_id = int(cur.lastrowid)
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

    def add_trial(
        self, session_id: int, trial: NewTrial, config_key: str, task_id: int | None = None
    ) -> TrialRecord:
        """Store one measured trial with its samples in one transaction; return it as stored.

        ``latency_ms`` is the median of ``samples_ms`` (mean/std/min/max too; std is the population
        standard deviation, as TVM's ``time_evaluator`` reports it). A trial without samples has no
        latency. A ``config_key`` already measured in this session raises :class:`StoreError`.
        """
        if trial.status not in TRIAL_STATUSES:
            raise ValueError(f"unknown trial status {trial.status!r}; expected one of {TRIAL_STATUSES}")
        samples = tuple(float(ms) for ms in trial.samples_ms)
        if trial.status == "ok" and not samples:
            raise ValueError("a trial with status 'ok' needs at least one sample")
        stats = _sample_stats(samples)
        config_text = _dumps(trial.config)
        trace_text = None if trial.trace_json is None else _dumps(trial.trace_json)
        with self._write() as conn:
            if task_id is None:
                task = conn.execute(
                    "SELECT id FROM tasks WHERE session_id = ? ORDER BY id LIMIT 1", (session_id,)
                ).fetchone()
            else:
                task = conn.execute(
                    "SELECT id FROM tasks WHERE session_id = ? AND id = ?", (session_id, task_id)
                ).fetchone()
                if task is None:
                    raise StoreError(f"task {task_id} is not a task of session {session_id}")
            if task is None:
                self._require_session(session_id)
            if conn.execute(
                "SELECT 1 FROM trials WHERE session_id = ? AND config_key = ?", (session_id, config_key)
            ).fetchone():
                raise StoreError(f"config {config_key} was already measured in session {session_id}")
            idx = conn.execute(
                "SELECT coalesce(max(idx) + 1, 0) FROM trials WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            cur = conn.execute(
                """INSERT INTO trials (session_id, task_id, idx, round, config, config_key, status, error,
                    latency_ms, mean_ms, std_ms, min_ms, max_ms, predicted_ms, build_s, run_s,
                    started_at, finished_at, trace_json)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    session_id,
                    None if task is None else task[0],
                    idx,
                    trial.round,
                    config_text,
                    config_key,
                    trial.status,
                    trial.error,
                    stats["latency_ms"],
                    stats["mean_ms"],
                    stats["std_ms"],
                    stats["min_ms"],
                    stats["max_ms"],
                    trial.predicted_ms,
                    trial.build_s,
                    trial.run_s,
                    trial.started_at,
                    trial.finished_at,
                    trace_text,
                ),
            )
            trial_id = int(cur.lastrowid)
            conn.executemany(
                "INSERT INTO samples (trial_id, idx, ms) VALUES (?, ?, ?)",
                [(trial_id, i, ms) for i, ms in enumerate(samples)],
            )
        return TrialRecord(
            id=trial_id,
            session_id=session_id,
            index=idx,
            round=trial.round,
            config=json.loads(config_text),
            status=trial.status,
            error=trial.error,
            predicted_ms=trial.predicted_ms,
            build_s=trial.build_s,
            run_s=trial.run_s,
            started_at=trial.started_at,
            finished_at=trial.finished_at,
            trace_json=_loads(trace_text),
            samples_ms=samples,
            task_id=None if task is None else int(task[0]),
            **stats,
        )

    def add_round(
        self, session_id: int, round: int, n: int, spearman: float | None, best_ms: float | None
    ) -> None:
        """Record a finished round (replaces an earlier record of the same round)."""
        if spearman is not None and math.isnan(spearman):
            spearman = None
        with self._write() as conn:
            self._require_session(session_id)
            conn.execute(
                """INSERT INTO rounds (session_id, round, n, spearman, best_ms, finished_at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (session_id, round) DO UPDATE SET
                    n = excluded.n, spearman = excluded.spearman, best_ms = excluded.best_ms,
                    finished_at = excluded.finished_at""",
                (session_id, round, n, spearman, best_ms, time.time()),
            )

    def save_tuner_state(self, session_id: int, state: dict[str, Any]) -> None:
        text = _dumps(state)
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET tuner_state = ?, updated_at = ? WHERE id = ?",
                (text, time.time(), session_id),
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
            conn.execute("DELETE FROM trials WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM rounds WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM tasks WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    # ----------------------------------------------------------------------------------- reader API

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

    @_reader
    def tuner_state(self, session_id: int) -> dict[str, Any] | None:
        row = self._conn.execute("SELECT tuner_state FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise StoreError(f"session {session_id} does not exist in {self.path}")
        return _loads(row[0])

    @_reader
    def trials(self, session_id: int, since_id: int = 0, with_samples: bool = False) -> list[TrialRecord]:
        """The session's trials with ``id > since_id``, in id (= measurement) order."""
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(
                f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE session_id = ? AND id > ? ORDER BY id",
                (session_id, since_id),
            ).fetchall()
            samples: dict[int, list[float]] = {}
            if with_samples and rows:
                for trial_id, ms in conn.execute(
                    """SELECT trial_id, ms FROM samples
                    WHERE trial_id IN (SELECT id FROM trials WHERE session_id = ? AND id > ?)
                    ORDER BY trial_id, idx""",
                    (session_id, since_id),
                ):
                    samples.setdefault(trial_id, []).append(ms)
        # Building 100,000 records allocates millions of objects that all survive: the cyclic GC
        # would re-scan them again and again (half the time of a large read) and can free none.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            return [self._trial_record(r, samples.get(r[0], ())) for r in rows]
        finally:
            if gc_was_on:
                gc.enable()

    @_reader
    def trial_columns(self, session_id: int, since_id: int = 0) -> dict[str, np.ndarray]:
        """The session's trials with ``id > since_id``, in id order, as one NumPy array per field.

        What plots and tables need without building a :class:`TrialRecord` (and decoding a config)
        per trial: reading 100,000 trials this way takes a fraction of what :meth:`trials` takes.
        The keys are :data:`TRIAL_COLUMNS`, named as the TrialRecord fields they hold:

        * ``id``, ``index``, ``round``, ``task_id``: int64 (``task_id`` -1 where the trial has none);
        * ``status``: int8, the position of the status in ``TRIAL_STATUSES``; ``ok``: bool;
        * ``latency_ms``, ``mean_ms``, ``std_ms``, ``predicted_ms``, ``started_at``, ``finished_at``:
          float64, NaN where the trial has none;
        * ``error``: object, the error text or None.

        Configs, traces and samples are not read: :meth:`trial_configs` and :meth:`trial` give them
        for the trials that are shown.
        """
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(_COLUMNS_SELECT, (session_id, since_id)).fetchall()
            failed = conn.execute(_ERRORS_SELECT, (session_id, since_id)).fetchall() if rows else []
        # Nothing made here can be freed by the cyclic GC, which would only re-scan the rows.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            # One float64 matrix (NULL -> NaN) for every numeric column, then typed columns of it.
            numbers = np.array(rows, dtype=np.float64).reshape(len(rows), len(_COLUMNS_NUMERIC))
        finally:
            if gc_was_on:
                gc.enable()
        out: dict[str, np.ndarray] = {}
        for k, name in enumerate(_COLUMNS_NUMERIC):
            column = numbers[:, k]
            if name in ("id", "index", "round"):
                out[name] = column.astype(np.int64)
            elif name == "task_id":
                out[name] = np.where(np.isnan(column), -1, column).astype(np.int64)
            elif name == "status":
                out[name] = column.astype(np.int8)
            else:
                out[name] = np.ascontiguousarray(column)
        out["ok"] = out["status"] == TRIAL_STATUSES.index("ok")
        # Errors are rare: only the rows that have one are read (ids in order, like the rows).
        error = np.full(len(rows), None, dtype=object)
        if failed:
            error[np.searchsorted(out["id"], [r[0] for r in failed])] = [r[1] for r in failed]
        out["error"] = error
        return {name: out[name] for name in TRIAL_COLUMNS}

    @_reader
    def trial_configs(self, session_id: int, trial_ids: Sequence[int] | None = None) -> dict[int, Config]:
        """The configs of the session's trials (of those in ``trial_ids``; all when None), by id.

        For views that read :meth:`trial_columns` and decode a config only when it is shown (or
        filtered on). Ids of other sessions' trials, or of none, are left out."""
        out: dict[int, Config] = {}
        with self._read() as conn:
            self._require_session(session_id)
            if trial_ids is None:
                rows = conn.execute(
                    "SELECT id, config FROM trials WHERE session_id = ?", (session_id,)
                ).fetchall()
            else:
                ids = [int(i) for i in trial_ids]
                rows = []
                for start in range(0, len(ids), _IN_CHUNK):
                    chunk = ids[start : start + _IN_CHUNK]
                    rows += conn.execute(
                        f"SELECT id, config FROM trials WHERE id IN ({','.join('?' * len(chunk))}) "
                        "AND session_id = ?",
                        (*chunk, session_id),
                    ).fetchall()
        gc_was_on = gc.isenabled()
        gc.disable()  # as in trials(): many surviving objects, nothing for the GC to free
        try:
            for trial_id, text in rows:
                out[trial_id] = _json_decode(text)
        finally:
            if gc_was_on:
                gc.enable()
        return out

    @_reader
    def tasks(self, session_id: int) -> list[TaskRecord]:
        """The session's shapes in order (the primary one first), each with its own best trial."""
        self._require_session(session_id)
        rows = self._conn.execute(
            """SELECT t.id, t.workload, t.shape, t.dtype, t.flops,
                (SELECT count(*) FROM trials r WHERE r.task_id = t.id),
                (SELECT count(*) FROM trials r WHERE r.task_id = t.id AND r.status != 'ok'),
                (SELECT min(latency_ms) FROM trials r WHERE r.task_id = t.id AND r.status = 'ok'),
                (SELECT r.id FROM trials r WHERE r.task_id = t.id AND r.status = 'ok'
                    ORDER BY r.latency_ms, r.id LIMIT 1)
            FROM tasks t WHERE t.session_id = ? ORDER BY t.id""",
            (session_id,),
        ).fetchall()
        return [
            TaskRecord(r[0], session_id, i, r[1], _loads(r[2]), r[3], r[4], r[5], r[6], r[7], r[8])
            for i, r in enumerate(rows)
        ]

    @_reader
    def trial(self, trial_id: int) -> TrialRecord:
        """One trial with its samples."""
        with self._read() as conn:
            rows = conn.execute(f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE id = ?", (trial_id,)).fetchall()
            if not rows:
                raise StoreError(f"trial {trial_id} does not exist in {self.path}")
            samples = [
                r[0]
                for r in conn.execute("SELECT ms FROM samples WHERE trial_id = ? ORDER BY idx", (trial_id,))
            ]
        return self._trial_record(rows[0], samples)

    @_reader
    def samples(self, trial_id: int) -> list[float]:
        with self._read() as conn:
            if conn.execute("SELECT 1 FROM trials WHERE id = ?", (trial_id,)).fetchone() is None:
                raise StoreError(f"trial {trial_id} does not exist in {self.path}")
            return [
                r[0]
                for r in conn.execute("SELECT ms FROM samples WHERE trial_id = ? ORDER BY idx", (trial_id,))
            ]

    @_reader
    def best_trial(self, session_id: int) -> TrialRecord | None:
        """The ok trial with the lowest latency (the earliest among equals), with samples; None if none.

        In a session with several shapes (tasks) this is the primary shape's best: latencies of
        different shapes do not compare (see `tasks()` for each shape's best)."""
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(
                f"""SELECT {_TRIAL_COLUMNS} FROM trials
                WHERE session_id = ? AND status = 'ok' AND latency_ms IS NOT NULL
                    AND (task_id IS NULL OR task_id = (SELECT min(id) FROM tasks WHERE session_id = ?))
                ORDER BY latency_ms, id LIMIT 1""",
                (session_id, session_id),
            ).fetchall()
            if not rows:
                return None
            samples = [
                r[0]
                for r in conn.execute("SELECT ms FROM samples WHERE trial_id = ? ORDER BY idx", (rows[0][0],))
            ]
        return self._trial_record(rows[0], samples)

    @_reader
    def rounds(self, session_id: int) -> list[RoundRecord]:
        with self._read():
            self._require_session(session_id)
            rows = self._rows(
                "SELECT session_id, round, n, spearman, best_ms, finished_at FROM rounds "
                "WHERE session_id = ? ORDER BY round",
                (session_id,),
            )
        return [RoundRecord(**dict(r)) for r in rows]

    @_reader
    def measured_keys(self, session_id: int) -> set[str]:
        with self._read() as conn:
            self._require_session(session_id)
            return {
                r[0]
                for r in conn.execute("SELECT config_key FROM trials WHERE session_id = ?", (session_id,))
            }

    @_reader
    def max_trial_id(self) -> int:
        """The largest trial id in the file (0 if none): poll it to notice new trials cheaply.

        Trial ids are never reused (AUTOINCREMENT), so the value only grows, even across deletes.
        """
        row = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'trials'").fetchone()
        return int(row[0]) if row else 0

    # ----------------------------------------------------------------------------------- telemetry

    def add_telemetry(self, session_id: int, samples: Sequence[TelemetrySample]) -> None:
        """Append telemetry samples to a session, all in one transaction.

        Call it from the thread that opened this Store: the telemetry sampler's thread opens its own
        (``TelemetrySampler.to_store``) rather than sharing the session's.
        """
        if not samples:
            return
        rows = [
            (
                session_id,
                s.t,
                s.gpu_temp_c,
                s.gpu_power_w,
                s.gpu_power_limit_w,
                s.gpu_sm_clock_mhz,
                s.gpu_mem_clock_mhz,
                s.gpu_util_pct,
                s.gpu_mem_util_pct,
                s.gpu_mem_used_mib,
                ",".join(s.throttle_reasons),
                s.other_gpu_procs,
                ",".join(map(str, s.other_gpu_pids)),
                _dumps(list(s.cpu_load_per_core)),
                s.cpu_load_mean,
                s.cpu_freq_mhz,
                s.cpu_temp_c,
                s.other_busy_procs,
                ",".join(map(str, s.other_busy_pids)),
            )
            for s in samples
        ]
        with self._write() as conn:
            self._require_session(session_id)
            conn.executemany(
                f"INSERT INTO telemetry ({_TELEMETRY_COLUMNS}) VALUES ({', '.join('?' * 19)})", rows
            )

    @_reader
    def telemetry(
        self, session_id: int, since_t: float = 0.0, until_t: float | None = None
    ) -> list[TelemetrySample]:
        """The session's telemetry samples with ``since_t < t`` (and ``t <= until_t``), oldest first.

        To follow a running session, pass the ``t`` of the last sample already seen.
        """
        with self._read() as conn:
            self._require_session(session_id)
            sql = f"SELECT {_TELEMETRY_COLUMNS} FROM telemetry WHERE session_id = ? AND t > ?"
            params: list[Any] = [session_id, since_t]
            if until_t is not None:
                sql += " AND t <= ?"
                params.append(until_t)
            rows = conn.execute(sql + " ORDER BY t", params).fetchall()
        return [_telemetry_sample(r) for r in rows]

    def stamp_trial(self, trial_id: int, summary: dict[str, Any]) -> None:
        """Record what the hardware did while a trial ran (``telemetry.summarize``); replaces an
        earlier stamp of the same trial."""

        def stat(field: str, key: str) -> Any:
            value = summary.get(field)
            return value.get(key) if isinstance(value, dict) else None

        procs = [summary.get("other_gpu_procs_max"), summary.get("other_busy_procs_max")]
        known = [p for p in procs if p is not None]
        text = _dumps(summary)
        with self._write() as conn:
            row = conn.execute("SELECT session_id FROM trials WHERE id = ?", (trial_id,)).fetchone()
            if row is None:
                raise StoreError(f"trial {trial_id} does not exist in {self.path}")
            conn.execute(
                """INSERT OR REPLACE INTO trial_telemetry (trial_id, session_id, n, throttled, gpu_temp_max,
                    gpu_power_max, gpu_sm_clock_min, cpu_load_mean, other_procs_max, summary)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    trial_id,
                    row[0],
                    int(summary.get("n", 0)),
                    int(bool(summary.get("throttled"))),
                    stat("gpu_temp_c", "max"),
                    stat("gpu_power_w", "max"),
                    stat("gpu_sm_clock_mhz", "min"),
                    stat("cpu_load_mean", "mean"),
                    sum(known) if known else None,
                    text,
                ),
            )

    @_reader
    def trial_telemetry(self, session_id: int) -> dict[int, dict[str, Any]]:
        """Each stamped trial's summary (as given to :meth:`stamp_trial`), by trial id."""
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(
                "SELECT trial_id, summary FROM trial_telemetry WHERE session_id = ? ORDER BY trial_id",
                (session_id,),
            ).fetchall()
        return {trial_id: _json_decode(text) for trial_id, text in rows}

    # ----------------------------------------------------------------------------------- records

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
        )

    @staticmethod
    def _trial_record(row: Sequence[Any], samples: Sequence[float]) -> TrialRecord:
        # _TRIAL_COLUMNS are in TrialRecord's field order (positional: listing 100k trials stays cheap)
        return TrialRecord(
            *row[:4],
            _json_decode(row[4]),
            *row[5:17],
            _loads(row[17]),
            samples_ms=tuple(samples),
            task_id=row[18],
        )

    # ----------------------------------------------------------------------------------- validations

    def add_validation(self, report: dict[str, Any]) -> int:
        """Store one validation run (``tunelab.core.trust.validate``'s report), a row per schedule; its id."""
        schedules = report.get("schedules") or []
        source = report.get("source") or {}
        with self._write() as conn:
            session_id = source.get("session_id") if source.get("kind") == "session" else None
            if session_id is not None:
                self._require_session(session_id)
            cur = conn.execute(
                """INSERT INTO validations (session_id, schedule_file, created_at, hostname, runs, verdict,
                    cause, summary, report) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    session_id,
                    source.get("path"),
                    float(report.get("finished_at") or time.time()),
                    report.get("hostname") or self._hostname,
                    int(report.get("runs") or 0),
                    str(report.get("verdict")),
                    report.get("cause"),
                    str(report.get("summary") or ""),
                    _dumps(report),
                ),
            )
            validation_id = int(cur.lastrowid)
            conn.executemany(
                """INSERT INTO validation_results (validation_id, idx, trial_id, label, recorded_ms,
                    remeasured_ms, cv, runs, throttled, verdict, cause, detail)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [
                    (
                        validation_id,
                        i,
                        s.get("trial_id"),
                        str(s.get("label")),
                        s.get("recorded_ms"),
                        s.get("remeasured_ms"),
                        s.get("cv"),
                        int(s.get("runs") or 0),
                        int(bool(s.get("throttled"))),
                        str(s.get("verdict")),
                        s.get("cause"),
                        _dumps(s),
                    )
                    for i, s in enumerate(schedules)
                ],
            )
        return validation_id

    @_reader
    def validations(self, session_id: int | None = None) -> list[dict[str, Any]]:
        """Stored validation runs, newest first (all, or one session's), each with its per-schedule
        ``results`` (the columns, ``detail`` parsed). A fresh dict on every call."""
        with self._read():
            if session_id is not None:
                self._require_session(session_id)
            sql = (
                "SELECT id, session_id, schedule_file, created_at, hostname, runs, verdict, cause, summary "
                "FROM validations"
            )
            params: tuple[Any, ...] = ()
            if session_id is not None:
                sql += " WHERE session_id = ?"
                params = (session_id,)
            runs = [dict(r) for r in self._rows(sql + " ORDER BY id DESC", params)]
            results: dict[int, list[dict[str, Any]]] = {}
            if runs:
                ids = [r["id"] for r in runs]
                rows = self._rows(
                    "SELECT validation_id, idx, trial_id, label, recorded_ms, remeasured_ms, cv, runs, throttled, "
                    "verdict, cause, detail FROM validation_results "
                    f"WHERE validation_id IN ({', '.join('?' * len(ids))}) "
                    "ORDER BY validation_id, idx",
                    ids,
                )
                for r in rows:
                    item = dict(r)
                    item["throttled"] = bool(item["throttled"])
                    item["detail"] = _json_decode(item["detail"])
                    results.setdefault(item.pop("validation_id"), []).append(item)
        for r in runs:
            r["results"] = results.get(r["id"], [])
        return runs

    @_reader
    def validation(self, validation_id: int) -> dict[str, Any]:
        """The full report of one validation run (as ``tunelab.core.trust.validate`` returned it, plus ``id``)."""
        row = self._conn.execute("SELECT report FROM validations WHERE id = ?", (validation_id,)).fetchone()
        if row is None:
            raise StoreError(f"validation {validation_id} does not exist in {self.path}")
        report = _json_decode(row[0])
        report["id"] = validation_id
        return report

    # ----------------------------------------------------------------------------------- baselines

    @_reader
    def baseline(
        self, workload: str, shape: dict[str, int], dtype: str, target_kind: str, hostname: str | None = None
    ) -> VendorBaseline | None:
        """The stored vendor baseline of one problem on this (or ``hostname``'s) machine; None if none."""
        row = self._conn.execute(
            """SELECT detail FROM vendor_baselines WHERE hostname = ? AND workload = ? AND shape = ? AND dtype = ?
            AND target_kind = ?""",
            (hostname or self._hostname, workload, _shape_key(shape), dtype, target_kind),
        ).fetchone()
        return None if row is None else VendorBaseline.from_json(_json_decode(row[0]))

    def put_baseline(self, entry: VendorBaseline) -> None:
        """Store (or replace) a baseline (its hostname defaults to this machine). The whole entry is
        kept as JSON (:meth:`VendorBaseline.to_json`)."""
        data = entry.to_json()
        data.setdefault("hostname", self._hostname)
        with self._write() as conn:
            conn.execute(
                """INSERT INTO vendor_baselines (hostname, workload, shape, dtype, target_kind, library, median_ms,
                    gflops, measured_at, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (hostname, workload, shape, dtype, target_kind) DO UPDATE SET
                    library = excluded.library, median_ms = excluded.median_ms, gflops = excluded.gflops,
                    measured_at = excluded.measured_at, detail = excluded.detail""",
                (
                    data["hostname"],
                    entry.workload,
                    _shape_key(entry.shape),
                    entry.dtype,
                    entry.target_kind,
                    entry.library,
                    float(entry.median_ms),
                    entry.gflops,
                    float(entry.measured_at),
                    _dumps(data),
                ),
            )

    # ----------------------------------------------------------------------------------- machine profile

    @_reader
    def machine_profile(self, target_kind: str, hostname: str | None = None) -> MachineProfile | None:
        """This (or ``hostname``'s) machine's measured roofline for a target kind; None if never measured."""
        row = self._conn.execute(
            "SELECT detail FROM machine_profile WHERE hostname = ? AND target_kind = ?",
            (hostname or self._hostname, target_kind),
        ).fetchone()
        return None if row is None else MachineProfile.from_json(_json_decode(row[0]))

    def put_machine_profile(self, profile: MachineProfile) -> None:
        """Store (or replace) a profile, kept as JSON (:meth:`MachineProfile.to_json`, without ``cached``:
        that is said by each look-up)."""
        data = replace(profile, cached=None).to_json()
        with self._write() as conn:
            conn.execute(
                """INSERT OR REPLACE INTO machine_profile (hostname, target_kind, measured_at, peak_gflops,
                    bandwidth_gbs, detail) VALUES (?, ?, ?, ?, ?, ?)""",
                (
                    profile.hostname,
                    profile.target_kind,
                    float(profile.measured_at),
                    _dumps(profile.peak_gflops),
                    float(profile.bandwidth_gbs),
                    _dumps(data),
                ),
            )


_TELEMETRY_COLUMNS = (
    "session_id, t, gpu_temp_c, gpu_power_w, gpu_power_limit_w, gpu_sm_clock_mhz, gpu_mem_clock_mhz, "
    "gpu_util_pct, gpu_mem_util_pct, gpu_mem_used_mib, throttle_reasons, other_gpu_procs, other_gpu_pids, "
    "cpu_load_per_core, cpu_load_mean, cpu_freq_mhz, cpu_temp_c, other_busy_procs, other_busy_pids"
)


def _split_ints(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(",")) if text else ()


def _telemetry_sample(row: Sequence[Any]) -> TelemetrySample:
    return TelemetrySample(
        t=row[1],
        gpu_temp_c=row[2],
        gpu_power_w=row[3],
        gpu_power_limit_w=row[4],
        gpu_sm_clock_mhz=row[5],
        gpu_mem_clock_mhz=row[6],
        gpu_util_pct=row[7],
        gpu_mem_util_pct=row[8],
        gpu_mem_used_mib=row[9],
        throttle_reasons=tuple(row[10].split(",")) if row[10] else (),
        other_gpu_procs=row[11],
        other_gpu_pids=_split_ints(row[12]),
        cpu_load_per_core=tuple(_json_decode(row[13])),
        cpu_load_mean=row[14],
        cpu_freq_mhz=row[15],
        cpu_temp_c=row[16],
        other_busy_procs=row[17],
        other_busy_pids=_split_ints(row[18]),
    )


def _shape_key(shape: dict[str, int]) -> str:
    """A shape as the text baselines are keyed by (sorted keys: the same problem, the same key)."""
    return json.dumps({k: int(v) for k, v in shape.items()}, sort_keys=True, separators=(",", ":"))

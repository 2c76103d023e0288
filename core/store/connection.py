"""One connection to a tunelab database file: opening it, its write and read transactions, its errors.

The tuning process writes; the GUI, the CLI and other tuning processes read the same file at the
same time. The rules that make that safe:

* WAL journal, ``synchronous=NORMAL``, ``busy_timeout`` 10 s: readers never block the writer and the
  writer never blocks readers.
* Every write is one short ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction. A trial and all its samples
  are committed together the moment they are added, so no reader ever sees a trial without its samples.
* Every read is a single statement or a short read transaction that is finished before the method
  returns; no transaction (and no cursor) is ever left open.
* A connection belongs to the thread that opened it (sqlite3's ``check_same_thread``). Each thread and
  each process opens its own Store; ``Store.reopen`` gives a new one on the same file for another thread.

Opening checks that the file is a tunelab database and brings its schema up to the version
:mod:`tunelab.core.store.schema` writes. An sqlite3 error is said as a :class:`StoreError` (bad input:
not a tunelab file, read-only, damaged, locked while opening) or a :class:`StoreFailure` (the disk or
the file failing while the store works).
"""

from __future__ import annotations

import functools
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import quote

import platformdirs
from sqlite_utils import Database

from tunelab.core.errors import StoreError, StoreFailure, StoreLockedError
from tunelab.core.store.schema import apply_migrations, schema_version

APP_ID = "tunelab"
BUSY_TIMEOUT_S = 10.0
# How long a tuning session's writes wait for a write lock held by another process (a long query in
# a `sqlite3` shell, a backup) before the session gives up and ends as crashed: SQLite's busy handler
# waits BUSY_TIMEOUT_S, then the write is retried with back-off until this much time has passed.
SESSION_WRITE_PATIENCE_S = 120.0
WRITE_PATIENCE_ENV = "TUNELAB_WRITE_PATIENCE_S"  # overrides it (tests use a few seconds)


def default_db_path() -> Path:
    """``$TUNELAB_DB`` if set, else ``<user data dir>/tunelab/tunelab.sqlite`` (the folder is created)."""
    env = os.environ.get("TUNELAB_DB")
    if env:
        return Path(env).expanduser()
    folder = Path(platformdirs.user_data_dir(APP_ID))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "tunelab.sqlite"


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
    def read(self: StoreConnection, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if not _is_damage(exc):
                raise
            raise StoreError(_damaged(self.path, exc)) from exc

    return cast(_Reader, read)


class StoreConnection:
    """The connection a Store reads and writes through: opening, schema check, transactions.

    The Store's methods per concern (``tunelab.core.store.store``) are written over this class.
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
    def hostname(self) -> str:
        """This machine's name, as the store keys machine-specific figures (baselines, profiles)."""
        return self._hostname

    @property
    def writable(self) -> bool:
        return not self.readonly

    def require_writable(self) -> None:
        """StoreError (one line) when this store cannot be written: check before work that ends in a write."""
        if self.readonly:
            raise StoreError(f"Cannot write to {self.path}: {self.read_only_reason}.")

    def close(self) -> None:
        self._conn.close()

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
            self._conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(apply_migrations(self.db, version)),),
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

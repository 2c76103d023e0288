"""The Store: one connection to a tunelab database, with every read and write the engine and the app use.

Each concern's methods live in a module of their own, written over one
:class:`~tunelab.core.store.connection.StoreConnection`: sessions (``sessions``), trials, tasks and
rounds (``trials``), the column reads (``columns``), telemetry (``telemetry_rows``) and what the trust
tools keep (``artifacts``). This class puts them together and says what a Store is.
"""

from __future__ import annotations

from tunelab.core.store.artifacts import ArtifactStore
from tunelab.core.store.columns import TrialColumnReads
from tunelab.core.store.sessions import SessionStore
from tunelab.core.store.telemetry_rows import TelemetryStore
from tunelab.core.store.trials import TrialStore


class Store(SessionStore, TrialStore, TrialColumnReads, TelemetryStore, ArtifactStore):
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

    def reopen(self) -> Store:
        """A new Store on the same file (same mode). Call it in the thread that will use the new Store."""
        return Store(self.path, readonly=self._asked_readonly, create=False)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}{', readonly=True' if self.readonly else ''})"

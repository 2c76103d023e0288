"""Telemetry batches written to one session through a Store of its own (the sampler thread's).

SQLite and threads: a Store's connection belongs to the thread that opened it, so a sampler's sink never
uses the session's Store: this one opens its own lazily, in the sampler thread, and closes it there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tunelab.core.telemetry.readings import TelemetrySample

# ------------------------------------------------------------------------------------------- sinks


class StoreSink:
    """Writes telemetry batches to one session through a Store of its own.

    The Store is opened on first use, i.e. in the thread that calls the sink (the sampler's), and
    :meth:`close` must be called from that same thread (the sampler does both). It never touches the
    session's Store, whose connection belongs to another thread.
    """

    def __init__(self, db_path: str | os.PathLike[str], session_id: int) -> None:
        self.db_path = Path(db_path)
        self.session_id = session_id
        self._store: Any = None

    def __call__(self, samples: list[TelemetrySample]) -> None:
        if self._store is None:
            from tunelab.core.store.store import Store

            self._store = Store(self.db_path, create=False)
        self._store.add_telemetry(self.session_id, samples)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


# ------------------------------------------------------------------------------------------- recording

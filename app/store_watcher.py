"""Notices changes to the store made by anyone (this app's worker, a CLI in another process).

Polling is cheap: one read of the trial id sequence and one aggregate over the sessions table.
Views subscribe to the signals and re-read what they show; nothing is cached here.
"""

from __future__ import annotations

import sqlite3
import time

from PySide6.QtCore import QObject, QTimer, Signal

from core.errors import TunelabError
from core.store import Store

# Sessions turn "crashed" without a write (their process died), so re-read them now and then anyway.
FULL_REFRESH_S = 5.0


def sessions_fingerprint(store: Store) -> tuple:
    """Changes whenever a session is added, deleted or updated (status, heartbeat, tuner state)."""
    row = store.db.execute(
        "SELECT count(*), coalesce(max(id), 0), coalesce(sum(updated_at), 0) FROM sessions"
    ).fetchone()
    return tuple(row)


class StoreWatcher(QObject):
    """Polls `store` every `interval_ms` on the GUI thread and says what changed."""

    sessions_changed = Signal()
    trials_added = Signal(int)  # the largest trial id now in the store
    failed = Signal(str)

    def __init__(self, store: Store, interval_ms: int = 500, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._max_trial_id = -1
        self._fingerprint: tuple | None = None
        self._last_full = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.poll)

    @property
    def max_trial_id(self) -> int:
        return self._max_trial_id

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def poll(self) -> None:
        """Check the store now (also what the timer calls)."""
        try:
            max_id = self._store.max_trial_id()
            fingerprint = sessions_fingerprint(self._store)
        except (TunelabError, sqlite3.Error) as exc:
            self.failed.emit(f"Cannot read the store: {exc}")
            return
        now = time.monotonic()
        trials_changed = max_id != self._max_trial_id
        if trials_changed or fingerprint != self._fingerprint or now - self._last_full > FULL_REFRESH_S:
            self._fingerprint = fingerprint
            self._last_full = now
            self._max_trial_id = max_id
            self.sessions_changed.emit()
        if trials_changed:
            self.trials_added.emit(max_id)

"""Notices changes to the store made by anyone (this app's worker, a CLI in another process).

Polling is cheap: one read of the trial id sequence and of each session's ``updated_at``. What
changed is read again, and only that: the sessions whose row was written or that gained trials
(one indexed look-up each), and the running ones, whose status turns "crashed" without a write
when their process dies. The watcher keeps the sessions as last read (`sessions()`), so the
browser, Compare and the run bar share one read instead of each reading every session (which
counts every trial of every session).
"""

from __future__ import annotations

import sqlite3
import time

from PySide6.QtCore import QObject, QTimer, Signal

from tunelab.app.widgets.timers import single_shot
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store

# Sessions turn "crashed" without a write (their process died), so re-read the running ones now and then.
FULL_REFRESH_S = 5.0


def sessions_fingerprint(store: Store) -> tuple:
    """Changes whenever a session is added, deleted or updated (status, heartbeat, tuner state)."""
    row = store.db.execute(
        "SELECT count(*), coalesce(max(id), 0), coalesce(sum(updated_at), 0) FROM sessions"
    ).fetchone()
    return tuple(row)


def _order(records: dict[int, SessionRecord]) -> list[SessionRecord]:
    """Newest first, as `Store.sessions` lists them."""
    return sorted(records.values(), key=lambda r: (r.created_at, r.id), reverse=True)


class StoreWatcher(QObject):
    """Polls `store` every `interval_ms` on the GUI thread and says what changed.

    `trials_added` comes first; `sessions_changed` follows on a later turn of the event loop, so
    that the views' work for new trials and the browser's refresh never make one long stall."""

    sessions_changed = Signal()  # sessions() holds the new records; changed_ids says which (None: all)
    trials_added = Signal(int)  # the largest trial id now in the store
    failed = Signal(str)

    def __init__(self, store: Store, interval_ms: int = 500, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._max_trial_id = -1
        self._stamps: dict[int, float] | None = None
        self._records: dict[int, SessionRecord] = {}
        self._last_full = 0.0
        self.changed_ids: set[int] | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.poll)
        self._emit_timer = single_shot(self, 0, self.sessions_changed.emit)

    @property
    def max_trial_id(self) -> int:
        return self._max_trial_id

    def sessions(self) -> list[SessionRecord]:
        """Every session as last read, newest first (read now if never read)."""
        if self._stamps is None:
            self.poll()
        return _order(self._records)

    def session(self, session_id: int) -> SessionRecord | None:
        return self._records.get(session_id)

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._emit_timer.stop()

    def poll(self) -> None:
        """Check the store now (also what the timer calls)."""
        store = self._store
        now = time.monotonic()
        periodic = now - self._last_full > FULL_REFRESH_S
        try:
            max_id = store.max_trial_id()
            stamps = store.session_stamps()
            trials_changed = max_id != self._max_trial_id
            if self._stamps is None:  # the first look: everything
                records = {r.id: r for r in store.sessions()}
                changed: set[int] | None = None
            else:
                old = self._stamps
                changed = {i for i in stamps.keys() | old.keys() if stamps.get(i) != old.get(i)}
                if trials_changed:
                    changed |= store.sessions_with_trials_after(self._max_trial_id)
                if periodic:
                    changed |= {i for i, r in self._records.items() if r.status == "running"}
                records = dict(self._records)
                for session_id in changed:
                    try:
                        records[session_id] = store.session(session_id)
                    except TunelabError:  # deleted meanwhile
                        records.pop(session_id, None)
                for session_id in set(records) - set(stamps):
                    records.pop(session_id)
                    changed.add(session_id)
                # Only the sessions whose record really differs (re-read running ones mostly do not).
                changed = {i for i in changed if records.get(i) != self._records.get(i)}
        except (TunelabError, sqlite3.Error) as exc:
            self.failed.emit(f"Cannot read the store: {exc}")
            return
        if periodic:
            self._last_full = now
        self._stamps = stamps
        self._records = records
        self._max_trial_id = max_id
        if trials_changed:
            self.trials_added.emit(max_id)
        # Now and then also when nothing changed: whether a paused session's process is still alive
        # (so whether it can be resumed) is not in the store.
        if changed is None or changed or periodic:
            if self._emit_timer.isActive():  # the last change is not told yet: tell both at once
                merged = None if changed is None or self.changed_ids is None else self.changed_ids | changed
                self.changed_ids = merged
            else:
                self.changed_ids = changed
            self._emit_timer.start()

"""What each session states as its best figure once it has been confirmed (or refuted) in fresh
processes: the export pick of tunelab.core.export.pick, read again only for a session whose stored
validations or best trial changed. The browser, the Live header and the export dialog all show it, so
that a confirmed figure replaces the session's own everywhere at once."""

from __future__ import annotations

from collections.abc import Iterable

from tunelab.app.widgets.formatting import fmt_fresh_runs, fmt_ms
from tunelab.core.errors import TunelabError
from tunelab.core.export.pick import ExportPick, export_pick
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store


class StatedFigures:
    """Confirmed picks by session id; `refresh(records)` re-reads only what changed."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # session id -> ((latest validation id, best trial id), the pick; None: no confirmation)
        self._picks: dict[int, tuple[tuple[int, int | None], ExportPick | None]] = {}

    def refresh(self, records: Iterable[SessionRecord]) -> None:
        try:
            stamps = self._store.validation_stamps()
        except TunelabError:
            return
        for r in records:
            latest = stamps.get(r.id)
            if latest is None or r.best_trial_id is None:
                self._picks.pop(r.id, None)
                continue
            key = (latest, r.best_trial_id)
            if r.id in self._picks and self._picks[r.id][0] == key:
                continue
            try:
                pick = export_pick(self._store, r.id)
            except TunelabError:
                pick = None
            self._picks[r.id] = (key, pick if pick is not None and pick.confirmation is not None else None)

    def pick(self, session_id: int | None) -> ExportPick | None:
        """The session's confirmed pick (None when none of its trials has a confirmed figure)."""
        entry = self._picks.get(session_id) if session_id is not None else None
        return entry[1] if entry else None


def superseded_words(pick: ExportPick) -> str:
    """'1.23 ms confirmed in 5 fresh processes (trial #12); the session's 1.10 ms is superseded' (or 'in 3
    fresh sessions on the RPC servers' for a session confirmed through a tracker)."""
    c = pick.confirmation
    text = f"{fmt_ms(pick.stated_ms)} ms confirmed"
    if c is not None:
        text += f" in {fmt_fresh_runs(c.runs, c.devices)}"
    text += f" (trial #{pick.trial.number})"
    own = pick.trial.latency_ms
    if own is not None:
        text += f"; the session's {fmt_ms(own)} ms is superseded"
    return text

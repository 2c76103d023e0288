"""What each session states as its one best figure (tunelab.core.export.stated): the figure its export
would write, with its kind (confirmed ✓ / untrusted ⚠ / the session's own ○). Read again only for a
session whose stored validations or best trial changed. The browser, the Live header, the Compare view,
the finish banner and the export dialog all show it, so a session has one best everywhere."""

from __future__ import annotations

from collections.abc import Iterable

from tunelab.app.widgets.formatting import fmt_fresh_runs, fmt_ms
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store
from tunelab.core.usecases.export import KIND_WORDS, ExportPick, StatedBest, export_pick, stated_from_pick

# The browser's Best ms header tooltip: what each mark means.
MARK_LEGEND = "  ".join(
    f"{mark} {KIND_WORDS[kind]}" for kind, mark in (("confirmed", "✓"), ("untrusted", "⚠"), ("session", "○"))
)


class StatedFigures:
    """Stated bests (and the export picks behind them) by session id; `refresh(records)` re-reads only
    what changed."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # session id -> ((latest validation id, best trial id), the pick, its stated best)
        self._entries: dict[int, tuple[tuple[int, int], ExportPick, StatedBest]] = {}

    def refresh(self, records: Iterable[SessionRecord]) -> None:
        try:
            stamps = self._store.validation_stamps()
        except TunelabError:
            return
        for r in records:
            if r.best_trial_id is None:
                self._entries.pop(r.id, None)
                continue
            key = (stamps.get(r.id) or 0, r.best_trial_id)
            if r.id in self._entries and self._entries[r.id][0] == key:
                continue
            try:
                pick = export_pick(self._store, r.id)
            except TunelabError:
                self._entries.pop(r.id, None)
                continue
            flops = pick.task.flops if pick.task is not None else r.flops
            self._entries[r.id] = (key, pick, stated_from_pick(pick, flops))

    def stated(self, session_id: int | None) -> StatedBest | None:
        """The session's one best (None while it has no successful trial)."""
        entry = self._entries.get(session_id) if session_id is not None else None
        return entry[2] if entry else None

    def pick(self, session_id: int | None) -> ExportPick | None:
        """The session's confirmed pick (None when none of its trials has a confirmed figure)."""
        entry = self._entries.get(session_id) if session_id is not None else None
        return entry[1] if entry and entry[1].confirmation is not None else None


def stated_words(stated: StatedBest) -> str:
    """'✓ 1.23 ms confirmed in 5 fresh processes (trial #12)' and, for other kinds, why it is not to be
    held to: a tooltip's text."""
    return f"{stated.mark} {stated.words()}"


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

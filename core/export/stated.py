"""A session's one "best": the figure an export of it would state, and which kind of figure that is.

Every place that names a session's best (the app's session list, Live header, Compare view and finish
banner; ``tunelab sessions``, ``show``, ``compare``; the export) reads it from here, so one session has
one best everywhere and a speed-up is computed from the same figures the list shows:

- ``confirmed``: timed again in fresh processes on a quiet machine, its runs agreeing: a figure to hold
  to, and the only kind marked ✓;
- ``untrusted``: confirmed, but while something disturbed the machine, or its runs scattered (a noisy
  verdict): shown, never marked as trusted;
- ``session``: never confirmed; the session's own figure of its winner (biased low: it was picked by
  that very figure).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunelab.core.errors import StoreError
from tunelab.core.export.pick import ExportPick, export_pick, untrusted_because
from tunelab.core.records import SessionRecord
from tunelab.core.records_json import JsonRecord
from tunelab.core.store import Store

KINDS = ("confirmed", "untrusted", "session")
# One mark per kind, for the app's tables and headers; the command line says the kind in words.
MARKS = {"confirmed": "✓", "untrusted": "⚠", "session": "○"}
KIND_WORDS = {
    "confirmed": "confirmed in fresh processes on a quiet machine",
    "untrusted": "confirmed, but not a figure to hold to",
    "session": "the session's own figure, not confirmed in fresh processes",
}


@dataclass(frozen=True, slots=True)
class StatedBest(JsonRecord):
    """The best figure a session states (what its export would write) and its kind."""

    session_id: int
    trial_id: int
    trial_number: int
    ms: float
    gflops: float | None
    kind: str  # one of KINDS
    why: str | None  # for untrusted and session figures: why the figure cannot be held to
    session_ms: float | None  # the session's own figure of that trial (equal to ms for a session figure)
    runs: int = 0  # fresh processes of its confirmation (0: never confirmed)
    devices: tuple[str, ...] = ()  # the RPC servers whose fresh sessions confirmed it; (): processes here

    json_properties = {"trusted": "kind"}

    @property
    def trusted(self) -> bool:
        return self.kind == "confirmed"

    @property
    def mark(self) -> str:
        return MARKS[self.kind]

    def words(self) -> str:
        """'0.04238 ms confirmed in 5 fresh processes (trial #12)', or with why it is not to be held to."""
        text = f"{self.ms:.4g} ms"
        if self.kind == "session":
            text += (
                f" as the session measured it (trial #{self.trial_number}, not confirmed in fresh processes)"
            )
        else:
            text += f" confirmed in {self.runs} fresh process{'es' * (self.runs != 1)} (trial #{self.trial_number})"
            if self.why:
                text += f"; not a figure to hold to: {self.why}"
        return text


def stated_from_pick(pick: ExportPick, flops: float | None) -> StatedBest:
    """The StatedBest of an export pick (``flops``: of one call at the pick's shape, for GFLOP/s)."""
    c = pick.confirmation
    why = untrusted_because(c)
    kind = "session" if c is None else ("untrusted" if why else "confirmed")
    ms = pick.stated_ms
    return StatedBest(
        session_id=pick.trial.session_id,
        trial_id=pick.trial.id,
        trial_number=pick.trial.number,
        ms=ms,
        gflops=(flops / (ms * 1e-3) / 1e9) if flops and ms > 0 else None,
        kind=kind,
        why=why,
        session_ms=pick.trial.latency_ms,
        runs=c.runs if c is not None else 0,
        devices=c.devices if c is not None else (),
    )


def stated_best(store: Store, record: SessionRecord) -> StatedBest | None:
    """The session's stated best (None while it has no successful trial)."""
    if record.best_trial_id is None:
        return None
    try:
        pick = export_pick(store, record.id)
    except StoreError:
        return None
    flops = pick.task.flops if pick.task is not None else record.flops
    return stated_from_pick(pick, flops)

"""Tuning as a person asks for it: a session whose winners are confirmed in fresh processes when it finishes.

The session loop (tunelab.core.session.loop) knows nothing of confirmation, which lives a layer above it
(core.trust): this use case joins them, for the command line and, through it, the desktop app.
"""

from __future__ import annotations

from tunelab.core.errors import TunelabError
from tunelab.core.session.loop import TuningSession
from tunelab.core.trust.baselines import baseline_for
from tunelab.core.trust.confirm import confirm_session

# Where the vendor is timed before round 0: on a GPU a random first-round kernel can take seconds a call,
# and the measurer times one call of anything far slower than the vendor (tunelab.core.measure.runner).
# A CPU's vendor figure is not needed that early (its random kernels take milliseconds), and measuring
# it would add seconds to every session.
VENDOR_FIRST_KINDS = ("cuda",)


def confirm_when_finished(session: TuningSession) -> TuningSession:
    """Have `session` re-measure its fastest trials in fresh processes once it finishes (the winner's
    curse: core.trust.confirm), storing the confirmation; its MeasureOptions say how many (0: none)."""

    def confirm(finished: TuningSession) -> None:
        finished.confirmations = confirm_session(
            finished.store,
            finished.session_id,
            is_cancelled=finished.cancel_requested,
            on_stage=finished.report_stage,
        )

    session.before_finish.append(confirm)
    return session


def vendor_before_round_zero(session: TuningSession, kinds: tuple[str, ...] = VENDOR_FIRST_KINDS) -> int:
    """Measure (or read) the vendor library's time on each of the session's shapes before it runs, so its
    measurer knows it from the first batch; returns how many shapes have one. A vendor that cannot be
    had is said as a stage and the session goes on without it."""
    if session.target.kind not in kinds:
        return 0
    store = session.store
    record = store.session(session.session_id)
    known = 0
    for task in range(len(store.tasks(session.session_id)) or 1):
        session.report_stage(f"timing the vendor library on shape {task + 1} before round 0")
        try:
            known += baseline_for(store, record, task=task) is not None
        except TunelabError as exc:
            session.report_stage(f"no vendor figure before round 0: {exc}")
    return known

"""Tuning as a person asks for it: a session whose winners are confirmed in fresh processes when it finishes.

The session loop (tunelab.core.session.loop) knows nothing of confirmation, which lives a layer above it
(core.trust): this use case joins them, for the command line and, through it, the desktop app.
"""

from __future__ import annotations

from tunelab.core.session.loop import TuningSession
from tunelab.core.trust.confirm import confirm_session


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

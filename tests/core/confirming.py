"""A session run as `tunelab tune` runs it, confirmed when it finishes, and the checks of a stored confirmation."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.trust.confirmed import CONFIRM_PURPOSE
from tunelab.core.trust.remeasure.report import ValidationReport
from tunelab.core.usecases.tuning import confirm_when_finished


def run_confirmed(store: Store, spec) -> tuple:
    """(session, its stage lines, its trials) of ``spec`` run to its end and confirmed; it must finish."""
    session = confirm_when_finished(create_session(store, spec))
    stages: list[str] = []
    session.on_stage.append(stages.append)
    trials = list(session.run())
    assert store.session(session.session_id).status == "finished"
    return session, stages, trials


def finished_in_file(path: Path, spec) -> int:
    """The id of a session of ``spec`` run to its end, unconfirmed, in the database ``path`` (closed after)."""
    store = Store(path)
    try:
        session = create_session(store, spec)
        for _ in session.run():
            pass
        return session.session_id
    finally:
        store.close()


def assert_stored_as_it_was(store: Store, report: ValidationReport) -> dict:
    """The confirmation ``report`` is in the store as a confirmation, as it was made: its stored document."""
    full = store.validation(report.id)
    assert full["source"]["purpose"] == CONFIRM_PURPOSE
    assert ValidationReport.from_json(full).to_json() == report.to_json()
    return full

"""Exporting a session's trial as files, and what such a file states (the trial an export picks, the
confirmed figures it rests on, the one best figure every view states): `tunelab export`, `show`, the
app's export dialog and every view that states a session's best."""

from __future__ import annotations

from typing import Any

from tunelab.core.export.files import FORMATS, export_trial, load_schedule_file
from tunelab.core.export.pick import ExportPick, PlacementFigures, export_pick
from tunelab.core.export.stated import KIND_WORDS, MARKS, StatedBest, stated_best, stated_from_pick
from tunelab.core.store import Store
from tunelab.core.trust.confirmed import Confirmation, confirmations

__all__ = [
    "FORMATS",
    "KIND_WORDS",
    "MARKS",
    "PlacementFigures",
    "StatedBest",
    "stated_best",
    "stated_from_pick",
    "Confirmation",
    "ExportPick",
    "confirmations",
    "export_pick",
    "export_session_trial",
    "export_trial",
    "load_schedule_file",
]


def export_session_trial(
    store: Store,
    session_id: int,
    *,
    trial_number: int | None = None,
    trial_id: int | None = None,
    out_dir: str,
    force: bool = False,
    robust: bool = False,
) -> dict[str, Any]:
    """Write a session's best trial (or the one named by its number within the session, or its id) into
    ``out_dir``; the files written, by kind."""
    if trial_number is not None:
        trial_id = store.trial_id_of(session_id, trial_number)
    return export_trial(store, session_id, trial_id, out_dir=out_dir, force=force, robust=robust)

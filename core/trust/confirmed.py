"""The confirmed figures a store holds for a session's trials (what core.trust.confirm measured).

A read of stored validations only, so that whatever states a figure (export, validate, show) can use
the confirmed one without depending on the machinery that measures it.
"""

from __future__ import annotations

from typing import Any

from tunelab.core.store import Store

CONFIRM_PURPOSE = "confirm"


def confirmations(store: Store, session_id: int) -> dict[int, dict[str, Any]]:
    """The latest confirmed figures of a session's trials, by trial id: ``median_ms``, ``samples_ms``,
    ``runs``, ``cv``, ``run_cv``, ``verdict``, ``session_ms`` (the figure the session recorded),
    ``reference_ms`` (tunelab.core.trust.validate's reference kernel meanwhile) and ``validation_id``. Trials never
    confirmed (or confirmed without a single timing) are absent."""
    found: dict[int, dict[str, Any]] = {}
    for entry in store.validations(session_id):  # newest first: the first figure seen for a trial wins
        report = store.validation(entry["id"])
        if (report.get("source") or {}).get("purpose") != CONFIRM_PURPOSE:
            continue
        for s in report.get("schedules", []):
            trial_id = s.get("trial_id")
            if trial_id is None or trial_id in found or s.get("remeasured_ms") is None:
                continue
            found[trial_id] = {
                "median_ms": s["remeasured_ms"],
                "samples_ms": list(s.get("samples_ms") or []),
                "runs": s.get("runs"),
                "cv": s.get("cv"),
                "run_cv": s.get("run_cv"),
                "verdict": s.get("verdict"),
                "session_ms": s.get("recorded_ms"),
                "reference_ms": s.get("reference_ms"),
                "validation_id": entry["id"],
            }
    return found

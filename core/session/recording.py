"""What a session records of each candidate it measured: the trial, the machine's state meanwhile, the ranking."""

from __future__ import annotations

from typing import Any

from tunelab.core.records import NewTrial, TrialRecord
from tunelab.core.search.costmodel import spearman


def new_trial(
    round_index: int, config: dict, result: Any, i: int, predicted: Any, shadow: dict[str, Any]
) -> NewTrial:
    """The trial to store for the ``i``-th candidate of a batch, measured as ``result``
    (tunelab.core.measure.runner), with what the models predicted of it before it was measured."""
    return NewTrial(
        round=round_index,
        config=config,
        status=result.status,
        error=result.error,
        samples_ms=result.samples_ms,
        predicted_ms=float(predicted[i]) if predicted is not None else None,
        build_s=result.build_s,
        run_s=result.run_s,
        started_at=result.started_at,
        finished_at=result.finished_at,
        device=result.device,
        shadow_predictions={m: float(p[i]) for m, p in shadow.items()} or None,
    )


def trial_stamp(sampler: Any, trial: TrialRecord, result: Any, warning: str | None) -> dict[str, Any]:
    """The machine's state while the trial ran (the telemetry sampler's summary), with why the
    machine was not quiet and which remote device ran the kernel, where either applies."""
    stamp: dict[str, Any] = sampler.summary_between(
        trial.finished_at - (result.run_s or 0.0), trial.finished_at
    )
    if warning:
        stamp["warning"] = warning
    if result.device:  # this machine's readings, while a remote device ran the kernel
        stamp["remote_device"] = result.device
    return stamp


def round_spearman(trials: list[TrialRecord], predicted: Any) -> float | None:
    """How well the session's own model ranked the round's trials (None without predictions)."""
    if predicted is None:
        return None
    pairs = [(t.predicted_ms, t.latency_ms) for t in trials if t.ok and t.predicted_ms is not None]
    return spearman([p for p, _ in pairs], [m for _, m in pairs]) if pairs else None

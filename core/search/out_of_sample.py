"""A cost model's predictions of recorded trials, each made as it would have been in the session: for every
round r (a batch the tuner proposed), a fresh model is trained on the successful trials of the rounds before
r and predicts round r. No trial is predicted by a model that saw it, so the predictions can be judged
against the measurements (tunelab.core.usecases.model_compare's scores, tunelab.core.trust.bias's report
for any model). Rounds before the model has ``min_samples`` trials are not predicted (NaN).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tunelab.core.search.costmodel import spearman
from tunelab.core.search.models import make_cost_model


@dataclass
class OutOfSample:
    predicted_ms: np.ndarray  # one per trial (the rows given), NaN where its round was not predicted
    rounds: int = 0  # rounds predicted
    round_spearman: list[float] = field(default_factory=list)  # each predicted round's own rank correlation
    train_s: float = 0.0
    predict_s: float = 0.0

    @property
    def predicted(self) -> np.ndarray:
        """The rows that have a prediction (a boolean mask)."""
        return np.isfinite(self.predicted_ms)


def predict_in_time_order(
    name: str,
    X: np.ndarray,
    latency_ms: np.ndarray,
    rounds: np.ndarray,
    *,
    seed: int = 0,
    space: Any = None,
    profile: Any = None,
) -> OutOfSample:
    """Model ``name`` (tunelab.core.search.models) on trials with features ``X``, measured ``latency_ms``
    and ``rounds``, every round predicted by a model trained only on the rounds before it."""
    out = OutOfSample(predicted_ms=np.full(len(latency_ms), np.nan))
    for r in sorted(set(rounds.tolist()))[1:]:
        before, now = rounds < r, rounds == r
        model = make_cost_model(name, seed=seed, space=space, profile=profile)
        if before.sum() < model.min_samples or now.sum() < 2:
            continue
        t0 = time.perf_counter()
        model.fit(X[before], latency_ms[before])
        t1 = time.perf_counter()
        pred = model.predict(X[now])
        out.predict_s += time.perf_counter() - t1
        out.train_s += t1 - t0
        if pred is None:
            continue
        out.rounds += 1
        out.predicted_ms[now] = pred
        rho = spearman(pred, latency_ms[now])
        if rho is not None:
            out.round_spearman.append(rho)
    return out

"""Any cost model's predictions of a session's trials, each made before the model saw that trial, so that the
bias report (tunelab.core.trust.bias) can be drawn for any model, not only the one the session stored.

Three sources, in the order they are preferred:

- ``stored``: the model that made the session's own predictions (``TrialRecord.predicted_ms``; the xgb
  tuner's model, which steered the search);
- ``shadow``: a model the session ran beside it without steering (``tune --shadow-models``), its
  predictions stored before each trial was measured;
- ``refit``: any other registered model, refit on the session's trials in time order (trained on the
  rounds before each round, predicting that round: tunelab.core.search.out_of_sample), as
  ``tunelab models`` scores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from tunelab.core.search.models import make_cost_model
from tunelab.core.search.out_of_sample import predict_in_time_order
from tunelab.core.stats import positive_finite

if TYPE_CHECKING:
    from tunelab.core.store import Store

PredictionSource = Literal["stored", "shadow", "refit"]
SOURCE_WORDS: dict[str, str] = {
    "stored": "its predictions as the session stored them",
    "shadow": "predicted live beside the session's model, without steering",
    "refit": "refit on the session's trials in time order, each round predicted by a model of the rounds before",
}


@dataclass(frozen=True)
class ModelPredictions:
    session_id: int
    model: str
    source: PredictionSource
    predicted_ms: dict[int, float]  # trial id -> the model's prediction, made before it saw that trial


def prediction_source(record: Any, model: str | None) -> tuple[str, PredictionSource]:
    """(the model, where its predictions of session ``record``'s trials come from); None: the stored ones."""
    own, _steered = record.predicting_model
    if model is None or model == own:
        return own, "stored"
    make_cost_model(model)  # an unknown name: one TunelabError listing the models, before any work
    return model, "shadow" if model in record.shadow_models else "refit"


def model_predictions(store: Store, session_id: int, model: str | None, *, seed: int = 0) -> ModelPredictions:
    """Model ``model``'s predictions of session ``session_id``'s successful trials (see the module docstring)."""
    record = store.session(session_id)  # an unknown session: the store's one-line error
    name, source = prediction_source(record, model)
    if source == "stored":
        predicted = {
            t.id: float(t.predicted_ms) for t in store.trials(session_id) if positive_finite(t.predicted_ms)
        }
    elif source == "shadow":
        predicted = {
            trial_id: ms
            for trial_id, by_model in store.trial_predictions(session_id).items()
            if positive_finite(ms := by_model.get(name))
        }
    else:
        predicted = _refit(store, record, name, seed)
    return ModelPredictions(session_id, name, source, predicted)


def _refit(store: Store, record: Any, name: str, seed: int) -> dict[int, float]:
    from tunelab.core.search.space.factory import space_for_task

    trials = [t for t in store.trials(record.id) if t.ok and positive_finite(t.latency_ms)]
    predicted: dict[int, float] = {}
    for task in store.tasks(record.id):
        mine = [t for t in trials if t.task_id in (task.id, None)]
        if len(mine) < 2:
            continue
        space = space_for_task(record, task)
        oos = predict_in_time_order(
            name,
            np.asarray(space.features([t.config for t in mine]), dtype=np.float64),
            np.array([t.latency_ms for t in mine], dtype=np.float64),
            np.array([t.round for t in mine]),
            seed=seed,
            space=space,
            profile=store.machine_profile(space.target.kind),
        )
        for t, ms in zip(mine, oos.predicted_ms.tolist(), strict=True):
            if positive_finite(ms):
                predicted[t.id] = ms
    return predicted

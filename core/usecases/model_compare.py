"""Would another cost model have ranked these schedules better? Each registered model (tunelab.core.search.models)
refit on a session's own trials in time order and judged out of sample.

For every round r of a task (a batch its tuner proposed), each model is trained on the task's successful
trials of the rounds before r and predicts round r's trials, as it would have in the session. Per model and
per shape the report gives: the rank correlation of those predictions with the measurements (Spearman,
pooled over all predicted rounds, and the mean of the rounds' own), top-k recall (k = the session's
batch: of the k fastest trials it predicted, how many it put among its k fastest predictions), the residual
(log of predicted over measured: its mean says "too fast" or "too slow", its spread how far off), and the
time spent training and predicting. Rounds before the model has ``min_samples`` trials are skipped.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.core.search.costmodel import spearman, topk_recall
from tunelab.core.search.models import COST_MODEL_WORDS, cost_model_names, make_cost_model
from tunelab.core.search.out_of_sample import predict_in_time_order
from tunelab.core.trust.bias_stats import group_stats

# What the app's Cost model view shows beside the comparison, from the same modules.
__all__ = [
    "COST_MODEL_WORDS",
    "ModelScore",
    "compare_models",
    "cost_model_names",
    "group_stats",
    "spearman",
]

if TYPE_CHECKING:
    from tunelab.core.store import Store


@dataclass(frozen=True)
class ModelScore:
    session_id: int
    shape: dict[str, int]
    model: str
    rounds: int  # rounds predicted out of sample
    predictions: int
    spearman: float | None  # pooled over every predicted trial
    spearman_round_mean: float | None
    topk_recall: float | None  # of the batch-many fastest predicted trials, the share the model ranked so
    bias: float | None  # exp(mean log(pred / measured)) - 1: +0.10 means it predicts 10 % too slow
    spread: float | None  # standard deviation of log(pred / measured)
    train_s: float
    predict_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def sentence(self) -> str:
        if not self.predictions:
            return f"{self.model}: too few trials to predict any round out of sample"
        rho = "n/a" if self.spearman is None else f"{self.spearman:.2f}"
        recall = "n/a" if self.topk_recall is None else f"{self.topk_recall:.0%}"
        if self.bias is None:
            lean = ""
        else:
            lean = f", {abs(self.bias):.0%} too {'slow' if self.bias > 0 else 'fast'} on the median trial"
        return (
            f"{self.model}: rank correlation {rho} over {self.predictions} trials in {self.rounds} rounds, "
            f"top-k recall {recall}{lean} (spread {self.spread:.2f} in log), "
            f"trained in {self.train_s:.2f} s, predicted in {self.predict_s:.2f} s"
        )


def compare_models(
    store: Store, session_ids: list[int], models: list[str] | None = None, *, seed: int = 0
) -> list[ModelScore]:
    """Every model of ``models`` (default: all registered) on each task of each session, out of sample."""
    from tunelab.core.search.space.factory import space_for_task

    names = models or cost_model_names()
    for name in names:
        make_cost_model(name)  # an unknown name: one TunelabError listing the models, before any work
    scores = []
    for sid in session_ids:
        record = store.session(sid)  # an unknown session: the store's one-line error
        trials = [t for t in store.trials(sid) if t.ok and t.latency_ms]
        tasks = store.tasks(sid)
        if not trials:
            raise TunelabError(f"session {sid} has no successful trial to compare cost models on")
        for task in tasks:
            mine = [t for t in trials if t.task_id in (task.id, None)]
            if not mine:
                continue
            space = space_for_task(record, task)
            X = np.asarray(space.features([t.config for t in mine]), dtype=np.float64)
            latency = np.array([t.latency_ms for t in mine], dtype=np.float64)
            rounds = np.array([t.round for t in mine])
            profile = store.machine_profile(space.target.kind)  # the roofline's peak, where measured
            for name in names:
                scores.append(
                    _score(name, sid, task.shape, X, latency, rounds, record.batch, seed, space, profile)
                )
    return scores


def _score(
    name: str,
    sid: int,
    shape: dict[str, int],
    X: np.ndarray,
    latency: np.ndarray,
    rounds: np.ndarray,
    batch: int,
    seed: int,
    space: Any = None,
    profile: Any = None,
) -> ModelScore:
    oos = predict_in_time_order(name, X, latency, rounds, seed=seed, space=space, profile=profile)
    predicted_all = oos.predicted_ms[oos.predicted].tolist()
    measured_all = latency[oos.predicted].tolist()
    logs = [math.log(p / m) for p, m in zip(predicted_all, measured_all, strict=True) if p > 0 and m > 0]
    return ModelScore(
        session_id=sid,
        shape=shape,
        model=name,
        rounds=oos.rounds,
        predictions=len(predicted_all),
        spearman=spearman(predicted_all, measured_all) if predicted_all else None,
        spearman_round_mean=statistics.fmean(oos.round_spearman) if oos.round_spearman else None,
        topk_recall=topk_recall(predicted_all, measured_all, batch) if len(predicted_all) > batch else None,
        bias=math.exp(statistics.median(logs)) - 1 if logs else None,
        spread=statistics.pstdev(logs) if len(logs) > 1 else None,
        train_s=oos.train_s,
        predict_s=oos.predict_s,
    )

"""One shape of a running session (a task): its space, tuner, cost models, measurer and trials so far."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from tunelab.core.records import SessionRecord, TrialRecord
from tunelab.core.search.models import make_cost_model
from tunelab.core.search.space.base import SearchSpace, config_key
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.search.tuners.base import Observation
from tunelab.core.search.tuners.registry import make_tuner

# Asks in a row that propose nothing new (no config, or only configs measured or already in the batch):
# the tuner has no more to give, and the space is spent for it.
MAX_EMPTY_ASKS = 20
# Proposals the space may reject (no legal schedule) while one batch is filled, before the batch goes out
# short (or, holding nothing, the task stops). Counted in configs, not in asks: on a GPU most configs of
# an auto space break its limits (about 98 % of uniform draws for GEMM 4096^3 fp32 on sm_90, where a
# batch of 8 takes about 450 draws, 3 s of scheduling), and twenty asks in a row without a legal config
# happened there by chance, so random search ended a 64-trial session after 12-63 trials as "spent".
# 2,000 draws hold no legal config of that space once in 10^15; the schedulability probe at the start
# refuses a space where nothing is legal.
MAX_REJECTED_PER_BATCH = 2000


class TuningTask:
    """One shape of a session with its own space, tuner, cost model and measurement workers."""

    def __init__(
        self,
        record: Any,
        space: SearchSpace,
        history: list[TrialRecord],
        multi: bool,
        session: SessionRecord,
        tuner_state: dict[str, Any] | None,
    ) -> None:
        self.record = record
        self.space = space
        self.multi = multi
        self.tuner = make_tuner(
            session.tuner, space, seed=session.seed + record.index, **session.tuner_options
        )
        # The session's own model (its predictions are stored before measuring): the tuner's choice of
        # model where it has one, so the residuals shown are those of the model that steered.
        self.cost_model = make_cost_model(
            str(session.tuner_options.get("model", "xgb")), seed=session.seed, nthread=1, space=space
        )  # one thread: the CPU is busy measuring
        # Models that predict without steering (the session's shadow_models), refit with the own one.
        self.shadow_models = {
            name: make_cost_model(name, seed=session.seed, nthread=1, space=space)
            for name in session.shadow_models
        }
        self.measurer: Any = None
        self.exhausted = False
        self.spent = ""  # why the last ask_valid gave fewer configs than wanted ("": it did not)
        self.history: list[TrialRecord] = []
        self.measured: set[str] = set()
        self.best: float | None = None
        self.since_best = 0
        self.last_gain = float("inf")  # untried tasks go first
        if tuner_state:
            self.tuner.load_state_dict(tuner_state)
        for trial in history:
            self.add(trial)
        if history:
            self.tuner.tell([Observation(t.config, t.latency_ms) for t in history])
            self.fit()
            self.last_gain = 0.0

    def key(self, config: dict) -> str:
        """Unique within the session: with several shapes the same config is a different trial."""
        return f"t{self.record.index}:{config_key(config)}" if self.multi else config_key(config)

    def add(self, trial: TrialRecord) -> None:
        self.history.append(trial)
        self.measured.add(self.key(trial.config))
        if trial.ok and trial.latency_ms is not None and (self.best is None or trial.latency_ms < self.best):
            self.best, self.since_best = trial.latency_ms, 0
        else:
            self.since_best += 1

    def ask_valid(self, want: int, on_rejected: Callable[[str], None]) -> list[tuple[dict, Any]]:
        """Up to `want` new configs with their schedules. Configs the space cannot schedule are told
        to the tuner as failures and never measured; ``on_rejected`` hears why each was rejected.

        Fewer than `want` when the tuner proposes nothing, or nothing new in `MAX_EMPTY_ASKS` asks in a
        row, or when `MAX_REJECTED_PER_BATCH` of its proposals were rejected; `spent` then says which."""
        batch: list[tuple[dict, Any]] = []
        keys: set[str] = set()
        empty_asks = rejected_here = 0
        self.spent = ""
        while len(batch) < want:
            if empty_asks >= MAX_EMPTY_ASKS:
                self.spent = f"the tuner proposed nothing not yet measured in {MAX_EMPTY_ASKS} asks in a row"
                break
            if rejected_here >= MAX_REJECTED_PER_BATCH:
                self.spent = (
                    f"the space rejected {rejected_here} configs proposed for one batch before measuring"
                )
                break
            proposals = self.tuner.ask(want - len(batch))
            if not proposals:  # asked again it would search again (an evolutionary search: seconds)
                self.spent = f"the tuner had no config left to propose (the space holds {self.space.size:,})"
                break
            fresh: dict[str, dict] = {}  # by key: a config proposed twice in one ask counts once
            for config in proposals:
                key = self.key(config)
                if key not in self.measured and key not in keys:
                    fresh.setdefault(key, config)
            if not fresh:
                empty_asks += 1
                continue
            empty_asks = 0
            rejected = []
            for key, config in fresh.items():
                try:
                    schedule = self.space.schedule(config)
                except InvalidSchedule as exc:
                    on_rejected(f"InvalidSchedule: {exc}")
                    rejected.append(Observation(config, None))
                    continue
                keys.add(key)
                batch.append((config, schedule))
            rejected_here += len(rejected)
            if rejected:
                self.tuner.tell(rejected)
        return batch

    def tell(self, trials: list[TrialRecord], best_before: float | None) -> None:
        self.tuner.tell([Observation(t.config, t.latency_ms) for t in trials])
        self.fit()
        if best_before is None:
            self.last_gain = 1.0 if self.best is not None else 0.0
        elif self.best is not None:
            self.last_gain = (best_before - self.best) / best_before

    def priority(self) -> tuple[float, int]:
        return (-self.last_gain, len(self.history))

    def fit(self) -> None:
        """Refit the session's cost model (the one whose predictions are stored) and its shadow models on
        the task's trials, and on a warm start's earlier trials, from the first batch on."""
        ok = [t for t in self.history if t.ok and t.latency_ms]
        features = None
        for model in (self.cost_model, *self.shadow_models.values()):
            if len(ok) >= model.min_samples or (model.n_prior and ok):
                if features is None:
                    features = self.space.features([t.config for t in ok])
                model.fit(features, np.array([t.latency_ms for t in ok]))
            elif model.n_prior:
                model.fit(np.zeros((0, 0)), np.zeros(0))  # the prior alone

    def shadow_predict(self, features: np.ndarray) -> dict[str, np.ndarray]:
        """The trained shadow models' predictions of these candidates (ms), by model."""
        out = {}
        for name, model in self.shadow_models.items():
            predicted = model.predict(features) if model.trained else None
            if predicted is not None:
                out[name] = predicted
        return out

    def close(self) -> None:
        if self.measurer is not None:
            self.measurer.close()
        self.tuner.close()


def tuner_state(tasks: list[TuningTask], multi: bool) -> dict[str, Any]:
    """The tuners' state as the store keeps it (JSON): by task index with several shapes."""
    if multi:
        return {str(t.record.index): _jsonable(t.tuner.state_dict()) for t in tasks}
    return _jsonable(tasks[0].tuner.state_dict())


def _jsonable(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))

"""Policy-gradient agents proposing configs that a cost model filters (the idea of Chameleon, ICLR 2020;
the tutorial's RL tuner with its `num_agents`), over a template space's knobs or an auto space's sketch
decisions.

Each of `num_agents` agents is a softmax policy per knob, learnt by REINFORCE with a baseline, in NumPy:
the policies are a few hundred numbers, so a deep-learning library would add a large dependency for
nothing. A policy's logits are its candidates' feature rows times its weights (`policy`,
candidate_features): ``table``, a weight per candidate; ``factors``, one more per tile factor, shared by
every split candidate that holds it (a conv's split knobs have 80 candidates each). Each ask:

1. every agent samples its share of a `pool_size` pool of unmeasured configs from its policy;
2. once the cost model (the xgb tuner's XGBoost model, pairwise-ranking loss) has enough measurements,
   it predicts the pool; each agent takes one policy-gradient step on those predictions (a reward nothing
   had to be measured for), and the predicted-fastest configs are proposed, with an `epsilon` share of
   random ones so the model keeps seeing the rest of the space. Before that, the agents' samples are
   proposed as drawn (their policies start uniform: a random search);
3. when a proposed config is measured, the agent that proposed it takes a step on the measured reward.

Rewards are standardised log latencies (-(log t - mean) / std over the measured configs; a failure
counts as 2 standard deviations slow); each agent's baseline is a running mean of its rewards.

An auto space's knobs are its sketch and each sketch's sampling decisions (tile sizes, unroll steps,
tunelab.core.search.tuners.knobs.SketchCodec): a policy picks the sketch, then that sketch's decisions;
a step moves only the knobs a sample used (another sketch's decisions had no part in its reward). The
sketch's policy settles within a few batches, on whichever sketch the model liked first (in real 256-trial
conv sessions: 243 and 248 of 256 trials in one sketch, not the fastest one). So with ``per_sketch`` each
agent also draws from its policy with the sketch set, for every sketch its own samples hold few of (a
draw whose sketch was set moves only the decisions' policies), and the batch's model-picked slots are
shared among the sketches as xgb shares them (tunelab.core.search.tuners.sketch_slots).

Resume: the logits and baselines are state; measurements told after a restore only feed the cost model
(no agent proposed them in this process), so a resumed tuner's agents are those that were saved.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from tunelab.core.errors import TunerError, shown
from tunelab.core.records import Config
from tunelab.core.search.costmodel import CostModel
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.knobs import UNUSED, Knob, SketchCodec, index_codec
from tunelab.core.search.tuners.random_search import AnyOf, SeenSet, draw_unseen
from tunelab.core.search.tuners.registry import resolve_options
from tunelab.core.search.tuners.sketch_slots import SKETCH_OPTIONS, sketch_options, sketch_picks

_LOGIT_LIMIT = 6.0  # a knob's candidates stay within e**12 of each other: no policy stops exploring
_FAILED = -2.0  # a failed trial's reward, in standard deviations
_BASELINE_DECAY = 0.9
POLICIES = ("table", "factors")  # how a policy's logits are made: candidate_features


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max())
    return e / e.sum()


def candidate_features(knob: Knob, policy: str) -> np.ndarray:
    """A knob's candidates as 0/1 feature rows, (candidates, features): a softmax's logits are the rows
    times the weights.

    ``table``: one column per candidate (the identity): each candidate's logit is its own weight.
    ``factors``: those columns, and one per (position, value) that a list candidate holds (a tile split
    [1, 32, 1, 2] has four). A split knob of a conv has 80 candidates; the agents' samples touch each a few
    times in a session, so a weight of its own learns next to nothing (a real 256-trial conv session left
    those policies at a most likely candidate of 1.2-3.2 % against a uniform 1.2 %). A weight per factor is
    shared by every split that has it, so "inner factor 16 is fast" is learnt from all of them.
    """
    n = len(knob.candidates)
    identity = np.eye(n)
    if policy != "factors" or not all(isinstance(c, list | tuple) and len(c) > 1 for c in knob.candidates):
        return identity  # a template's one-element tiles: a factor would be the candidate's weight again
    columns = sorted({(pos, repr(v)) for c in knob.candidates for pos, v in enumerate(c)})
    where = {col: j for j, col in enumerate(columns)}
    factors = np.zeros((n, len(columns)))
    for i, c in enumerate(knob.candidates):
        for pos, v in enumerate(c):
            factors[i, where[(pos, repr(v))]] = 1.0
    shared = factors[:, factors.sum(axis=0) < n]  # a factor every candidate has changes no probability
    return np.hstack([identity, shared])


class Agent:
    """Softmax policies, one per knob (logits: the knob's candidate features times weights), and the
    baseline of REINFORCE."""

    def __init__(self, features: list[np.ndarray]) -> None:
        self.features = features
        self.weights = [np.zeros(f.shape[1]) for f in features]
        # Each candidate's logit is a sum of at most this many weights: each weight is bounded so that
        # a logit stays within _LOGIT_LIMIT.
        self._limits = [_LOGIT_LIMIT / max(1.0, float(f.sum(axis=1).max())) for f in features]
        self.baseline = 0.0

    @property
    def logits(self) -> list[np.ndarray]:
        return [f @ w for f, w in zip(self.features, self.weights, strict=True)]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n index vectors, shape (n, knobs): a Gumbel-max draw per knob."""
        cols = [np.argmax(lg + rng.gumbel(size=(n, len(lg))), axis=1) for lg in self.logits]
        return np.stack(cols, axis=1) if cols else np.zeros((n, 0), dtype=int)

    def step(self, samples: np.ndarray, advantages: np.ndarray, lr: float) -> None:
        """One REINFORCE step per knob: weights += lr * mean(advantage * (phi(sample) - E_pi[phi])), phi
        the candidate's feature row, over the samples that used the knob (an UNUSED index: its
        log-probability had no part in the sample)."""
        if len(samples) == 0:
            return
        for k, (f, w) in enumerate(zip(self.features, self.weights, strict=True)):
            col = samples[:, k]
            used = col != UNUSED
            if not used.any():
                continue
            probs = _softmax(f @ w)
            counts = np.zeros(len(f))
            np.add.at(counts, col[used], advantages[used])
            grad = (counts - advantages[used].sum() * probs) @ f / len(samples)
            self.weights[k] = np.clip(w + lr * grad, -self._limits[k], self._limits[k])

    def to_json(self) -> dict[str, Any]:
        return {"weights": [w.tolist() for w in self.weights], "baseline": self.baseline}

    def load(self, state: dict[str, Any]) -> None:
        # "logits": a state saved before the policies had features (the table policy's weights)
        weights = [np.asarray(w, dtype=np.float64) for w in state.get("weights", state.get("logits", []))]
        if [len(w) for w in weights] != [len(w) for w in self.weights]:
            return  # saved for another space or policy: start afresh
        self.weights, self.baseline = weights, float(state["baseline"])


class RLTuner(Tuner):
    name = "rl"
    description = (
        "Policy-gradient agents (REINFORCE, a softmax per knob or sketch decision) propose; XGBoost picks."
    )
    default_options: ClassVar[dict[str, Any]] = {
        "num_agents": 4,
        "pool_size": 128,
        "epsilon": 0.1,
        "lr": 0.5,
        "policy": "factors",
        # Model-picked slots of a batch that each sketch other than the incumbent's gets, and the trials
        # until which they are an even share (an auto space: the module's docstring). per_sketch 0: the
        # agents' sketch policy alone decides, as before 2026-12-08.
        **SKETCH_OPTIONS,
    }

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = opts = resolve_options(type(self), options)
        self.num_agents, self.pool_size = int(opts["num_agents"]), int(opts["pool_size"])
        self.epsilon, self.lr = float(opts["epsilon"]), float(opts["lr"])
        if self.num_agents < 1:
            raise TunerError(f"rl: num_agents must be at least 1; got {self.num_agents}")
        if self.pool_size < self.num_agents:
            raise TunerError(
                f"rl: pool_size must be at least num_agents ({self.num_agents}); got {self.pool_size}"
            )
        if not 0.0 <= self.epsilon <= 1.0:
            raise TunerError(f"rl: epsilon must be in [0, 1]; got {self.epsilon}")
        if not 0.0 < self.lr <= 10.0:
            raise TunerError(f"rl: lr must be in (0, 10]; got {self.lr}")
        self.policy = str(opts["policy"])
        if self.policy not in POLICIES:
            raise TunerError(f"rl: policy must be one of {', '.join(POLICIES)}; got {shown(self.policy)}")
        self.per_sketch, self.sketch_trials = sketch_options(self.name, opts)
        self.codec = index_codec(space, self.name)
        self._make_agents()
        if self.cost_model is None:
            self.cost_model = CostModel(seed=seed, nthread=2, loss="rank")
        self._seen = SeenSet()
        self._owner: dict[str, tuple[int, list[int]]] = {}  # proposed, not told: key -> (agent, indices)
        self._measured: dict[str, tuple[float, np.ndarray]] = {}  # key -> (latency, feature row)
        self._log_ms: list[float] = []  # every successful measurement's log latency: the reward scale
        self._incumbent: tuple[float, int] | None = None  # the fastest measurement: (latency, its sketch)
        self._dirty = False

    def _make_agents(self) -> None:
        features = [candidate_features(k, self.policy) for k in self.codec.knobs]
        self.agents = [Agent(features) for _ in range(self.num_agents)]

    # ---- rewards ----------------------------------------------------------------------------------
    def _rewards(self, latency_ms: np.ndarray) -> np.ndarray:
        """Standardised rewards: higher is faster; NaN (a failure) is _FAILED."""
        if len(self._log_ms) < 2:
            return np.zeros(len(latency_ms))
        mean, std = float(np.mean(self._log_ms)), float(np.std(self._log_ms)) or 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            r = -(np.log(latency_ms) - mean) / std
        return np.where(np.isfinite(r), r, _FAILED)

    # ---- ask --------------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        if n <= 0:
            return []
        self._fit()
        pool = self._pool()  # (config, agent, indices), unmeasured and distinct
        out: list[Config] = []
        if pool and self._model_ready():
            pred = self._predict([c for c, _, _ in pool])
            if pred is not None:
                self._learn_from_model(pool, pred)
                n_exploit = math.ceil(n * (1.0 - self.epsilon))
                regions = [self.space.region(c) for c, _, _ in pool]
                incumbent = self._incumbent[1] if self._incumbent else None
                even = len(self._measured) < self.sketch_trials  # the sketches compared evenly first
                picks = sketch_picks(regions, pred, n_exploit, incumbent, self.per_sketch, even)
                pool = [pool[i] for i in picks]
            else:
                pool = pool[:n]
        for config, agent, indices in pool[:n]:
            self._owner[self.space.key(config)] = (agent, indices)
            out.append(config)
        exclude = AnyOf(self._seen, self._owner)
        out += draw_unseen(self.space, self.rng, n - len(out), exclude)
        for config in out:
            self._seen.add(self.space.key(config))
        return out

    def _pool(self) -> list[tuple[Config, int, list[int]]]:
        """The agents' samples, interleaved agent by agent so a short take is shared among them, then
        (per_sketch) each agent's draws with the sketch set: (config, agent, the indices its policies
        chose; a set sketch is UNUSED there)."""
        per_agent = max(1, self.pool_size // self.num_agents)
        drawn = [agent.sample(self.rng, per_agent) for agent in self.agents]
        pool: list[tuple[Config, int, list[int]]] = []
        taken: set[str] = set()

        def add(agent: int, row: np.ndarray, sketch_set: bool) -> None:
            indices = self.codec.used([int(i) for i in row])
            config = self.codec.decode(indices)
            key = self.space.key(config)
            if key in self._seen or key in self._owner or key in taken:
                return
            taken.add(key)
            if sketch_set:  # the policy did not choose it: its step must not move the sketch's policy
                indices = [UNUSED, *indices[1:]]
            pool.append((config, agent, indices))

        for row in range(per_agent):
            for a, samples in enumerate(drawn):
                add(a, samples[row], False)
        for a, sketch, rows in self._sketch_draws(drawn, per_agent):
            for row in rows:
                add(a, np.concatenate([[sketch], row[1:]]), True)
        return pool

    def _sketch_draws(self, drawn: list[np.ndarray], per_agent: int) -> list[tuple[int, int, np.ndarray]]:
        """(agent, sketch, its samples) to draw again with the sketch set: for each sketch an agent's own
        samples hold fewer of than an even share's half (per_sketch; an auto space of several sketches).
        A sample's knobs are drawn independently, so setting the sketch gives the policy's decisions for it."""
        if not self.per_sketch or not isinstance(self.codec, SketchCodec):
            return []
        sketches = len(self.codec.knobs[0].candidates)
        if sketches < 2:
            return []
        floor = max(1, per_agent // (2 * sketches))
        out = []
        for a, samples in enumerate(drawn):
            held = np.bincount(samples[:, 0], minlength=sketches)
            for sketch in range(sketches):
                if held[sketch] < floor:
                    out.append((a, sketch, self.agents[a].sample(self.rng, floor - int(held[sketch]))))
        return out

    def _learn_from_model(self, pool: list[tuple[Config, int, list[int]]], pred: np.ndarray) -> None:
        """Each agent's step on its own samples' predicted rewards (baseline: their mean)."""
        rewards = self._rewards(np.asarray(pred, dtype=np.float64))
        for a, agent in enumerate(self.agents):
            mine = [i for i, (_, owner, _) in enumerate(pool) if owner == a]
            if len(mine) < 2:
                continue
            r = rewards[mine]
            agent.step(np.array([pool[i][2] for i in mine]), r - r.mean(), self.lr * 0.5)

    # ---- tell -------------------------------------------------------------------------------------
    def tell(self, observations: list[Observation]) -> None:
        ok: list[tuple[Config, float]] = []
        by_agent: dict[int, list[tuple[list[int], float]]] = {}
        for obs in observations:
            key = self.space.key(obs.config)
            self._seen.add(key)
            lat = obs.latency_ms
            good = lat is not None and math.isfinite(lat) and lat > 0
            if good:
                ok.append((obs.config, float(lat)))  # type: ignore[arg-type]
                self._log_ms.append(math.log(lat))  # type: ignore[arg-type]
                if self._incumbent is None or lat < self._incumbent[0]:  # type: ignore[operator]
                    self._incumbent = (float(lat), self.space.region(obs.config))  # type: ignore[arg-type]
            owner = self._owner.pop(key, None)
            if owner is not None:
                by_agent.setdefault(owner[0], []).append((owner[1], float(lat) if good else math.nan))  # type: ignore[arg-type]
        if ok:
            rows = _features(self.space, [c for c, _ in ok])
            for (config, lat), row in zip(ok, rows, strict=True):
                if row is not None:
                    self._measured[self.space.key(config)] = (lat, row)
            self._dirty = True
        for a, items in sorted(by_agent.items()):
            agent = self.agents[a]
            r = self._rewards(np.array([lat for _, lat in items]))
            agent.step(np.array([ind for ind, _ in items]), r - agent.baseline, self.lr)
            for x in r:
                agent.baseline = _BASELINE_DECAY * agent.baseline + (1 - _BASELINE_DECAY) * float(x)

    # ---- the cost model ---------------------------------------------------------------------------
    def _model_ready(self) -> bool:
        return self.cost_model.trained and len(self._measured) >= self.cost_model.min_samples

    def _fit(self) -> None:
        if self._dirty and self._measured:
            X = np.stack([row for _, row in self._measured.values()])
            self.cost_model.fit(X, np.array([lat for lat, _ in self._measured.values()]))
            self._dirty = False

    def _predict(self, configs: list[Config]) -> np.ndarray | None:
        rows = _features(self.space, configs)
        if any(r is None for r in rows):
            return None  # a config without features: propose as drawn this time
        return self.cost_model.predict(np.stack(rows))  # type: ignore[arg-type]

    # ---- resume -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "agents": [agent.to_json() for agent in self.agents]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        saved_agents = state.get("agents", [])
        if self.policy != "table" and any("logits" in saved for saved in saved_agents):
            # Saved before the policies had features, so by a table policy (the default then): a session
            # stored then resumes with the agents it learnt, not with a new default's uniform ones.
            self.policy = "table"
            self._make_agents()
        for agent, saved in zip(self.agents, saved_agents, strict=False):
            agent.load(saved)


def _features(space: SearchSpace, configs: list[Config]) -> list[np.ndarray | None]:
    """Feature rows; None for a config whose features cannot be computed."""
    if not configs:
        return []
    try:
        return list(np.asarray(space.features(configs), dtype=np.float64))
    except Exception:  # noqa: BLE001 - TVM's feature extraction fails on an odd config: retried one by one
        rows: list[np.ndarray | None] = []
        for config in configs:  # one bad config must not sink the others
            try:
                rows.append(np.asarray(space.features([config]), dtype=np.float64)[0])
            except Exception:  # noqa: BLE001 - a config whose features fail is dropped, whatever the failure
                rows.append(None)
        return rows

"""Cost-model-guided search (AutoTVM's XGBTuner, in ask/tell form).

Each ask refits the cost model on every successful measurement so far (when something new was
told), scores a pool of unmeasured candidates and proposes the predicted fastest, plus an
`epsilon` share of random configs so the model keeps seeing parts of the space it would not
pick. The pool is built in two steps, a cheap stand-in for AutoTVM's simulated-annealing walk
that keeps feature computation (about 1 ms per config on real spaces) to `pool_size` configs:

1. three quarters: short random mutation walks from the fastest measured configs, and random
   samples;
2. one quarter: single mutations of the best predicted configs of step 1 (a hill-climbing step
   on the model).

Until the model has `min_samples` successful measurements, proposals are random.

An auto space's sketches are parts of the space that no mutation leaves (``SearchSpace.region``), and
their limits differ: on the ResNet conv the best kernel of one sketch was 1.26x another's. Followed from
the fastest configs alone, the pool stays in the sketch of the first good config (99 % of the model's
picks in the incumbent's sketch, in 13 real conv sessions), whichever it is. With ``per_sketch`` k > 0
every sketch's fastest measured configs seed walks too, every sketch's predicted best is refined, and each
sketch other than the incumbent's gets k of a batch's model-picked slots (its predicted best), an even
share of them until ``sketch_trials`` are measured: the model still ranks within a sketch, and the
sketches are compared on measurements. A template space is one part, and there the options change
nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from tunelab.core.errors import TunerError, shown
from tunelab.core.records import Config
from tunelab.core.search.costmodel import LOSSES, CostModel
from tunelab.core.search.models import make_cost_model
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.random_search import AnyOf, SeenSet, draw_unseen
from tunelab.core.search.tuners.registry import resolve_options
from tunelab.core.search.tuners.sketch_slots import SKETCH_OPTIONS, sketch_options, sketch_picks

_N_PARENTS = 8  # measured configs that mutation walks start from
_MAX_WALK = 3  # mutation steps per walk
_N_REFINE = 8  # predicted-best pool configs that step 2 mutates
_SKETCH_PARENTS = 2  # with per_sketch: each sketch's fastest measured configs that walks start from too


class XGBTuner(Tuner):
    name = "xgb"
    description = "XGBoost cost model ranks a candidate pool; epsilon share of random exploration."
    # warm_start: "" (off), "auto" (earlier sessions of this workload, target and space kind in the
    # store) or session ids "3,5"; the session loop finds their trials (tunelab.core.session.warm_start)
    # and hands them to `use_prior`.
    # model: which cost model of the registry ranks the pool (tunelab.core.search.models: xgb, mlp,
    # roofline, hybrid).
    default_options: ClassVar[dict[str, Any]] = {
        "pool_size": 256,
        "epsilon": 0.2,
        "warm_start": "",
        "model": "xgb",
        # The xgb model's training loss (tunelab.core.search.costmodel.LOSSES): "reg" squared error on log
        # latency, "rank" XGBoost's rank:pairwise (AutoTVM's GBDT tuner). "rank" by measurement: on the three
        # recorded grids (10 seeds, 64 trials) its mean P was +0.08 against reg's -0.47 and its median best
        # found within 0.3 % of the optimum on each, reg's 1-19 % (BENCHMARKS.md, tests/benchmarks/test_xgb_loss.py).
        "loss": "rank",
        # Model-picked slots of a batch that each sketch other than the incumbent's gets, and the trials
        # until which they are an even share (an auto space; tunelab.core.search.tuners.sketch_slots).
        # per_sketch 0: the pool follows the fastest configs only, as before 2026-12-06.
        **SKETCH_OPTIONS,
    }

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = opts = resolve_options(type(self), options)
        self.pool_size = int(opts["pool_size"])
        self.epsilon = float(opts["epsilon"])
        if self.pool_size < 1:
            raise TunerError(f"xgb: pool_size must be at least 1; got {self.pool_size}")
        if not 0.0 <= self.epsilon <= 1.0:
            raise TunerError(f"xgb: epsilon must be in [0, 1]; got {self.epsilon}")
        self.per_sketch, self.sketch_trials = sketch_options(self.name, opts)
        self.warm_start = str(opts["warm_start"]).strip()
        self.loss = str(opts["loss"])
        if self.loss not in LOSSES:
            raise TunerError(f"xgb: loss must be one of {', '.join(LOSSES)}; got {shown(self.loss)}")
        if self.cost_model is None:
            self.cost_model = make_cost_model(str(opts["model"]), seed=seed, nthread=2, space=space)
        if type(self.cost_model) is not CostModel:
            # The loss is the xgb model's alone: the default does not apply to another model (stored
            # options carry it, so `--tuner-option model=mlp` must work as it did); another value is an error.
            if self.loss != type(self).default_options["loss"]:
                raise TunerError(
                    f"xgb: loss {self.loss!r} trains the xgb model; model {opts['model']!r} has no loss"
                )
        elif self.loss != "reg":
            self.cost_model.loss = self.loss
        self.warm_start_sessions: list[int] = []  # the sessions use_prior's trials came from
        self._seen = SeenSet()
        # Successful measurements: key -> (config, latency_ms, feature row).
        self._measured: dict[str, tuple[Config, float, np.ndarray]] = {}
        self._dirty = False

    def tell(self, observations: list[Observation]) -> None:
        ok: list[tuple[Config, float]] = []  # (config, latency) of the trials that ran
        for obs in observations:
            key = self.space.key(obs.config)
            self._seen.add(key)
            lat = obs.latency_ms
            if lat is not None and np.isfinite(lat) and lat > 0:
                ok.append((obs.config, float(lat)))
        # Features only for successful trials: the model never trains on failures, and a config
        # that failed to build may not even yield features.
        if ok:
            rows = self._features([config for config, _ in ok])
            for (config, latency_ms), row in zip(ok, rows, strict=True):
                if row is not None:
                    self._measured[self.space.key(config)] = (config, latency_ms, row)
            self._dirty = True

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.warm_start_sessions:  # what `tunelab show` says the cost model started from
            state["warm_start_sessions"] = list(self.warm_start_sessions)
        return state

    def use_prior(
        self,
        X: np.ndarray,
        ms_per_gflop: np.ndarray,
        *,
        gflop: float,
        weight: float,
        sessions: Sequence[int] = (),
    ) -> None:
        """Start the cost model from earlier sessions' trials (CostModel.set_prior), those of
        ``sessions``: the first batch is already picked by the model, not at random."""
        self.cost_model.set_prior(X, ms_per_gflop, gflop=gflop, weight=weight)
        self.warm_start_sessions = list(sessions)
        self._dirty = True

    def ask(self, n: int) -> list[Config]:
        if n <= 0:
            return []
        if self._dirty and (self._measured or self.cost_model.n_prior):
            rows = [row for _, _, row in self._measured.values()]
            X = np.stack(rows) if rows else np.zeros((0, 0))  # only the prior so far
            y = np.array([lat for _, lat, _ in self._measured.values()])
            self.cost_model.fit(X, y)
            self._dirty = False
        out: list[Config] = []
        if self.cost_model.trained and (
            len(self._measured) >= self.cost_model.min_samples or self.cost_model.n_prior
        ):
            n_exploit = math.ceil(n * (1.0 - self.epsilon))
            out = self._best_predicted(n_exploit)
        out_keys = {self.space.key(c) for c in out}
        out += draw_unseen(self.space, self.rng, n - len(out), AnyOf(self._seen, out_keys))
        for config in out:
            self._seen.add(self.space.key(config))
        return out

    def _best_predicted(self, n: int) -> list[Config]:
        if n <= 0:
            return []
        pool: dict[str, Config] = {}
        exclude = AnyOf(self._seen, pool)

        def add(config: Config) -> None:
            key = self.space.key(config)
            if key not in exclude:
                pool[key] = config

        # Step 1: mutation walks from the fastest measured configs, then random samples.
        first = max(1, self.pool_size * 3 // 4)
        ranked = sorted(self._measured.values(), key=lambda m: m[1])
        parents = ranked[:_N_PARENTS]
        if self.per_sketch:
            parents += self._sketch_leaders(ranked, skip=len(parents))
        # Half of step 1 is walks (duplicates are dropped, not retried); a warm start's first ask has
        # no measured parents yet, so its pool is all random samples.
        for _ in range(first if parents else 0):
            if len(pool) >= first // 2:
                break
            config = parents[int(self.rng.integers(len(parents)))][0]
            for _ in range(int(self.rng.integers(1, _MAX_WALK + 1))):
                config = self.space.mutate(config, self.rng)
            add(config)
        for config in draw_unseen(self.space, self.rng, first - len(pool), exclude):
            pool[self.space.key(config)] = config
        configs, pred = self._predict(list(pool.values()))

        # Step 2: one mutation of the predicted best of step 1.
        second: list[Config] = []
        if len(configs):
            order = np.argsort(pred, kind="stable")
            best = [configs[i] for i in order[:_N_REFINE]]
            if self.per_sketch:  # and each other sketch's predicted best
                regions = {self.space.region(c) for c in best}
                for i in order[_N_REFINE:]:
                    if self.space.region(configs[i]) not in regions:
                        regions.add(self.space.region(configs[i]))
                        best.append(configs[i])
            for _ in range(2 * (self.pool_size - first)):
                if len(second) >= self.pool_size - first:
                    break
                child = self.space.mutate(best[int(self.rng.integers(len(best)))], self.rng)
                key = self.space.key(child)
                if key not in exclude:
                    pool[key] = child
                    second.append(child)
        configs2, pred2 = self._predict(second)
        configs += configs2
        pred = np.concatenate([pred, pred2])
        incumbent = self.space.region(ranked[0][0]) if ranked else None
        return [configs[i] for i in self._picks(configs, pred, n, incumbent)]

    def _sketch_leaders(self, ranked: list[tuple[Config, float, np.ndarray]], skip: int) -> list[Any]:
        """Each sketch's fastest measured configs (up to _SKETCH_PARENTS) not among ``ranked[:skip]``."""
        counts: dict[int, int] = {}
        leaders = []
        for i, m in enumerate(ranked):
            region = self.space.region(m[0])
            if counts.get(region, 0) < _SKETCH_PARENTS:
                counts[region] = counts.get(region, 0) + 1
                if i >= skip:
                    leaders.append(m)
        return leaders

    def _picks(self, configs: list[Config], pred: np.ndarray, n: int, incumbent: int | None) -> list[int]:
        """Indices of the ``n`` configs to propose (sketch_slots.sketch_picks)."""
        regions = [self.space.region(c) for c in configs]
        even = len(self._measured) < self.sketch_trials  # the sketches compared evenly first
        return sketch_picks(regions, pred, n, incumbent, self.per_sketch, even)

    def _predict(self, configs: list[Config]) -> tuple[list[Config], np.ndarray]:
        rows = self._features(configs)
        kept = [(c, r) for c, r in zip(configs, rows, strict=True) if r is not None]
        if not kept:
            return [], np.zeros(0)
        pred = self.cost_model.predict(np.stack([r for _, r in kept]))
        assert pred is not None  # only called once the model is trained
        return [c for c, _ in kept], pred

    def _features(self, configs: list[Config]) -> list[np.ndarray | None]:
        """Feature rows; None for a config whose features cannot be computed."""
        if not configs:
            return []
        try:
            return list(np.asarray(self.space.features(configs), dtype=np.float64))
        except Exception:  # noqa: BLE001 - TVM's feature extraction fails on an odd config: retried one by one
            # One bad config must not sink the batch: retry one by one and drop the failures.
            rows: list[np.ndarray | None] = []
            for config in configs:
                try:
                    rows.append(np.asarray(self.space.features([config]), dtype=np.float64)[0])
                except Exception:  # noqa: BLE001 - a config whose features fail is dropped, whatever the failure
                    rows.append(None)
            return rows

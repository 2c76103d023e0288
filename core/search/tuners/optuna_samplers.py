"""Optuna's samplers (TPE, CMA-ES, Gaussian process) driving a template space's knobs by ask/tell.

Each knob is one Optuna parameter: the index of its candidate, an integer for ordered candidates
(tile sizes, unroll steps) and a categorical for the rest (loop orders). CMA-ES takes integers only
(Optuna samples categoricals for it at random), so there every knob is an integer. The objective is
log(latency): the samplers see ratios, not milliseconds. A failed trial is told as FAIL.

Nothing is measured twice: a config the sampler proposes again is told at once (its recorded value,
or FAIL while its first proposal is still out) and the sampler is asked again; after a few such
repeats per config a random unmeasured config is enqueued instead, so a nearly exhausted space is
still finished exactly.

Resume: the study lives in memory. `state_dict` keeps its trials (the knob indices, the value, the
sampler's own attributes: CMA-ES keeps its optimizer there; only the newest copy is kept) and
`load_state_dict` rebuilds it. Each ask makes a new sampler seeded by (seed, trials so far), so a
rebuilt study proposes what the original would have.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from tunelab.core.errors import TunerError
from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.knobs import KnobCodec, template_knobs
from tunelab.core.search.tuners.random_search import AnyOf, draw_unseen
from tunelab.core.search.tuners.registry import resolve_options

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler

# Optuna logs every finished trial at INFO; a session tells hundreds.
optuna.logging.set_verbosity(optuna.logging.WARNING)

_REPEATS = 4  # sampler proposals per wanted config that may be repeats before a random one is taken
_STATE = {"C": TrialState.COMPLETE, "F": TrialState.FAIL}


def _param(i: int) -> str:
    return f"k{i}"  # knob order, not names: a knob named like Optuna's own attributes is harmless


class OptunaTuner(Tuner):
    """The shared ask/tell plumbing; subclasses say which sampler."""

    integer_only: ClassVar[bool] = False

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = resolve_options(type(self), options)
        self.check_options()
        self.codec = KnobCodec(template_knobs(space, self.name))
        self.distributions: dict[str, BaseDistribution] = {
            _param(i): self._distribution(len(k.candidates), k.ordered)
            for i, k in enumerate(self.codec.knobs)
        }
        self.study = optuna.create_study(direction="minimize")
        self._in_study: set[str] = set()  # keys of configs the study has a finished trial of
        self._told: dict[str, float | None] = {}  # key -> latency (None: failed)
        self._out: dict[str, list[int]] = {}  # key -> numbers of the running trials proposing it

    # ---- subclass hooks ---------------------------------------------------------------------------
    def check_options(self) -> None:
        """TunerError for an option value out of range."""

    def make_sampler(self, seed: int) -> BaseSampler:
        raise NotImplementedError

    # ---- Optuna plumbing --------------------------------------------------------------------------
    def _distribution(self, n: int, ordered: bool) -> BaseDistribution:
        if ordered or self.integer_only:
            return IntDistribution(0, n - 1)
        return CategoricalDistribution(list(range(n)))

    def _params(self, indices: list[int]) -> dict[str, int]:
        return {_param(i): int(x) for i, x in enumerate(indices)}

    def _config(self, params: dict[str, Any]) -> Config:
        return self.codec.decode([int(params[_param(i)]) for i in range(len(self.codec.knobs))])

    @staticmethod
    def _value(latency_ms: float | None) -> float | None:
        ok = latency_ms is not None and math.isfinite(latency_ms) and latency_ms > 0
        return math.log(latency_ms) if ok else None  # type: ignore[arg-type]

    def _finish(self, number: int, value: float | None) -> None:
        if value is None:
            self.study.tell(number, state=TrialState.FAIL)
        else:
            self.study.tell(number, value)

    def _fresh_sampler(self) -> None:
        # Seeded by what the study holds, so a study rebuilt on resume samples as the original did.
        seed = int(np.random.SeedSequence([self.seed, len(self.study.trials)]).generate_state(1)[0])
        self.study.sampler = self.make_sampler(seed)

    # ---- ask / tell -------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        if n <= 0:
            return []
        self._fresh_sampler()
        out: list[Config] = []
        repeats = 0
        with warnings.catch_warnings():
            # Experimental-feature and "falls back to independent sampling" notices, once per sampler.
            warnings.simplefilter("ignore")
            while len(out) < n and repeats < _REPEATS * n:
                trial = self.study.ask(self.distributions)
                config = self._config(trial.params)
                key = self.space.key(config)
                if key in self._told or key in self._out:
                    repeats += 1
                    self._finish(trial.number, self._value(self._told.get(key)))
                    continue
                self._out[key] = [trial.number]
                out.append(config)
            out += self._enqueue_random(n - len(out), out)
        return out

    def _enqueue_random(self, n: int, taken: list[Config]) -> list[Config]:
        """Random unmeasured configs, proposed through the study so the sampler learns from them."""
        exclude = AnyOf(self._told, self._out, {self.space.key(c) for c in taken})
        out = []
        for config in draw_unseen(self.space, self.rng, n, exclude):
            indices = self.codec.encode(config)
            assert indices is not None  # drawn from the space
            self.study.enqueue_trial(self._params(indices))
            trial = self.study.ask(self.distributions)
            self._out[self.space.key(config)] = [trial.number]
            out.append(config)
        return out

    def tell(self, observations: list[Observation]) -> None:
        for obs in observations:
            key = self.space.key(obs.config)
            self._told[key] = obs.latency_ms
            value = self._value(obs.latency_ms)
            numbers = self._out.pop(key, [])
            for number in numbers:
                self._finish(number, value)
            if not numbers and key not in self._in_study:
                self._add_foreign(obs.config, value)
            self._in_study.add(key)

    def _add_foreign(self, config: Config, value: float | None) -> None:
        """A measured config the study never proposed (another session's, or a resumed session's)."""
        indices = self.codec.encode(config)
        if indices is None:
            return  # not a point of this space any more: nothing to learn from it
        self.study.add_trial(
            optuna.trial.create_trial(
                params=self._params(indices),
                distributions=self.distributions,
                value=value,
                state=TrialState.COMPLETE if value is not None else TrialState.FAIL,
            )
        )

    # ---- resume -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        trials = self.study.get_trials(deepcopy=False, states=tuple(_STATE.values()))
        # A sampler reads its optimizer back from the newest *completed* trial that has one.
        newest_with_attr: dict[str, int] = {}
        for t in trials:
            for attr in t.system_attrs if t.state == TrialState.COMPLETE else ():
                newest_with_attr[_attr_group(attr)] = t.number
        rows = []
        for t in trials:
            attrs = {
                a: v
                for a, v in t.system_attrs.items()
                if not _bulky(a) or newest_with_attr.get(_attr_group(a)) == t.number
            }
            indices = [int(t.params[_param(i)]) for i in range(len(self.codec.knobs))]
            state = "C" if t.state == TrialState.COMPLETE else "F"
            rows.append([indices, t.value, state, attrs])
        return {**super().state_dict(), "trials": rows}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        for indices, value, kind, attrs in state.get("trials", []):
            params = self._params(indices)
            self.study.add_trial(
                optuna.trial.create_trial(
                    params=params,
                    distributions=self.distributions,
                    value=value if kind == "C" else None,
                    state=_STATE[kind],
                    system_attrs=dict(attrs),
                )
            )
            self._in_study.add(self.space.key(self._config(params)))


def _bulky(attr: str) -> bool:
    """A sampler attribute holding a whole optimizer (CMA-ES's pickled state, in numbered chunks):
    only the newest is ever read back, so only the newest is kept."""
    return attr.split(":")[-1].isdigit()


def _attr_group(attr: str) -> str:
    return attr.rsplit(":", 1)[0] if _bulky(attr) else attr


class TPETuner(OptunaTuner):
    name = "tpe"
    description = (
        "Optuna's TPE sampler (Bayesian, tree-structured Parzen estimators) over the template knobs."
    )
    default_options: ClassVar[dict[str, Any]] = {"n_startup_trials": 16, "multivariate": True}

    def check_options(self) -> None:
        if int(self.options["n_startup_trials"]) < 0:
            raise TunerError("tpe: n_startup_trials must be 0 or more")

    def make_sampler(self, seed: int) -> BaseSampler:
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=int(self.options["n_startup_trials"]),
            multivariate=bool(self.options["multivariate"]),
            constant_liar=True,  # a batch of proposals not yet measured: spread them out
        )


class CmaEsTuner(OptunaTuner):
    name = "cmaes"
    description = "Optuna's CMA-ES sampler (an evolution strategy) over the template knobs' indices."
    default_options: ClassVar[dict[str, Any]] = {"n_startup_trials": 16, "popsize": 0}
    integer_only = True

    def check_options(self) -> None:
        if int(self.options["n_startup_trials"]) < 0:
            raise TunerError("cmaes: n_startup_trials must be 0 or more")
        if int(self.options["popsize"]) < 0 or int(self.options["popsize"]) == 1:
            raise TunerError("cmaes: popsize must be 0 (CMA-ES's own) or at least 2")

    def make_sampler(self, seed: int) -> BaseSampler:
        return optuna.samplers.CmaEsSampler(
            seed=seed,
            n_startup_trials=int(self.options["n_startup_trials"]),
            popsize=int(self.options["popsize"]) or None,
        )

"""A bandit over search policies: each batch goes to the policy (an "arm": random, genetic, xgb, ...) with
the highest upper confidence bound on its recent improvement (sliding-window UCB1).

An arm's reward for a batch it proposed is 1 when the batch improved the best latency so far, else 0 (the
gain itself, as a share of the best before, is kept in the state for the record: one early gain of 50 %
would otherwise dwarf every later one of 2 %). An arm's bound is the share of its last `window` batches
that improved the best, plus `c` * sqrt(ln(batches) / its batches): a policy that stopped finding better
configs loses the budget to the others, one that was rarely tried gets it back. Arms never tried go first,
in order.

Every arm is told every measurement, whichever arm proposed it, so each learns from the whole session and
none proposes a config another already measured. `last_pick` says in words why the last batch went where
it went; `report` (a callable the session may set, e.g. its stage line) hears the same sentence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from tunelab.core.errors import TunerError, shown
from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.random_search import AnyOf, SeenSet, draw_unseen
from tunelab.core.search.tuners.registry import make_tuner, resolve_options, tuner_names


def _ok(latency_ms: float | None) -> bool:
    return latency_ms is not None and math.isfinite(latency_ms) and latency_ms > 0


class UCBTuner(Tuner):
    name = "ucb"
    description = (
        "A bandit giving each batch to the policy (random, genetic, xgb) with the best UCB on recent gains."
    )
    default_options: ClassVar[dict[str, Any]] = {"arms": "random,genetic,xgb", "c": 0.3, "window": 8}

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = opts = resolve_options(type(self), options)
        self.arm_names = [a.strip() for a in str(opts["arms"]).split(",") if a.strip()]
        self.c = float(opts["c"])
        self.window = int(opts["window"])
        self._check()
        # Each arm its own seed; the xgb arm the shared cost model when the session gives one.
        self.arms: list[Tuner] = [
            make_tuner(
                a, space, seed=seed + 1000 * (i + 1), **({"cost_model": cost_model} if a == "xgb" else {})
            )
            for i, a in enumerate(self.arm_names)
        ]
        self.pulls = [0] * len(self.arms)
        self.rewards: list[list[float]] = [[] for _ in self.arms]  # raw gains, newest last
        self.best: float | None = None
        self.last_pick = ""
        self.report: Callable[[str], None] | None = None
        self._seen = SeenSet()
        self._owner: dict[str, int] = {}  # key of a config handed out, not told yet -> its arm

    def _check(self) -> None:
        allowed = [n for n in tuner_names() if n not in ("ucb", "evolutionary")]
        if not self.arm_names:
            raise TunerError("ucb: arms must name at least one tuner, e.g. random,genetic,xgb")
        bad = [a for a in self.arm_names if a not in allowed]
        if bad:
            raise TunerError(f"ucb: arms must be tuners of {', '.join(allowed)}; got {shown(bad[0])}")
        if len(set(self.arm_names)) != len(self.arm_names):
            raise TunerError("ucb: arms must not repeat a tuner")
        if self.c < 0:
            raise TunerError(f"ucb: c must be 0 or more; got {self.c}")
        if self.window < 1:
            raise TunerError(f"ucb: window must be at least 1; got {self.window}")

    # ---- the bandit -------------------------------------------------------------------------------
    def bounds(self) -> list[float]:
        """Each arm's upper confidence bound now (inf for an arm never pulled)."""
        total = max(1, sum(self.pulls))
        out = []
        for pulls, rewards in zip(self.pulls, self.rewards, strict=True):
            if pulls == 0:
                out.append(math.inf)
                continue
            recent = rewards[-self.window :]
            mean = float(np.mean([r > 0 for r in recent])) if recent else 0.0
            out.append(mean + self.c * math.sqrt(math.log(total) / pulls))
        return out

    def _pick(self) -> int:
        bounds = self.bounds()
        arm = int(np.argmax(bounds))  # ties: the first arm in order
        name = self.arm_names[arm]
        if math.isinf(bounds[arm]):
            self.last_pick = f"ucb: batch to {name}, not tried yet"
        else:
            recent = self.rewards[arm][-self.window :]
            gains = sum(r > 0 for r in recent)
            record = (
                f"{gains} of its last {len(recent)} batches improved the best"
                if recent
                else "its one batch set the first best"
            )
            others = ", ".join(
                f"{n} {b:.2f}"
                for i, (n, b) in enumerate(zip(self.arm_names, bounds, strict=True))
                if i != arm
            )
            self.last_pick = f"ucb: batch to {name}: bound {bounds[arm]:.2f} ({record}) against {others}"
        if self.report is not None:
            self.report(self.last_pick)
        return arm

    # ---- ask / tell -------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        if n <= 0:
            return []
        order = [self._pick()]
        # An arm with nothing left (its own notion of exhausted) hands over to the others in bound order.
        order += [int(i) for i in np.argsort([-b for b in self.bounds()], kind="stable") if i != order[0]]
        out: list[Config] = []
        for arm in order:
            for config in self.arms[arm].ask(n - len(out)):
                key = self.space.key(config)
                if key in self._seen:
                    continue  # handed out by another arm and not told yet
                self._seen.add(key)
                self._owner[key] = arm
                out.append(config)
            if out:
                self.pulls[arm] += 1
                break
        if len(out) < n:
            taken = {self.space.key(c) for c in out}
            for config in draw_unseen(self.space, self.rng, n - len(out), AnyOf(self._seen, taken)):
                self._seen.add(self.space.key(config))
                out.append(config)
        return out

    def tell(self, observations: list[Observation]) -> None:
        for tuner in self.arms:
            tuner.tell(observations)
        by_arm: dict[int, list[float]] = {}  # arm -> its told configs' latencies (NaN: failed)
        for obs in observations:
            key = self.space.key(obs.config)
            self._seen.add(key)
            owner = self._owner.pop(key, None)
            lat = float(obs.latency_ms) if obs.latency_ms is not None and _ok(obs.latency_ms) else math.nan
            if owner is not None:
                by_arm.setdefault(owner, []).append(lat)
            elif not math.isnan(lat) and (self.best is None or lat < self.best):
                self.best = lat  # another session's, or a resumed one's: no arm earned it
        for arm, latencies in by_arm.items():
            ok = [lat for lat in latencies if not math.isnan(lat)]
            batch_best = min(ok) if ok else None
            if self.best is None:
                self.best = batch_best  # the first batch sets the bar: nothing to improve on yet
                continue
            improved = batch_best is not None and batch_best < self.best
            self.rewards[arm].append((self.best - batch_best) / self.best if improved else 0.0)  # type: ignore[operator]
            if improved:
                self.best = batch_best

    # ---- resume -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "pulls": list(self.pulls),
            "rewards": [list(r) for r in self.rewards],
            "arms": [arm.state_dict() for arm in self.arms],
            "last_pick": self.last_pick,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if len(state.get("pulls", [])) == len(self.arms):  # the same arms as when it was saved
            self.pulls = [int(p) for p in state["pulls"]]
            self.rewards = [[float(r) for r in rs] for rs in state["rewards"]]
            for arm, arm_state in zip(self.arms, state.get("arms", []), strict=False):
                arm.load_state_dict(arm_state)
        self.last_pick = str(state.get("last_pick", ""))

    def close(self) -> None:
        for arm in self.arms:
            arm.close()

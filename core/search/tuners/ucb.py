"""A bandit over search policies: each batch goes to the policy (an "arm": random, genetic, xgb, ...) with
the highest upper confidence bound on its recent improvement (sliding-window UCB1), or with
``split="share"`` is shared between them in proportion to their bounds.

An arm's reward for a batch it proposed is 1 when the batch improved the best latency so far, else 0 (the
gain itself, as a share of the best before, is kept in the state for the record: one early gain of 50 %
would otherwise dwarf every later one of 2 %). An arm's bound is the share of its last `window` batches
that improved the best, plus `c` * sqrt(ln(batches) / its batches): a policy that stopped finding better
configs loses the budget to the others, one that was rarely tried gets it back. Arms never tried go first,
in order.

A session of 64 trials in batches of 8 has 8 batches: with ``split="batch"`` three of them go to trying
each arm once, and the five left follow a bound that rests on one or two batches per arm. Shared, every
batch has a part for each arm (the first is split evenly), an arm's part the larger the more often it
improved, and an arm is rewarded for a batch when its part beat the best before the batch. Measured on
both auto problems at 64 trials it finds kernels as fast as ``batch`` (BENCHMARKS.md), in more time.

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
    default_options: ClassVar[dict[str, Any]] = {
        "arms": "random,genetic,xgb",
        "c": 0.3,
        "window": 8,
        "split": "batch",
    }

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = opts = resolve_options(type(self), options)
        self.arm_names = [a.strip() for a in str(opts["arms"]).split(",") if a.strip()]
        self.c = float(opts["c"])
        self.window = int(opts["window"])
        self.split = str(opts["split"])
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
        if self.split not in ("batch", "share"):
            raise TunerError(f"ucb: split must be batch or share; got {shown(self.split)}")

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
        out = self._ask_batch(n) if self.split == "batch" else self._ask_shared(n)
        if len(out) < n:
            taken = {self.space.key(c) for c in out}
            for config in draw_unseen(self.space, self.rng, n - len(out), AnyOf(self._seen, taken)):
                self._seen.add(self.space.key(config))
                out.append(config)
        return out

    def _take(self, arm: int, n: int, out: list[Config]) -> int:
        """Up to ``n`` of the arm's proposals not handed out yet, appended to ``out``; how many."""
        taken = 0
        for config in self.arms[arm].ask(n):
            key = self.space.key(config)
            if key in self._seen:
                continue  # handed out by another arm and not told yet
            self._seen.add(key)
            self._owner[key] = arm
            out.append(config)
            taken += 1
        return taken

    def _ask_batch(self, n: int) -> list[Config]:
        order = [self._pick()]
        # An arm with nothing left (its own notion of exhausted) hands over to the others in bound order.
        order += [int(i) for i in np.argsort([-b for b in self.bounds()], kind="stable") if i != order[0]]
        out: list[Config] = []
        for arm in order:
            if self._take(arm, n - len(out), out):
                self.pulls[arm] += 1
                break
        return out

    def shares(self, n: int) -> list[int]:
        """How many of a batch of ``n`` each arm gets: evenly among the arms never tried while there are
        any, else in proportion to the bounds (largest remainders; ties to the earlier arm)."""
        bounds = self.bounds()
        weights = [1.0 if math.isinf(b) else 0.0 for b in bounds]
        if not any(weights):
            weights = [max(b, 0.0) for b in bounds]
        if not any(weights):
            weights = [1.0] * len(bounds)
        quotas = [n * w / sum(weights) for w in weights]
        out = [math.floor(q) for q in quotas]
        by_remainder = sorted(range(len(quotas)), key=lambda i: (out[i] - quotas[i], i))
        for i in by_remainder[: n - sum(out)]:
            out[i] += 1
        return out

    def _ask_shared(self, n: int) -> list[Config]:
        bounds, parts = self.bounds(), self.shares(n)
        out: list[Config] = []
        got = [0] * len(self.arms)
        larger_first = sorted(range(len(self.arms)), key=lambda i: -parts[i])
        for arm in larger_first:
            if parts[arm]:
                got[arm] = self._take(arm, parts[arm], out)
        # An arm short of its part (its own notion of exhausted) leaves it to the others, larger parts first.
        for arm in larger_first:
            if len(out) < n:
                got[arm] += self._take(arm, n - len(out), out)
        for arm, k in enumerate(got):
            self.pulls[arm] += k > 0
        self.last_pick = "ucb: batch shared " + ", ".join(
            f"{name} {k}" + ("" if math.isinf(b) else f" (bound {b:.2f}: {self._record(i)})")
            for i, (name, k, b) in enumerate(zip(self.arm_names, got, bounds, strict=True))
            if k
        )
        if all(math.isinf(b) for b, k in zip(bounds, got, strict=True) if k):
            self.last_pick += ", not tried yet"
        if self.report is not None:
            self.report(self.last_pick)
        return out

    def _record(self, arm: int) -> str:
        recent = self.rewards[arm][-self.window :]
        if not recent:
            return "no batch to judge yet"
        return f"{sum(r > 0 for r in recent)} of its last {len(recent)} improved the best"

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
        # Each arm's part of the batch against the best before it (a shared batch's arms against one bar).
        bar = self.best
        for arm, latencies in by_arm.items():
            ok = [lat for lat in latencies if not math.isnan(lat)]
            batch_best = min(ok) if ok else None
            if batch_best is not None and (self.best is None or batch_best < self.best):
                self.best = batch_best
            if bar is None:
                continue  # the first batch sets the bar: nothing to improve on yet
            improved = batch_best is not None and batch_best < bar
            self.rewards[arm].append((bar - batch_best) / bar if improved else 0.0)  # type: ignore[operator]

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

"""MetaSchedule's evolutionary search (Ansor's), driven in ask/tell form.

The tuner owns a TuneContext with `EvolutionarySearch`, a MemoryDatabase and MetaSchedule's
XGBModel. `ask` is `generate_measure_candidates()`; `tell` hands the measured latencies back
through `notify_runner_results`, the cost model's `update` and the database, as `tune_tir`'s
measure callbacks would.

- Auto space: the space's own sketches (post-order-apply with the chosen rules).
- Template space: one sketch per combination of the knobs that are Python branches (loop order,
  vectorize, parallel / shared, local); MetaSchedule mutates the tile and unroll decisions.
  Proposals that leave the edited candidate lists are told back as failures, never measured.

Unlike `tune_tir`'s default, the XGBModel has no 100-sample warm-up: below 100 trials the default
model predicts random numbers and the search is blind (TVM_NOTES 2). The option `warmup_samples`
restores that warm-up; on the skinny GEMM (BENCHMARKS.md 1b) it found slower kernels.

The search's sizes are smaller than MetaSchedule's defaults (SEARCH_SIZES), one search proposes 64
configs that the session measures batch by batch (option `generation`), and a session on a local GPU
asks for the next batch (`prefetch`) while the current one is measured.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import numpy as np

from tunelab.core.errors import TunerError
from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.registry import resolve_options

_UNMEASURED = 1e10  # seconds: what MetaSchedule itself records for a failed run

# The search's sizes where an option leaves them to the target (0, or -1 for genetic_max_fail_count).
# On a CPU a search's time is its population's mutation (about half: each mutant's trace replayed with
# the postprocessors) and its cost model's ranking (a third), so it scales with population x iterations:
# 384 x 3 instead of MetaSchedule's 512 x 4 took the ResNet conv's search from 21 s to 11.5 s a
# generation on 2 cores, and its session's measuring share at 1000 trials past one half (BENCHMARKS.md,
# "Overhead"; it was 16 % with MetaSchedule's sizes and a search per batch of 16). On CUDA about 95 % of random and of
# mutated configs fail VerifyGPUCode, and MetaSchedule redraws until it has its minimum of legal ones:
# with its defaults one batch's search took 30-45 s on the H200's 16 cores (issue 29) and 47-94 s on 2
# cores here (BENCHMARKS.md, "The search alone on a CUDA target"). Its first population then needs only
# a few legal random configs (apache/tvm#10163's non-strict minimum), its evolution a smaller population,
# and a mutant that fails twice gives way to its parent.
SEARCH_SIZES: dict[str, dict[str, int]] = {
    "cuda": {
        "population_size": 256,
        "init_min_unmeasured": 16,
        "genetic_num_iters": 3,
        "genetic_max_fail_count": 2,
    },
    "other": {
        "population_size": 384,
        "init_min_unmeasured": 50,
        "genetic_num_iters": 3,
        "genetic_max_fail_count": 10,
    },
}
DEFAULT_GENERATION = 64  # proposals per search, as tune_tir's num_trials_per_iter

_BY_TARGET = {
    "population_size": 0,
    "init_min_unmeasured": 0,
    "genetic_num_iters": 0,
    "genetic_max_fail_count": -1,
}


def search_sizes(target_kind: str, options: dict[str, Any]) -> dict[str, int]:
    """The evolutionary search's sizes for a target: each option as given, or the target's default where
    the option leaves it to the target."""
    sizes = SEARCH_SIZES["cuda" if target_kind == "cuda" else "other"]
    return {
        name: sizes[name] if int(options[name]) == unset else int(options[name])
        for name, unset in _BY_TARGET.items()
    }


class EvolutionaryTuner(Tuner):
    name = "evolutionary"
    description = "MetaSchedule's evolutionary search guided by its XGBoost cost model (Ansor)."
    default_options: ClassVar[dict[str, Any]] = {
        # 0: by target (SEARCH_SIZES). On the skinny GEMM 16x1024x1024 at 64 trials with a search per
        # batch, 512 found the faster kernel than 256 in 5 of 6 seeds (median 1.11x, BENCHMARKS.md 1b),
        # for about 30 % more wall time: a CPU's 384 lies between.
        "population_size": 0,
        # Legal random configs the first population of each batch needs at least (0: by target);
        # MetaSchedule draws population-size configs at a time until it has them.
        "init_min_unmeasured": 0,
        # The share of the first population taken from the best measured configs.
        "init_measured_ratio": 0.2,
        "genetic_num_iters": 0,  # 0: by target
        # Retries of a mutation that gives an illegal schedule before its parent is kept (-1: by target).
        "genetic_max_fail_count": -1,
        "genetic_mutate_prob": 0.85,
        "eps_greedy": 0.05,
        # Trials before the cost model's predictions are used; below it the search ranks by random
        # numbers, as tune_tir's XGBModel does below its default 100 samples.
        "warmup_samples": 0,
        # Threads of the search (sampling, mutation, evolution) between batches, when nothing is built
        # or measured. 0: every core, as tune_tir runs it; it was about half of a conv2d session's wall
        # time on one thread. 1: the same proposals for the same seed on every run (with more, threads
        # take candidates in whatever order they finish).
        "search_threads": 0,
        # Proposals one search makes (MetaSchedule's num_trials_per_iter); the session measures them
        # batch by batch and the next search starts when they are spent. A search costs about the same
        # whatever it proposes (its population's mutation and ranking), so 64, as tune_tir proposes,
        # costs a quarter per trial of a search per batch of 16: on the ResNet conv on 2 cores that
        # search was 84 % of a session's wall time (BENCHMARKS.md). 0: 64, or the batch if larger.
        "generation": 0,
    }

    def __init__(self, space: SearchSpace, *, seed: int = 0, cost_model: Any = None, **options: Any) -> None:
        super().__init__(space, seed=seed, cost_model=cost_model, **options)
        self.options = opts = resolve_options(type(self), options)
        self.sizes = search_sizes(space.target.kind, opts)
        if self.sizes["population_size"] < 2:
            raise TunerError("evolutionary: population_size must be 0 (by target) or at least 2")
        if self.sizes["init_min_unmeasured"] < 1:
            raise TunerError("evolutionary: init_min_unmeasured must be 0 (by target) or at least 1")
        if self.sizes["genetic_num_iters"] < 1:
            raise TunerError("evolutionary: genetic_num_iters must be 0 (by target) or at least 1")
        if self.sizes["genetic_max_fail_count"] < 0:
            raise TunerError("evolutionary: genetic_max_fail_count must be -1 (by target) or at least 0")
        if not 0 <= float(opts["init_measured_ratio"]) <= 1:
            raise TunerError("evolutionary: init_measured_ratio must be from 0 to 1")
        if int(opts["generation"]) < 0:
            raise TunerError("evolutionary: generation must be 0 (64) or a number of proposals")
        if int(opts["search_threads"]) < 0:
            raise TunerError("evolutionary: search_threads must be 0 (every core) or a number of threads")
        # MetaSchedule's XGBModel ranks by np.random's global draws until its first training: drawn from
        # this state (and the caller's restored), the same seed proposes the same first candidates.
        self._np_state = np.random.RandomState(seed).get_state()
        self._ctx: Any = None
        self._generation = 0  # proposals one search makes (set when the search starts)
        self._raw: list[Any] = []  # MeasureCandidates proposed and not decoded yet (decoded as needed)
        self._raw_told = 0  # measurements the search that proposed them knew
        self._raw_prefetched = False  # proposed while a batch was measured: one batch behind by design
        self._queue: list[tuple[Config, Any]] = []  # proposals decoded, not handed out yet
        self._pending: list[
            tuple[str | None, Any]
        ] = []  # (config key or None, MeasureCandidate) proposed, not reported back yet
        self._told: dict[str, float | None] = {}
        self._out: set[str] = set()  # keys handed out by ask and not told yet
        self._proposed: set[str] = set()
        self._configs: dict[str, Config] = {}
        # The next generation, proposed in a thread while a batch is measured (prefetch); every other
        # method waits for it first, so the tuner's state is only ever touched by one thread at a time.
        self._prefetching: threading.Thread | None = None
        self._prefetch_error: BaseException | None = None

    # ---- MetaSchedule plumbing --------------------------------------------------------------------
    def _start(self, batch: int) -> None:
        from tvm.s_tir import meta_schedule as ms
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBConfig

        from tunelab.core.search.space.tvm_context import light_tune_context, threaded_feature_extractor
        from tunelab.core.target.info import cpu_core_count

        space = self.space
        mod = space.ir_module()
        generator = space.design_space_generator()
        strategy = ms.search_strategy.EvolutionarySearch(
            **self.sizes,
            init_measured_ratio=float(self.options["init_measured_ratio"]),
            genetic_mutate_prob=float(self.options["genetic_mutate_prob"]),
            eps_greedy=float(self.options["eps_greedy"]),
        )
        target = space.target.tvm_target()
        threads = int(self.options["search_threads"]) or cpu_core_count()
        self._ctx = light_tune_context(
            mod,
            target,
            space_generator=generator,
            search_strategy=strategy,
            num_threads=threads,
            seed=max(1, self.seed + 1),
        )
        spaces = self._ctx.space_generator.generate_design_space(mod)
        if not spaces:
            raise TunerError("evolutionary: the space yields no sketch MetaSchedule can evolve")
        self._db = ms.database.MemoryDatabase()
        self._workload = self._db.commit_workload(mod)
        self._model = ms.cost_model.XGBModel(
            # The search runs between batches, when nothing is built or measured: the features of the
            # generations it ranks are extracted on every core (same numbers as on one).
            extractor=threaded_feature_extractor(mod, target, cpu_core_count()),
            num_warmup_samples=int(self.options["warmup_samples"]),
            config=XGBConfig(nthread=2, seed=self.seed),
        )
        self._generation = max(batch, int(self.options["generation"]) or DEFAULT_GENERATION)
        self._ctx.pre_tuning(
            max_trials=1 << 30,
            num_trials_per_iter=self._generation,
            design_spaces=spaces,
            database=self._db,
            cost_model=self._model,
        )
        self._mod = mod
        self._seed_from_history()

    def _seed_from_history(self) -> None:
        """On resume: measured configs re-train the cost model and (auto space) refill the database
        the search draws its initial population from."""
        from tvm.s_tir import meta_schedule as ms

        done = [
            (self._configs[k], lat) for k, lat in self._told.items() if lat is not None and k in self._configs
        ]
        if not done:
            return
        cands, results = [], []
        for config, latency in done[-512:]:
            try:
                sch = self.space.schedule(config)
            except Exception:  # noqa: BLE001 - the space changed under a stored config: skip it
                continue
            cand = ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"]))
            cands.append(cand)
            results.append(ms.runner.RunnerResult([latency * 1e-3], None))
            if self.space.kind == "auto":
                self._db.commit_tuning_record(
                    ms.database.TuningRecord(
                        sch.trace, self._workload, [latency * 1e-3], self._ctx.target, cand.args_info
                    )
                )
        if cands:
            self._model.update(self._ctx, cands, results)

    def _finish_batch(self, *, everything: bool = False) -> None:
        """Report to MetaSchedule the proposals whose outcome is known: measured (told), or never to be
        measured (not decoded, a repeat); unmeasured ones as failures.

        Proposals still queued, or handed out and not told yet, stay pending: reported now they would
        reach the search's database and cost model as failures, and their measurements never would.
        (One undecodable proposal leaves the queue a config short, so every later batch is asked for
        while 15 proposals of the one before wait in the queue.) MetaSchedule's search only counts its
        results, so they may come in any grouping. ``everything``: at close, the rest as unmeasured."""
        from tvm.s_tir import meta_schedule as ms

        if everything:
            self._pending.extend((None, cand) for cand in self._raw)
            self._raw = []
        waiting = set() if everything else {self.space.key(c) for c, _ in self._queue} | self._out
        ready = [(k, c) for k, c in self._pending if k is None or k not in waiting]
        self._pending = [(k, c) for k, c in self._pending if k is not None and k in waiting]
        if not ready:
            return
        cands = [c for _, c in ready]
        results = []
        for key, cand in ready:
            latency = self._told.get(key) if key is not None else None
            if latency is None:
                results.append(ms.runner.RunnerResult(None, "not measured: failed or outside the space"))
            else:
                results.append(ms.runner.RunnerResult([latency * 1e-3], None))
                self._db.commit_tuning_record(
                    ms.database.TuningRecord(
                        cand.sch.trace, self._workload, [latency * 1e-3], self._ctx.target, cand.args_info
                    )
                )
        self._ctx.notify_runner_results(cands, results)
        self._model.update(self._ctx, cands, results)

    def _generate(self, *, prefetched: bool = False) -> bool:
        self._finish_batch()
        outside = np.random.get_state()
        np.random.set_state(self._np_state)
        try:
            cands = self._ctx.generate_measure_candidates()
        finally:
            self._np_state = np.random.get_state()
            np.random.set_state(outside)
        if cands is None:
            return False
        self._raw.extend(cands)
        self._raw_told, self._raw_prefetched = len(self._told), prefetched
        return True

    def _decode(self, n: int) -> None:
        """Decode proposals, best first, until ``n`` are queued. Only decoded ones are pending: the rest
        wait undecoded (a generation's tail costs nothing if the session ends first)."""
        while len(self._queue) < n and self._raw:
            cand = self._raw.pop(0)
            config = self.space.decode(cand.sch.trace, cand.sch.mod)  # type: ignore[attr-defined]
            key = self.space.key(config) if config is not None else None
            self._pending.append((key, cand))
            if key is not None and key not in self._proposed:
                self._proposed.add(key)
                self._queue.append((config, cand))

    def _fill(self, n: int, *, prefetched: bool = False) -> None:
        """Queue ``n`` proposals: from the last generation while it lasts, then from new ones (at most
        8 generations: the space may be spent)."""
        self._decode(n)
        tries = 0
        while len(self._queue) < n and tries < 8:
            tries += 1
            if not self._generate(prefetched=prefetched):
                break
            self._decode(n)

    def _drop_a_young_models_tail(self) -> None:
        """While fewer trials are measured than one generation holds, the cost model learns most from
        each batch: the rest of a generation it proposed before the last batch was told is dropped, and
        the next batch comes from a search that knows every measurement (the first 64 trials cost a
        search per batch, as before generations; after that one search serves four batches of 16). A
        tail proposed while the last batch was measured (a GPU's prefetch) is kept: that overlap is
        its point. The dropped proposals were never decoded nor reported: MetaSchedule only counts
        the results it is told."""
        if (
            self._raw
            and not self._raw_prefetched
            and len(self._told) < self._generation
            and len(self._told) > self._raw_told
        ):
            self._raw = []

    def _wait_for_prefetch(self) -> None:
        thread, self._prefetching = self._prefetching, None
        if thread is None:
            return
        thread.join()
        error, self._prefetch_error = self._prefetch_error, None
        if error is not None:
            raise error

    # ---- ask / tell -------------------------------------------------------------------------------
    def prefetch(self, n: int) -> None:
        """Start the next generation in a thread, with the model as it is now (the batch being measured
        is not in it yet; its configs stay pending, never reported as failures). MetaSchedule releases
        the GIL while it evolves. With one search thread the proposals are the same for the same seed
        and the same calls; the session calls this only where measuring does not use this CPU."""
        self._wait_for_prefetch()
        if n <= 0 or self._ctx is None or len(self._queue) + len(self._raw) >= n:
            return  # the last generation still holds the next batch: decoding it is quick

        def work() -> None:
            try:
                self._fill(n, prefetched=True)
            except BaseException as exc:  # noqa: BLE001 - raised again by the next call that waits for it
                self._prefetch_error = exc

        self._prefetching = threading.Thread(target=work, name="evolutionary-prefetch", daemon=True)
        self._prefetching.start()

    def ask(self, n: int) -> list[Config]:
        self._wait_for_prefetch()
        if n <= 0:
            return []
        if self._ctx is None:
            self._start(max(n, 1))
        self._drop_a_young_models_tail()
        self._fill(n)
        out, self._queue = self._queue[:n], self._queue[n:]
        self._out.update(self.space.key(c) for c, _ in out)
        return [c for c, _ in out]

    def tell(self, observations: list[Observation]) -> None:
        self._wait_for_prefetch()
        for obs in observations:
            key = self.space.key(obs.config)
            self._told[key] = obs.latency_ms
            self._out.discard(key)
            self._configs[key] = obs.config
            self._proposed.add(key)

    def state_dict(self) -> dict[str, Any]:
        # MetaSchedule's population lives in C++; on resume the told history re-seeds the database
        # and the cost model (`_seed_from_history`), which is what its search starts from.
        self._wait_for_prefetch()
        return {"proposed": sorted(self._proposed)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._wait_for_prefetch()
        self._proposed.update(state.get("proposed", []))

    def close(self) -> None:
        try:
            # A stop waits for a generation under way (seconds): MetaSchedule's state must not be torn
            # down under its threads.
            self._wait_for_prefetch()
        except Exception:  # noqa: BLE001 - closing must never mask the session's own outcome
            pass
        if self._ctx is not None:
            try:
                self._finish_batch(everything=True)
                self._ctx.post_tuning()
            except Exception:  # noqa: BLE001 - closing must never mask the session's own outcome
                pass
            self._ctx = None

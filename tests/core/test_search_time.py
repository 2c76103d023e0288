"""The time the search takes between rounds is measured per round, stored and stated by `show`.

On the H200 the search between two rounds took 30-45 s (issue 29): the budget went to proposing
candidates, not to measuring them. Each round now stores its search's seconds and its whole seconds; the
store sums them up (Store.search_time) and `tunelab show` says them. A tuner that takes a planted time to
propose and to learn shows that time as the round's search, and the measuring is never counted in it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from typing import Any

import pytest
from specs import small_spec

from tunelab.core.errors import StoreError, TunerError
from tunelab.core.records import MeasureOptions, RoundRecord, SearchTime
from tunelab.core.search.space.auto import AutoSpace
from tunelab.core.search.space.factory import make_space
from tunelab.core.search.tuners import registry
from tunelab.core.search.tuners.base import Observation
from tunelab.core.search.tuners.evolutionary import SEARCH_SIZES, EvolutionaryTuner
from tunelab.core.search.tuners.random_search import RandomTuner
from tunelab.core.session.loop import create_session, search_overlaps_measuring
from tunelab.core.store import Store
from tunelab.core.store import schema as store_schema
from tunelab.core.target.info import H200_TARGET, llvm_target, resolve_target
from tunelab.core.workloads.catalog import get_workload

ASK_S = 0.3  # planted: what the slow tuner takes to propose a batch
TELL_S = 0.2  # and to learn from it


class SlowTuner(RandomTuner):
    """Random search that takes a known time to ask and to tell (a stand-in for an expensive search)."""

    name = "slow"

    def ask(self, n: int) -> list[Any]:
        time.sleep(ASK_S)
        return super().ask(n)

    def tell(self, observations: Any) -> None:
        time.sleep(TELL_S)
        super().tell(observations)


@pytest.fixture
def slow_tuner(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(registry.TUNERS, "slow", f"{__name__}:SlowTuner")
    return "slow"


def test_each_round_stores_its_search_time_apart_from_its_measuring(store: Store, slow_tuner: str) -> None:
    session = create_session(store, small_spec(tuner=slow_tuner, trials=12, batch=4))
    trials = list(session.run())
    assert store.session(session.session_id).status == "finished"
    rounds = store.rounds(session.session_id)
    assert [r.round for r in rounds] == [0, 1, 2]
    for r in rounds:
        mine = [t for t in trials if t.round == r.round]
        assert r.search_s is not None and r.wall_s is not None
        assert r.search_s >= ASK_S + TELL_S  # the planted search is counted ...
        # ... and the measuring is not: the round's other seconds hold at least its trials' runs.
        assert r.wall_s - r.search_s >= max(t.run_s or 0.0 for t in mine)
    # Round 0 waits for the telemetry to settle (about 1.2 s) before measuring: wall time, not search.
    assert rounds[0].wall_s - rounds[0].search_s >= 1.0
    summary = store.search_time(session.session_id)
    assert summary is not None and summary.rounds == 3
    assert summary.total_s == pytest.approx(sum(r.search_s or 0 for r in rounds))
    assert summary.wall_s == pytest.approx(sum(r.wall_s or 0 for r in rounds))
    assert 0 < summary.share < 1
    assert summary.first_s == rounds[0].search_s
    assert summary.max_s == max(r.search_s or 0 for r in rounds)


def test_show_states_the_search_time(tmp_path, slow_tuner: str) -> None:
    db = tmp_path / "tunelab.sqlite"
    with Store(db) as store:
        session = create_session(store, small_spec(tuner=slow_tuner, trials=8, batch=4))
        list(session.run())
        expected = store.search_time(session.session_id)
        rounds = store.rounds(session.session_id)
    assert expected is not None

    def show(*extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tunelab", "show", "1", *extra],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TUNELAB_DB": str(db)},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    doc = json.loads(show("--json"))
    assert doc["search_time"] == expected.to_json()
    assert [(x["search_s"], x["wall_s"]) for x in doc["rounds"]] == [(r.search_s, r.wall_s) for r in rounds]
    text = show()
    line = next(x.strip() for x in text.splitlines() if x.strip().startswith("search "))
    assert line == expected.words()
    assert f"{expected.share:.0%} of" in line and "over 2 rounds" in line


def test_the_summary_of_rounds() -> None:
    def round_(i: int, search: float | None, wall: float | None) -> RoundRecord:
        return RoundRecord(1, i, 4, None, 1.0, 0.0, search_s=search, wall_s=wall)

    assert SearchTime.of_rounds([]) is None
    assert SearchTime.of_rounds([round_(0, None, None)]) is None  # stored before rounds were timed
    summary = SearchTime.of_rounds([round_(0, 6.0, 8.0), round_(1, 1.0, 4.0), round_(2, 3.0, 8.0)])
    assert summary == SearchTime(rounds=3, total_s=10.0, wall_s=20.0, median_s=3.0, max_s=6.0, first_s=6.0)
    assert summary.share == 0.5
    assert summary.words() == (
        "search 10.0 s, 50% of 20 s over 3 rounds (per round median 3.0 s, max 6.0 s; round 0 6.0 s)"
    )
    even = SearchTime.of_rounds([round_(3, 1.0, 2.0), round_(4, 2.0, 2.0)])  # a resumed session's rounds
    assert even is not None and even.median_s == 1.5 and even.first_s is None
    assert "round 0" not in even.words()


def test_a_round_with_impossible_seconds_is_refused_and_nothing_is_stored(store: Store) -> None:
    session = create_session(store, small_spec())
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(StoreError, match="search_s must be a finite number"):
            store.add_round(session.session_id, 0, 4, None, 1.0, search_s=bad, wall_s=2.0)
    assert store.rounds(session.session_id) == []


def test_an_older_store_gains_the_columns_and_keeps_its_rounds(tmp_path, monkeypatch) -> None:
    """A file written before rounds were timed opens with its rounds as they were (no timing)."""
    db = tmp_path / "old.sqlite"
    migrations = store_schema.MIGRATIONS
    before = migrations.index(store_schema._v9_round_search_time)
    monkeypatch.setattr(store_schema, "MIGRATIONS", migrations[:before])
    with Store(db) as old:
        session = create_session(old, small_spec())
        old.db.execute(
            "INSERT INTO rounds (session_id, round, n, spearman, best_ms, finished_at) "
            "VALUES (?, 0, 4, 0.5, 2.0, 1.0)",
            (session.session_id,),
        )
        old.db.conn.commit()
    monkeypatch.setattr(store_schema, "MIGRATIONS", migrations)
    with Store(db) as store:
        assert store.schema_version() == len(migrations)
        (r,) = store.rounds(session.session_id)
        assert (r.n, r.spearman, r.best_ms, r.search_s, r.wall_s) == (4, 0.5, 2.0, None, None)
        assert store.search_time(session.session_id) is None
    columns = {row[1] for row in sqlite3.connect(db).execute("PRAGMA table_info(rounds)")}
    assert {"search_s", "wall_s"} <= columns


# ---- bringing it down: the search's sizes on CUDA, and the next batch proposed while one is measured ----

H200 = H200_TARGET


def _strategy_sizes(tuner: EvolutionaryTuner) -> dict[str, int]:
    tuner._start(4)  # the TuneContext and MetaSchedule's strategy, before any generation
    strategy = tuner._ctx.search_strategy
    return {name: int(getattr(strategy, name)) for name in SEARCH_SIZES["cuda"]}


@pytest.fixture(scope="module")
def cuda_space() -> Any:
    return make_space(
        get_workload("gemm"),
        {"M": 4096, "N": 4096, "K": 4096},
        "float32",
        resolve_target(json.dumps(H200)),
        "auto",
        None,
    )


@pytest.fixture(scope="module")
def cpu_space() -> AutoSpace:
    return AutoSpace(get_workload("gemm"), {"M": 16, "N": 64, "K": 64}, "float32", llvm_target())


def test_metaschedule_gets_the_sizes_of_the_target(cuda_space, cpu_space) -> None:
    for space, expected in ((cuda_space, SEARCH_SIZES["cuda"]), (cpu_space, SEARCH_SIZES["other"])):
        tuner = EvolutionaryTuner(space, seed=0)
        try:
            assert _strategy_sizes(tuner) == expected
        finally:
            tuner.close()
    # Both smaller than MetaSchedule's own defaults: population x iterations is what a search costs.
    from tvm.s_tir import meta_schedule as ms

    default = ms.search_strategy.EvolutionarySearch()
    for sizes in SEARCH_SIZES.values():
        work = sizes["population_size"] * sizes["genetic_num_iters"]
        assert work < int(default.population_size) * int(default.genetic_num_iters)
    # An option given is what MetaSchedule gets, on any target.
    tuner = EvolutionaryTuner(cuda_space, seed=0, population_size=64, init_min_unmeasured=4)
    try:
        sizes = _strategy_sizes(tuner)
        assert (sizes["population_size"], sizes["init_min_unmeasured"]) == (64, 4)
        assert sizes["genetic_num_iters"] == SEARCH_SIZES["cuda"]["genetic_num_iters"]
    finally:
        tuner.close()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("population_size", 1),
        ("init_min_unmeasured", -2),
        ("genetic_num_iters", -1),
        ("genetic_max_fail_count", -3),
        ("init_measured_ratio", 1.5),
    ],
)
def test_impossible_search_sizes_are_refused_in_one_line(cpu_space, option, value) -> None:
    with pytest.raises(TunerError, match=f"evolutionary: {option} must be") as caught:
        EvolutionaryTuner(cpu_space, seed=0, **{option: value})
    assert "\n" not in str(caught.value)


def test_a_cuda_session_proposes_while_it_measures_and_a_cpu_session_does_not() -> None:
    gpu = resolve_target(json.dumps(H200))
    assert search_overlaps_measuring(gpu, MeasureOptions())
    assert not search_overlaps_measuring(llvm_target(), MeasureOptions())  # it would disturb the timings
    assert not search_overlaps_measuring(gpu, MeasureOptions(rpc_tracker="127.0.0.1:9190", rpc_key="k"))


def _rounds(space: AutoSpace, *, prefetch: bool, seed: int = 7) -> list[list[str]]:
    """Three batches of 4 with stand-in latencies; with ``prefetch``, each next batch is proposed while
    the one before is 'measured' (between ask and tell), as the session does on a GPU."""
    # a generation per batch (generation=4): each next batch is a search, the one prefetched
    tuner = EvolutionaryTuner(space, seed=seed, population_size=32, search_threads=1, generation=4)
    batches: list[list[str]] = []
    try:
        for index in range(3):
            configs = tuner.ask(4)
            keys = [space.key(c) for c in configs]
            batches.append(keys)
            if prefetch:
                tuner.prefetch(4)
                time.sleep(0.05)  # the 'measuring': the generation runs meanwhile
                assert tuner._prefetching is not None or len(tuner._queue) + len(tuner._raw) >= 4
            tuner.tell(
                [
                    Observation(c, 1.0 + sum(map(ord, k)) % 7 + index)
                    for c, k in zip(configs, keys, strict=True)
                ]
            )
        return batches
    finally:
        tuner.close()


def test_the_next_batch_proposed_while_measuring_repeats_for_a_seed(cpu_space) -> None:
    first, again = _rounds(cpu_space, prefetch=True), _rounds(cpu_space, prefetch=True)
    assert first == again  # one search thread: the same proposals for the same seed, prefetched or not
    keys = [k for batch in first for k in batch]
    assert len(keys) == len(set(keys)) == 12
    assert first[0] == _rounds(cpu_space, prefetch=False)[0]  # the first batch is proposed as before


def test_a_batch_being_measured_is_never_reported_as_failed_by_the_prefetch(cpu_space) -> None:
    tuner = EvolutionaryTuner(cpu_space, seed=0, population_size=32, search_threads=1, generation=4)
    try:
        configs = tuner.ask(4)
        tuner.prefetch(4)
        state = tuner.state_dict()  # waits for the generation: then one thread again
        assert tuner._prefetching is None and len(tuner._queue) + len(tuner._raw) >= 4
        measuring = {cpu_space.key(c) for c in configs}
        assert measuring <= set(state["proposed"])
        assert measuring <= {k for k, _ in tuner._pending}  # still pending: not told as failures
        assert tuner._model.data_size == 0
        tuner.tell([Observation(c, 2.0) for c in configs])
        nxt = tuner.ask(4)  # the prefetched ones; the measured batch is reported with its latencies
        assert {cpu_space.key(c) for c in nxt}.isdisjoint(measuring)
        tuner.prefetch(4)
        tuner.tell([Observation(c, 3.0) for c in nxt])  # waits for the generation under way
        assert tuner._model.data_size == 4  # the first batch, measured; none of it as a failure
        assert all(tuner._told[k] == 2.0 for k in measuring)
        tuner.prefetch(4)
    finally:
        tuner.close()  # while a generation may be under way: waits for it, raises nothing
    assert tuner._prefetching is None and tuner._ctx is None


def test_a_session_that_prefetches_stops_resumes_and_measures_nothing_twice(
    store: Store, monkeypatch
) -> None:
    """The loop's overlap, run here on the CPU (a GPU session does it; no GPU here): the next batch is
    asked for while one is measured; a stop in the middle, a resume, the budget spent exactly once."""
    from tunelab.core.search.space.base import config_key
    from tunelab.core.session import loop
    from tunelab.core.session.loop import TuningSession

    monkeypatch.setattr(loop, "search_overlaps_measuring", lambda target, options: True)
    asked: list[int] = []
    real_prefetch = EvolutionaryTuner.prefetch

    def prefetch(self: EvolutionaryTuner, n: int) -> None:
        asked.append(n)
        real_prefetch(self, n)

    monkeypatch.setattr(EvolutionaryTuner, "prefetch", prefetch)
    spec = small_spec(
        tuner="evolutionary",
        space_kind="auto",
        trials=12,
        batch=4,
        tuner_options={"population_size": 16, "search_threads": 1},
    )
    session = create_session(store, spec)
    runner = session.run()
    first = [next(runner) for _ in range(6)]  # into round 1, whose successor is being proposed
    runner.close()
    assert store.session(session.session_id).status == "cancelled"
    assert asked == [4, 4]  # while rounds 0 and 1 were measured
    rest = list(TuningSession(store, session.session_id).run())
    assert store.session(session.session_id).status == "finished"
    assert len(first) + len(rest) == 12
    keys = [config_key(t.config) for t in store.trials(session.session_id)]
    assert len(set(keys)) == 12
    # Resumed with 6 left: a batch of 4 measured while the last 2 are proposed, then none past the budget.
    assert asked == [4, 4, 2]
    assert all(r.search_s is not None for r in store.rounds(session.session_id))

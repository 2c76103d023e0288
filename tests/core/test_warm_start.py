"""Warm start (transfer learning): the cost model of a new session starts from earlier sessions' trials
of the same workload family, target and space kind, as time per GFLOP; real TVM, real SQLite."""

from __future__ import annotations

import numpy as np
import pytest
from specs import small_spec

from tunelab.core.errors import TunelabError
from tunelab.core.search.costmodel import CostModel
from tunelab.core.session.loop import create_session
from tunelab.core.session.warm_start import parse_warm_start
from tunelab.core.store import Store


def test_a_prior_alone_trains_the_model_in_this_problems_units():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(200, 3))
    ms_per_gflop = np.exp(2 * X[:, 0])  # the feature that matters, on a per-GFLOP scale
    model = CostModel(seed=0)
    model.set_prior(X, ms_per_gflop, gflop=4.0, weight=0.3)
    assert not model.trained
    model.fit(np.zeros((0, 0)), np.zeros(0))
    assert model.trained and model.n_samples == 0 and model.n_prior == 200
    probe = np.array([[0.1, 0.5, 0.5], [0.9, 0.5, 0.5]])
    predicted = model.predict(probe)
    assert predicted is not None
    # this problem does 4 GFLOP per call: the prior's ms/GFLOP times 4, and the ranking kept
    assert predicted[0] == pytest.approx(4 * np.exp(0.2), rel=0.2)
    assert predicted[1] == pytest.approx(4 * np.exp(1.8), rel=0.2)
    # own rows weigh more than the prior's: a few own measurements that disagree pull the model over
    own = np.tile(probe, (10, 1))
    model.fit(own, np.tile([40.0, 40.0], 10))
    again = model.predict(probe)
    assert again is not None and abs(np.log(again[0] / 40.0)) < abs(np.log(predicted[0] / 40.0))
    restored = CostModel.from_bytes(model.to_bytes())
    assert np.allclose(restored.predict(probe), again)


def test_bad_warm_start_text_is_one_sentence():
    assert parse_warm_start("") is None and parse_warm_start(" AUTO ") == "auto"
    assert parse_warm_start("3,#5") == (3, 5)
    for bad in ("yes", "3,,5", "0", "-1"):
        with pytest.raises(TunelabError, match="takes auto or session ids"):
            parse_warm_start(bad)


@pytest.mark.slow
def test_a_session_starts_from_earlier_shapes_and_says_which(tmp_path):
    store = Store(tmp_path / "tunelab.sqlite")
    sources = []
    for shape in ({"M": 64, "N": 64, "K": 64}, {"M": 96, "N": 32, "K": 64}):
        session = create_session(store, small_spec(tuner="xgb", shape=shape, trials=8))
        list(session.run())
        sources.append(session.session_id)
    # another workload's session is never taken
    other = create_session(
        store,
        small_spec(
            workload="dense_bias", shape={"M": 32, "N": 32, "K": 32, "relu": 1}, trials=2, tuner="random"
        ),
    )
    list(other.run())

    shape = {"M": 48, "N": 80, "K": 64}
    cold = create_session(store, small_spec(tuner="xgb", shape=shape, trials=4, seed=1))
    cold_first = [t.config for t in cold.run()]
    warm = create_session(
        store, small_spec(tuner="xgb", shape=shape, trials=4, seed=1, tuner_options={"warm_start": "auto"})
    )
    stages: list[str] = []
    warm.on_stage.append(stages.append)
    trials = list(warm.run())
    said = [s for s in stages if s.startswith("warm start")]
    # every earlier GEMM session on this target and space: the two sources and the cold one (not dense_bias)
    taken = [*sources, cold.session_id]
    n_ok = sum(1 for sid in taken for t in store.trials(sid) if t.ok)  # 20 unless a kernel failed
    assert said == [
        f"warm start: the cost model starts from {n_ok} trials of session(s) {', '.join(map(str, taken))}"
    ]
    # the first batch is the model's pick, not the cold start's random draw, and it was predicted
    assert [t.config for t in trials] != cold_first
    assert all(t.round == 0 and t.predicted_ms and t.predicted_ms > 0 for t in trials)
    assert store.tuner_state(warm.session_id)["warm_start_sessions"] == taken
    store.close()


@pytest.mark.slow
def test_named_sessions_that_cannot_teach_are_refused_before_anything_is_stored(tmp_path):
    store = Store(tmp_path / "tunelab.sqlite")
    conv = create_session(
        store,
        small_spec(
            workload="dense_bias", shape={"M": 32, "N": 32, "K": 32, "relu": 1}, trials=2, tuner="random"
        ),
    )
    list(conv.run())
    n = len(store.sessions())
    for options, words in [
        ({"warm_start": "99"}, "there is no session 99"),
        ({"warm_start": str(conv.session_id)}, f"session {conv.session_id} cannot start .* another workload"),
        ({"warm_start": "maybe"}, "takes auto or session ids"),
    ]:
        with pytest.raises(TunelabError, match=words):
            create_session(store, small_spec(tuner="xgb", tuner_options=options))
    with pytest.raises(TunelabError, match="has no option 'warm_start'"):
        create_session(store, small_spec(tuner="random", tuner_options={"warm_start": "auto"}))
    assert len(store.sessions()) == n
    store.close()


@pytest.mark.slow
def test_the_command_line_takes_warm_start_and_show_says_it(tmp_path):
    import json
    import subprocess
    import sys

    from specs import FAST_MEASURE_ARGS

    db = str(tmp_path / "cli.sqlite")

    def tune(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "tunelab", "tune", "gemm", "--trials", "4", "--batch", "4", *FAST_MEASURE_ARGS,
             *args, "--db", db],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    assert tune("--shape", "M=32,N=32,K=64", "--tuner", "xgb").returncode == 0
    proc = tune("--shape", "M=48,N=32,K=64", "--warm-start", "auto", "--json")  # xgb: the warm start's tuner
    assert proc.returncode == 0, proc.stderr
    assert "warm start: the cost model starts from 4 trials of session(s) 1" in proc.stderr
    show = subprocess.run(
        [sys.executable, "-m", "tunelab", "show", "2", "--json", "--db", db], capture_output=True, text=True
    )
    doc = json.loads(show.stdout)
    assert (
        doc["tuner"] == "xgb" and doc["warm_start_sessions"] == [1] and doc["measured_on"] == "this machine"
    )
    bad = tune("--shape", "M=48,N=32,K=64", "--warm-start", "7")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "tunelab: error: --warm-start: there is no session 7 in the store"
    ], bad.stderr

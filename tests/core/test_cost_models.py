"""The cost-model registry: every model behind one interface on real TVM schedule features, a session
steered by another model, and `tunelab models` judging them out of sample on a real session."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from cli_runs import run_tunelab
from specs import FAST_MEASURE_ARGS, small_spec

from tunelab.core.errors import TunelabError
from tunelab.core.search.models import cost_model_names, make_cost_model
from tunelab.core.search.space.factory import space_for_session
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.usecases.model_compare import compare_models

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """A real GEMM 64x64x128 session: 24 random trials in 6 rounds of 4."""
    path = tmp_path_factory.mktemp("models") / "tunelab.sqlite"
    store = Store(path)
    s = create_session(store, small_spec(shape={"M": 64, "N": 64, "K": 128}, trials=24, batch=4))
    list(s.run())
    store.close()
    return path, s.session_id


def test_every_model_keeps_the_contract_on_real_features(session):
    path, sid = session
    store = Store(path)
    trials = [t for t in store.trials(sid) if t.ok]
    X = store_features = np.asarray(
        space_for_session(store.session(sid)).features([t.config for t in trials])
    )
    latency = np.array([t.latency_ms for t in trials])
    assert set(cost_model_names()) == {"xgb", "mlp", "roofline", "hybrid"}
    # the learned models (the analytical ones answer before any data: tests/core/test_roofline_model.py)
    for name in ("xgb", "mlp"):
        model = make_cost_model(name, seed=0)
        model.fit(X[:1], latency[:1])  # too few to learn from: untrained, no prediction
        assert not model.trained and model.predict(X) is None
        model.fit(X, np.append(latency[:-1], np.nan))  # a failed trial (NaN) is left out
        assert model.trained and model.n_samples == len(X) - 1
        pred = model.predict(store_features)
        assert pred is not None and pred.shape == (len(X),) and np.all(np.isfinite(pred)) and np.all(pred > 0)
        with pytest.raises(ValueError, match="features"):
            model.predict(X[:, :-1])
        # deterministic for a seed
        again = make_cost_model(name, seed=0)
        again.fit(X, np.append(latency[:-1], np.nan))
        assert np.allclose(again.predict(X), pred)
        # a warm start's prior alone trains it, in this problem's units
        prior = make_cost_model(name, seed=0)
        prior.set_prior(X, latency / 2.0, gflop=2.0, weight=0.3)
        prior.fit(np.zeros((0, 0)), np.zeros(0))
        assert prior.trained and prior.n_prior == len(X)
        assert np.median(prior.predict(X) / latency) == pytest.approx(1.0, rel=0.5)
    with pytest.raises(
        TunelabError, match="unknown cost model 'gbdt'; cost models are xgb, mlp, roofline, hybrid"
    ):
        make_cost_model("gbdt")
    store.close()


def test_models_are_judged_out_of_sample_round_by_round(session):
    path, sid = session
    store = Store(path)
    scores = compare_models(store, [sid])
    assert [s.model for s in scores] == ["xgb", "mlp", "roofline", "hybrid"]
    ok = [t for t in store.trials(sid) if t.ok]
    for s in scores:
        assert s.session_id == sid and s.shape == {"M": 64, "N": 64, "K": 128}
        # xgb learns from 4 trials, mlp from 8: a round is predicted only from the rounds before it
        # (all 24 trials succeed unless a kernel failed; rounds with fewer than 2 successes are skipped)
        need = {"xgb": 4, "hybrid": 4, "mlp": 8, "roofline": 0}[s.model]
        rounds = [
            r for r in range(1, 6)
            if sum(t.round < r for t in ok) >= need and sum(t.round == r for t in ok) >= 2
        ]  # fmt: skip
        assert s.rounds == len(rounds) and s.predictions == sum(t.round in rounds for t in ok)
        assert s.rounds >= (3 if s.model == "mlp" else 4)
        assert s.spearman is not None and -1 <= s.spearman <= 1
        assert s.topk_recall is not None and 0 <= s.topk_recall <= 1
        assert s.bias is not None and s.spread is not None and s.train_s >= 0
        assert s.model in s.sentence() and "rank correlation" in s.sentence()
    with pytest.raises(TunelabError, match="unknown cost model"):
        compare_models(store, [sid], ["xgb", "nope"])
    store.close()


def tunelab(*args: str) -> subprocess.CompletedProcess:
    return run_tunelab(*args)


def test_a_session_steered_by_the_mlp_and_the_models_command(session, tmp_path):
    db = str(tmp_path / "cli.sqlite")
    proc = tunelab(
        "tune", "gemm", "--shape", "M=32,N=32,K=64", "--trials", "12", "--batch", "4", "--cost-model", "mlp",
        *FAST_MEASURE_ARGS, "--json", "--db", db,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    store = Store(db)
    record = store.sessions()[0]
    assert record.tuner == "xgb" and record.tuner_options == {"model": "mlp"}
    trials = store.trials(record.id)
    # the session's stored predictions are the mlp's: made before measuring, from its 8th trial on
    assert all(t.predicted_ms is None for t in trials if t.round < 2)
    assert all(t.predicted_ms and t.predicted_ms > 0 for t in trials if t.round >= 2)
    store.close()
    path, sid = session
    doc = json.loads(tunelab("models", str(sid), "--json", "--db", str(path)).stdout)
    assert [d["model"] for d in doc] == ["xgb", "mlp", "roofline", "hybrid"] and all(
        d["predictions"] for d in doc
    )
    text = tunelab("models", str(sid), "--models", "mlp", "--db", str(path))
    assert text.returncode == 0 and "mlp: rank correlation" in text.stdout and "xgb" not in text.stdout
    for args, words in [
        (["models", str(sid), "--models", "svm"], "unknown cost model 'svm'"),
        (["models", "999"], "999"),
        (["tune", "gemm", "--cost-model", "svm"], "unknown cost model 'svm'"),
    ]:
        bad = tunelab(*args, "--db", str(path))
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, (
            bad.stderr
        )


def test_shadow_models_predict_every_candidate_out_of_sample_without_steering(tmp_path):
    store = Store(tmp_path / "tunelab.sqlite")
    # A seeded random search takes the same path whatever its trials measure, so a change of path could
    # only come from the shadows (an xgb search's path follows its noisy measurements).
    plain = create_session(store, small_spec(tuner="random", trials=12, seed=3))
    plain_configs = [t.config for t in plain.run()]
    shadowed = create_session(
        store, small_spec(tuner="random", trials=12, seed=3, shadow_models=("mlp", "xgb"))
    )
    trials = list(shadowed.run())
    record = store.session(shadowed.session_id)
    assert record.shadow_models == ("mlp", "xgb")
    assert [t.config for t in trials] == plain_configs  # they only watch
    predictions = store.trial_predictions(shadowed.session_id)
    for t in trials:
        got = predictions.get(t.id, {})
        # each model from the round where it had enough successful trials before it (xgb 4, mlp 8)
        known = sum(1 for u in trials if u.round < t.round and u.ok)
        assert ("xgb" in got) == (known >= 4) and ("mlp" in got) == (known >= 8), (t.round, known, got)
        assert all(ms > 0 for ms in got.values())
        if "xgb" in got:  # the shadow xgb is the session's own model, refit on the same trials
            assert got["xgb"] == pytest.approx(t.predicted_ms, rel=1e-6)
    assert any("mlp" in p for p in predictions.values())
    for bad, words in [(("svm",), "unknown cost model 'svm'"), (("mlp", "mlp"), "names a model twice")]:
        with pytest.raises(TunelabError, match=words):
            create_session(store, small_spec(shadow_models=bad))
    assert len(store.sessions()) == 2
    store.delete_session(shadowed.session_id)
    assert store.trial_predictions(plain.session_id) == {}
    store.close()

"""Cost-model bias: exact flag logic on hand-made trials, then real xgb sessions."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from specs import small_spec

from tunelab.core.errors import StoreError, TunelabError
from tunelab.core.records import BiasCounts, BiasReport, NewTrial, SessionSpec
from tunelab.core.search.costmodel import spearman, topk_recall
from tunelab.core.search.space.base import config_key
from tunelab.core.store import Store
from tunelab.core.trust.bias import analyze, bias_report, regions, tile_bucket
from tunelab.core.trust.bias_stats import BIAS_LIMIT, RANK_MIN_N, group_stats


def trial(config, measured, predicted, status="ok", rnd=1) -> NewTrial:
    """A hand-made measured trial: one sample of `measured` ms (none when it failed) and its prediction."""
    ok = status == "ok"
    return NewTrial(
        round=rnd,
        config=config,
        status=status,
        error=None if ok else "planted failure",
        samples_ms=(measured,) if ok else (),
        predicted_ms=predicted,
        build_s=0.1,
        run_s=0.1,
        started_at=0.0,
        finished_at=0.0,
    )


class HandStore(Store):
    """A real store holding hand-made sessions: a shape and trials with chosen latencies and predictions."""

    def add(self, shape, trials, space_kind="template", workload="gemm") -> int:
        spec = SessionSpec(
            workload=workload, shape=shape, target="llvm", space_kind=space_kind, trials=len(trials)
        )
        sid = self.create_session(
            spec, target_json={"kind": "llvm"}, target_kind="llvm", space_json={}, tvm_version="-", flops=1.0
        )
        for i, t in enumerate(trials):  # the same config may repeat here: the key only has to be unique
            self.add_trial(sid, t, f"{i}:{config_key(t.config)}")
        return sid


def cfg(order="ro,si,ri", inner_j=8, parallel=True):
    return {
        "tile_i": [4],
        "tile_j": [inner_j],
        "order": order,
        "unroll": 16,
        "vectorize": True,
        "parallel": parallel,
    }


def handmade(path) -> HandStore:
    store = HandStore(path)
    # Shape M=16: the model always guesses 0.7x the latency (under-predicts by 1/0.7 = 1.43x) and
    # ranks perfectly; half its trials run without `parallel`.
    a = [trial(cfg(parallel=i % 2 == 0), float(i + 1), 0.7 * (i + 1)) for i in range(20)]
    # a failed trial and one without a prediction are left out
    a.append(trial(cfg(), None, None, status="build_error"))
    a.append(trial(cfg(), 2.5, None, rnd=0))
    # Shape M=64: unbiased on average (the same multiset of values) but ranked backwards.
    measured = [3.0 * (i + 1) for i in range(8)]
    b = [
        trial(cfg(order="si,ro,ri", inner_j=32), m, p)
        for i, (m, p) in enumerate(zip(measured, measured[::-1], strict=True))
    ]
    assert store.add({"M": 16, "N": 64, "K": 64}, a) == 1
    assert store.add({"M": 64, "N": 64, "K": 64}, b) == 2
    return store


def test_group_stats_match_the_definitions():
    p = [1.0, 2.5, 2.0, 8.0, 4.0, 7.0]
    m = [1.5, 2.0, 3.0, 4.0, 6.0, 5.0]
    stats = group_stats(p, m, k=3)
    res = np.log(np.array(p) / np.array(m))
    assert stats.n == 6
    assert stats.residual_mean == pytest.approx(res.mean())
    assert stats.residual_std == pytest.approx(res.std(ddof=1))
    assert stats.ratio == pytest.approx(math.exp(res.mean()))
    assert stats.spearman == pytest.approx(spearman(p, m))
    assert stats.topk_recall == topk_recall(p, m, 3) and stats.k == 3
    assert group_stats([2.0], [1.0]).residual_std is None and group_stats([2.0], [1.0]).k == 1


def test_flag_thresholds_are_exact():
    m = list(range(1, 11))
    just_under = group_stats([x * math.exp(BIAS_LIMIT - 0.01) for x in m], m)
    just_over = group_stats([x * math.exp(BIAS_LIMIT + 0.01) for x in m], m)
    below = group_stats([x * math.exp(-BIAS_LIMIT - 0.01) for x in m], m)
    assert not just_under.biased and just_over.biased and below.biased
    assert just_over.direction == "over" and below.direction == "under"
    # Backwards ranking: flagged with 8 trials, not with 7 (too few to say).
    back8 = group_stats(list(range(8, 0, -1)), list(range(1, 9)))
    back7 = group_stats(list(range(7, 0, -1)), list(range(1, 8)))
    assert back8.spearman == -1.0 and back8.ranks_poorly and back8.flagged
    assert RANK_MIN_N == 8 and not back7.ranks_poorly and not back7.flagged
    # A Spearman of exactly 0.3 is not below the limit; a constant prediction has none and is not flagged.
    flat = group_stats([1.0] * 9, list(range(1, 10)))
    assert flat.spearman is None and not flat.ranks_poorly


def test_regions_of_template_and_auto_configs():
    assert tile_bucket(1) == "small" and tile_bucket(4) == "small" and tile_bucket(5) == "medium"
    assert tile_bucket(16) == "medium" and tile_bucket(17) == "large" and tile_bucket(64) == "large"
    keys = [key for _, key, _ in regions(cfg(inner_j=32, parallel=False), "template")]
    assert keys == [
        "tile_i:small",
        "tile_j:large",
        "order=ro,si,ri",
        "unroll=16",
        "vectorize=true",
        "parallel=false",
    ]
    assert regions({"sketch": 2, "decisions": [[1, 2, 4, 8], 1]}, "auto") == [
        ("sketch", "sketch=2", "sketch 2")
    ]


def test_bias_report_flags_exactly_the_wrong_groups(tmp_path):
    report = bias_report(handmade(tmp_path / "hand.sqlite"), [1, 2])
    assert report.counts == BiasCounts(trials=30, failed=1, no_prediction=1, predicted=28)
    assert BiasReport.from_json(json.loads(json.dumps(report.to_json()))) == report
    groups = {g.key: g for g in report.groups}
    m16 = groups["gemm|M=16,N=64,K=64|float32|llvm"]
    m64 = groups["gemm|M=64,N=64,K=64|float32|llvm"]
    assert m16.label == "M=16,N=64,K=64" and m16.n == 20
    assert m16.residual_mean == pytest.approx(math.log(0.7)) and m16.residual_std == pytest.approx(
        0.0, abs=1e-12
    )
    assert m16.biased and m16.direction == "under" and m16.spearman == 1.0 and not m16.ranks_poorly
    assert m16.topk_recall == 1.0 and m16.k == 5
    assert m64.n == 8 and m64.residual_mean == pytest.approx(0.0, abs=1e-12) and not m64.biased
    assert m64.spearman == -1.0 and m64.ranks_poorly
    assert m64.topk_recall == pytest.approx(
        2 / 5
    )  # the 5 fastest measured vs the 5 fastest predicted: 2 shared
    overall = groups["all"]
    assert overall.n == 28 and overall.residual_mean == pytest.approx(20 * math.log(0.7) / 28)
    assert not overall.biased and overall.spearman >= 0.3 and not overall.flagged
    # Groups holding exactly one shape's trials say so; the summary names the shape only.
    assert (
        groups["order=ro,si,ri"].same_as == "M=16,N=64,K=64"
        and groups["tile_j:large"].same_as == "M=64,N=64,K=64"
    )
    assert groups["unroll=16"].same_as == "all trials"
    # parallel=false is half of M=16 (biased); parallel=true mixes both shapes and ranks poorly.
    assert groups["parallel=false"].n == 10 and groups["parallel=false"].biased
    assert groups["parallel=true"].n == 18 and groups["parallel=true"].ranks_poorly
    assert not groups["parallel=true"].biased
    assert {k for k, g in groups.items() if g.flagged} == {
        "gemm|M=16,N=64,K=64|float32|llvm",
        "gemm|M=64,N=64,K=64|float32|llvm",
        "order=ro,si,ri",
        "order=si,ro,ri",
        "parallel=false",
        "parallel=true",
        "tile_j:large",
        "tile_j:medium",
    }
    assert report.flagged == tuple(g.label for g in report.groups if g.flagged)
    # the trials without `parallel` are the odd ones of M=16, stored first: ids 2, 4, ..., 20
    assert sorted(groups["parallel=false"].trial_ids) == list(range(2, 21, 2))
    assert report.summary == (
        "The model under-predicts latency for shape M=16,N=64,K=64 by 1.4x on average; "
        "the model under-predicts latency for parallel=false by 1.4x on average; "
        "the model ranks poorly for shape M=64,N=64,K=64 (Spearman -1.00, n=8); "
        "1 more group(s) are flagged; it ranks well elsewhere "
        f"(overall Spearman {overall.spearman:.2f}, top-5 recall {overall.topk_recall:.2f}, "
        "mean residual -0.25, n=28)."
    )


def test_rank_statistics_pool_sessions_by_their_own_scale(tmp_path):
    # Two perfectly ranked sessions at very different scales: pooled Spearman stays 1.
    store = HandStore(tmp_path / "hand.sqlite")
    small = store.add({"M": 16, "N": 8, "K": 8}, [trial(cfg(), m, m * 1.1) for m in [1.0, 2.0, 4.0]])
    large = store.add({"M": 64, "N": 8, "K": 8}, [trial(cfg(), m, m * 1.1) for m in [100.0, 200.0, 400.0]])
    report = bias_report(store, [small, large])
    overall = report.groups[0]
    assert overall.key == "all" and overall.spearman == pytest.approx(1.0)
    assert not report.flagged
    assert report.summary.startswith(
        "The model is within 35 % on average in every group and has too few trials"
    )


def test_auto_sessions_group_by_sketch_and_bad_input(tmp_path):
    store = HandStore(tmp_path / "hand.sqlite")
    trials = [
        trial(
            {"sketch": i % 2, "decisions": [[1, 2], 0]}, float(i + 1), float(i + 1) * (3.0 if i % 2 else 1.0)
        )
        for i in range(8)
    ]
    sid = store.add({"M": 32, "N": 32, "K": 32}, trials, space_kind="auto")
    groups = {g.key: g for g in bias_report(store, [sid]).groups}
    assert groups["sketch=1"].residual_mean == pytest.approx(math.log(3.0)) and groups["sketch=1"].biased
    assert groups["sketch=0"].residual_mean == pytest.approx(0.0) and not groups["sketch=0"].flagged
    assert "over-predicts latency for sketch 1 by 3.0x" in bias_report(store, [sid]).summary
    with pytest.raises(TunelabError):
        bias_report(store, [])
    with pytest.raises(StoreError):
        bias_report(store, [99])
    empty = HandStore(tmp_path / "empty.sqlite")
    unpredicted = empty.add({"M": 8, "N": 8, "K": 8}, [trial(cfg(), 1.0, None)])
    assert bias_report(empty, [unpredicted]).summary.startswith(
        "No successful trial has a cost-model prediction"
    )
    assert analyze([]).n == 0


@pytest.mark.slow
def test_bias_report_on_real_xgb_sessions(tmp_path):
    from tunelab.core.session.loop import create_session

    store = Store(tmp_path / "tunelab.sqlite")
    ids = []
    for seed, shape in ((0, {"M": 32, "N": 32, "K": 32}), (1, {"M": 64, "N": 32, "K": 32})):
        session = create_session(store, small_spec(shape=shape, tuner="xgb", trials=12, batch=4, seed=seed))
        list(session.run())
        ids.append(session.session_id)
    report = bias_report(store, ids)
    trials = [t for sid in ids for t in store.trials(sid)]
    predicted = [t for t in trials if t.ok and t.predicted_ms]
    # The model predicts from the second round on (the first batch trains it).
    assert all(t.predicted_ms is not None for t in trials if t.round >= 1)
    assert report.counts.predicted == len(predicted) >= 12
    assert report.counts.trials == 24
    groups = {g.key: g for g in report.groups}
    assert groups["all"].n == len(predicted)
    shapes = [g for g in report.groups if g.dimension == "shape"]
    assert sorted(g.label for g in shapes) == ["M=32,N=32,K=32", "M=64,N=32,K=32"]
    assert sum(g.n for g in shapes) == len(predicted)
    res = [math.log(t.predicted_ms / t.latency_ms) for t in predicted]
    assert groups["all"].residual_mean == pytest.approx(float(np.mean(res)))
    assert groups["all"].residual_std == pytest.approx(float(np.std(res, ddof=1)))
    for g in report.groups:
        assert g.flagged == (g.biased or g.ranks_poorly)
        assert g.biased == (abs(g.residual_mean) > BIAS_LIMIT)
        assert (g.words != "") == g.flagged
    knob_groups = [g for g in report.groups if g.dimension == "knob" and g.key.startswith("order=")]
    assert sum(g.n for g in knob_groups) == len(predicted)
    assert report.summary.endswith(f"n={len(predicted)}).")
    store.close()


@pytest.mark.slow  # tunes two shapes: 11 s
def test_a_session_with_several_shapes_is_grouped_per_shape(tmp_path):
    from tunelab.core.records import MeasureOptions, SessionSpec
    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store
    from tunelab.core.trust.bias import bias_report

    with Store(tmp_path / "multi.sqlite") as store:
        session = create_session(
            store,
            SessionSpec(
                workload="gemm",
                shape={"M": 32, "N": 32, "K": 32},
                shapes=({"M": 16, "N": 32, "K": 32},),
                target="llvm",
                tuner="xgb",
                trials=16,
                batch=4,
                measure=MeasureOptions(number=1, repeat=2, min_repeat_ms=1, cooldown_s=0, confirm_runs=0),
            ),
        )
        list(session.run())
        report = bias_report(store, [session.session_id])
        n_predicted = sum(1 for t in store.trials(session.session_id) if t.ok and t.predicted_ms is not None)
    shapes = {g.label for g in report.groups if g.dimension == "shape"}
    assert shapes == {"M=32,N=32,K=32", "M=16,N=32,K=32"}
    # What the desktop app asks for, through the CLI in a child process: per task, with the plot points
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tunelab",
            "bias",
            str(session.session_id),
            "--by-task",
            "--json",
            "--db",
            str(tmp_path / "multi.sqlite"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = json.loads(proc.stdout)
    by_task = BiasReport.from_json(printed)
    assert json.dumps(by_task.to_json()) == proc.stdout.strip()  # one JSON mapping, both ways
    assert {g.label for g in by_task.groups if g.dimension == "shape"} == shapes
    assert len(by_task.points) == by_task.n == n_predicted
    sid, measured, predicted, label = next(iter(by_task.points.values()))
    assert sid == session.session_id and measured > 0 and predicted > 0 and label in shapes


def test_predictions_in_time_order_never_see_the_round_they_predict():
    """Each round is predicted by a model of the rounds before it: what a later round measured changes
    nothing an earlier round was predicted, and a round's own measurements do not change its predictions."""
    from tunelab.core.search.out_of_sample import predict_in_time_order

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (40, 5))
    latency = 1.0 + 3.0 * X[:, 0] + X[:, 1]
    rounds = np.repeat(np.arange(5), 8)
    base = predict_in_time_order("xgb", X, latency, rounds)
    assert not base.predicted[rounds < 1].any() and base.predicted[rounds >= 1].all() and base.rounds == 4
    changed = latency.copy()
    changed[rounds == 4] *= 50.0  # the last round measured far slower
    later = predict_in_time_order("xgb", X, changed, rounds)
    np.testing.assert_array_equal(base.predicted_ms, later.predicted_ms)
    changed[rounds == 2] *= 50.0  # now round 2 too: rounds 3 and 4 learn it, rounds 1 and 2 cannot
    again = predict_in_time_order("xgb", X, changed, rounds)
    np.testing.assert_array_equal(base.predicted_ms[rounds <= 2], again.predicted_ms[rounds <= 2])
    assert not np.allclose(base.predicted_ms[rounds == 3], again.predicted_ms[rounds == 3])


@pytest.mark.slow  # trains every cost model: 11 s
def test_the_bias_report_judges_any_cost_model(tmp_path):
    """A shadow model's stored predictions, a model refit out of sample, the session's own: each one's
    residuals are the log of its own predictions over the measurements."""
    from tunelab.core.session.loop import create_session
    from tunelab.core.trust.predictions import model_predictions

    path = tmp_path / "tunelab.sqlite"
    store = Store(path)
    session = create_session(
        store, small_spec(tuner="xgb", trials=16, batch=4, seed=2, shadow_models=("mlp",))
    )
    trials = {t.id: t for t in session.run()}
    sid = session.session_id
    own = bias_report(store, [sid])
    assert own.model is None
    same = bias_report(store, [sid], model="xgb")  # the model that steered: the stored predictions
    assert same.model == "xgb" and same.groups == own.groups and same.summary == own.summary

    shadow = model_predictions(store, sid, "mlp")
    assert shadow.source == "shadow" and shadow.predicted_ms
    assert shadow.predicted_ms == {
        tid: by["mlp"] for tid, by in store.trial_predictions(sid).items() if "mlp" in by
    }
    refit = model_predictions(store, sid, "roofline")
    assert refit.source == "refit" and refit.predicted_ms
    # out of sample: the first round (nothing before it) is never predicted
    assert all(trials[tid].round >= 1 for tid in refit.predicted_ms)
    for name, predictions in (("mlp", shadow), ("roofline", refit)):
        report = bias_report(store, [sid], model=name)
        ok = {tid: ms for tid, ms in predictions.predicted_ms.items() if trials[tid].ok}
        logs = [math.log(ms / trials[tid].latency_ms) for tid, ms in ok.items()]
        overall = next(g for g in report.groups if g.key == "all")
        assert report.model == name and report.n == overall.n == len(ok)
        assert overall.residual_mean == pytest.approx(float(np.mean(logs)))
        assert report.counts.no_prediction == sum(1 for t in trials.values() if t.ok) - len(ok)
        assert report.summary.startswith(f"Cost model {name} (")
    # bad input: one line, from the command line too
    with pytest.raises(TunelabError, match="unknown cost model 'svm'; cost models are xgb"):
        bias_report(store, [sid], model="svm")
    store.close()
    bad = subprocess.run(
        [sys.executable, "-m", "tunelab", "bias", str(sid), "--model", "svm", "--db", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "unknown cost model 'svm'" in bad.stderr
    by_task = subprocess.run(
        [
            sys.executable,
            "-m",
            "tunelab",
            "bias",
            str(sid),
            "--model",
            "mlp",
            "--by-task",
            "--json",
            "--db",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert by_task.returncode == 0, by_task.stderr[-2000:]
    printed = BiasReport.from_json(json.loads(by_task.stdout))
    assert printed.model == "mlp" and {t: p[2] for t, p in printed.points.items()} == {
        tid: ms for tid, ms in shadow.predicted_ms.items() if trials[tid].ok
    }

from __future__ import annotations

import math

import numpy as np
import pytest

from tunelab.core.search.costmodel import CostModel, spearman, topk_recall


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A learnable latency: log-linear in some features, one interaction, 5% noise."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 6))
    log_ms = 2.0 * X[:, 0] - 1.0 * X[:, 1] + 1.5 * X[:, 2] * X[:, 3] + 0.5 * (X[:, 4] > 0.5)
    return X, np.exp(log_ms + rng.normal(0.0, 0.05, n))


def test_predict_is_none_until_min_samples():
    X, y = synthetic(10, 0)
    model = CostModel(seed=0, nthread=1)
    assert model.predict(X) is None
    assert not model.trained and model.n_samples == 0
    model.fit(X[:3], y[:3])
    assert model.predict(X) is None and model.n_samples == 3
    model.fit(X[:4], y[:4])  # min_samples defaults to 4: the first batch already guides search
    assert model.trained
    assert model.predict(X).shape == (10,)


def test_failed_trials_are_not_training_rows():
    X, y = synthetic(6, 0)
    model = CostModel(seed=0, nthread=1)
    model.fit(X, [y[0], None, y[2], float("nan"), -1.0, y[5]])
    assert model.n_samples == 3 and not model.trained


def test_learns_a_synthetic_latency():
    X, y = synthetic(400, 1)
    model = CostModel(seed=0, nthread=1)
    model.fit(X[:300], y[:300])
    pred = model.predict(X[300:])
    assert np.all(pred > 0)
    assert spearman(pred, y[300:]) > 0.8
    assert np.median(np.abs(np.log(pred / y[300:]))) < 0.25  # in ms, not in log space


def test_fit_is_deterministic_for_a_seed():
    X, y = synthetic(80, 2)
    preds = []
    # Few rounds with two threads: on a busy machine each two-thread round can be slow.
    for nthread, rounds in ((1, 50), (1, 50), (1, 10), (2, 10)):
        model = CostModel(seed=5, nthread=nthread, num_boost_round=rounds)
        model.fit(X[:60], y[:60])
        preds.append(model.predict(X[60:]))
    assert CostModel().nthread == 2
    np.testing.assert_array_equal(preds[0], preds[1])
    np.testing.assert_array_equal(preds[2], preds[3])


def test_bytes_roundtrip_keeps_model_and_data():
    X, y = synthetic(120, 3)
    model = CostModel(seed=4, min_samples=8, nthread=1)
    model.fit(X[:100], y[:100])
    restored = CostModel.from_bytes(model.to_bytes())
    assert restored.trained and restored.n_samples == 100
    assert (restored.seed, restored.min_samples, restored.nthread) == (4, 8, 1)
    np.testing.assert_array_equal(restored.predict(X[100:]), model.predict(X[100:]))
    # The training data travels too, so refitting after a resume gives the same model.
    restored.fit(restored._X, restored._latency_ms)
    np.testing.assert_array_equal(restored.predict(X[100:]), model.predict(X[100:]))


def test_bytes_roundtrip_untrained():
    model = CostModel(seed=1)
    model.fit(*synthetic(2, 0))
    restored = CostModel.from_bytes(model.to_bytes())
    assert not restored.trained and restored.n_samples == 2
    assert restored.predict(np.zeros((1, 6))) is None


def test_predict_rejects_wrong_feature_count():
    model = CostModel(seed=0, nthread=1)
    model.fit(*synthetic(20, 0))
    with pytest.raises(ValueError, match="6 features"):
        model.predict(np.zeros((2, 5)))
    assert model.predict(np.zeros((0, 6))).shape == (0,)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([1, 2, 3], [10, 20, 30], 1.0),
        ([1, 2, 3, 4], [9, 7, 5, 1], -1.0),
        ([1, 2, 2, 3], [1, 2, 3, 4], 3 / math.sqrt(10)),  # ties share rank 2.5
        ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], 0.8),  # 1 - 6*4 / (5*24)
        ([1, 2, None, 3], [1, 2, 5, 3], 1.0),  # missing pairs are dropped
    ],
)
def test_spearman_known_values(a, b, expected):
    assert spearman(a, b) == pytest.approx(expected)


@pytest.mark.parametrize(
    "a, b",
    [
        ([1, 2], [1, 2]),
        ([1, 1, 1], [1, 2, 3]),
        ([1, 2, 3], [4, 4, 4]),
        ([], []),
        ([1, None, 3, 4], [1, 2, None, 4]),
    ],
)
def test_spearman_undefined(a, b):
    assert spearman(a, b) is None


def test_spearman_matches_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 50), rng.integers(0, 7, 50)
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)


@pytest.mark.parametrize(
    "predicted, measured, k, expected",
    [
        ([1, 2, 3, 4], [1, 2, 3, 4], 2, 1.0),
        ([1, 2, 3, 4], [4, 3, 2, 1], 2, 0.0),
        ([1, 2, 3, 4], [2, 1, 4, 3], 2, 1.0),  # same top-2 set, different order
        ([1, 2, 3, 4], [1, 3, 2, 4], 2, 0.5),
        ([0.5, 9, 0.7, 3], [1, 2, 3, 4], 1, 1.0),
        ([1, 2, 3], [3, 2, 1], 10, 1.0),  # k clipped to the number of configs
    ],
)
def test_topk_recall_known_values(predicted, measured, k, expected):
    assert topk_recall(predicted, measured, k) == pytest.approx(expected)


def test_topk_recall_needs_positive_k():
    with pytest.raises(ValueError):
        topk_recall([1, 2], [1, 2], 0)

"""Predict a candidate's latency before it is measured (AutoTVM's XGBoost cost model, as a regressor).

The model is fit on log(latency_ms) of the successful trials so far and predicts milliseconds.
Unlike MetaSchedule's XGBModel, which answers randomly until it has 100 samples, it starts
guiding the search as soon as it has `min_samples` measurements (the first measured batch).
"""

from __future__ import annotations

import io
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

# XGBoost's OpenMP workers spin while they wait; on a CPU busy measuring kernels that turns a
# millisecond fit into seconds. Passive waiting must be set before the library loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import xgboost as xgb

DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "reg:squarederror",
    "tree_method": "hist",
    "eta": 0.2,
    "max_depth": 6,
    "max_bin": 64,
    "min_child_weight": 1.0,
    "subsample": 1.0,
    "colsample_bytree": 1.0,
    "lambda": 1.0,
    "alpha": 0.0,
    "verbosity": 0,
}

_FORMAT = "tunelab-costmodel-1"

# The training loss (the xgb tuner's option `loss`). "reg": squared error on log latency, a regressor.
# "rank": XGBoost's pairwise ranking loss (AutoTVM's GBDT tuner with loss_type="rank"), which only learns
# which of two configs is faster; pairs drawn per row at random ("mean"), as AutoTVM's were. Its scores
# are mapped back to milliseconds by a straight line fit on the training rows (`_calibration`), so
# predictions stay latencies and rank as the scores do.
LOSSES: dict[str, dict[str, Any]] = {
    "reg": {"objective": "reg:squarederror"},
    "rank": {
        "objective": "rank:pairwise",
        "lambdarank_pair_method": "mean",
        "lambdarank_num_pair_per_sample": 8,
    },
}


class TrainingRows(ABC):
    """What every cost model keeps to learn from (tunelab.core.search.models): the session's own
    successful trials, and a warm start's rows from earlier sessions (transfer learning, as AutoTVM's and
    MetaSchedule's per-store features allow: rows measured on other shapes of the same workload family, as
    time per GFLOP so that shapes of any size share one scale, weighted below the session's own rows); and
    ``predict``, which checks the rows and turns a trained model's log labels back into ms."""

    min_samples: int

    def _reset_rows(self) -> None:
        self._X = np.zeros((0, 0))
        self._latency_ms = np.zeros(0)
        self._prior_X = np.zeros((0, 0))
        self._prior_ms_per_gflop = np.zeros(0)
        self.prior_weight = 0.0
        self.gflop = 1.0  # this problem's GFLOP per call: own latencies to time per GFLOP and back

    @property
    def n_samples(self) -> int:
        """Rows the model was last fit on (successful trials only)."""
        return len(self._latency_ms)

    @property
    def n_features(self) -> int | None:
        return self._X.shape[1] if self.n_samples else None

    @property
    def n_prior(self) -> int:
        """Rows from earlier sessions the model also learns from (0 without a warm start)."""
        return len(self._prior_ms_per_gflop)

    def set_prior(self, X: np.ndarray, ms_per_gflop: np.ndarray, *, gflop: float, weight: float) -> None:
        """Learn from earlier sessions' trials too: feature rows ``X`` (this space's features, which are
        shape-generic) with their measured time per GFLOP, each weighted ``weight`` (0 < weight <= 1)
        where this session's own rows weigh 1. ``gflop`` is this problem's work per call. With prior
        rows the model is trained before the session measured anything (``fit`` with no own rows)."""
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(ms_per_gflop, dtype=np.float64)
        if X.ndim != 2 or len(X) != len(y):
            raise ValueError(f"set_prior needs X of shape (n, d) and n figures; got {X.shape} and {y.shape}")
        if not 0 < weight <= 1 or not gflop > 0:
            raise ValueError(f"a prior needs 0 < weight <= 1 and gflop > 0; got {weight} and {gflop}")
        ok = np.isfinite(y) & (y > 0)
        self._prior_X, self._prior_ms_per_gflop = X[ok].copy(), y[ok].copy()
        self.prior_weight, self.gflop = float(weight), float(gflop)

    def _training_data(self, X: Any, latency_ms: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Keep ``X``'s successful rows as the model's own, then what to train on: rows, log labels
        (log ms; log ms per GFLOP with a prior) and weights; None while there are too few rows."""
        X = np.asarray(X, dtype=np.float64)
        lat = np.asarray(latency_ms, dtype=np.float64)
        if X.ndim != 2 or lat.ndim != 1 or len(X) != len(lat):
            raise ValueError(f"fit needs X of shape (n, d) and n latencies; got {X.shape} and {lat.shape}")
        ok = np.isfinite(lat) & (lat > 0)
        self._X, self._latency_ms = X[ok].copy(), lat[ok].copy()
        if self.n_samples + self.n_prior < self.min_samples:
            return None
        if not self.n_prior:
            return self._X, np.log(self._latency_ms), np.ones(self.n_samples)
        own = self._X if self.n_samples else np.zeros((0, self._prior_X.shape[1]))
        if own.shape[1] != self._prior_X.shape[1]:
            raise ValueError(f"own rows have {own.shape[1]} features, the prior's {self._prior_X.shape[1]}")
        return (
            np.vstack([own, self._prior_X]),
            np.log(np.concatenate([self._latency_ms / self.gflop, self._prior_ms_per_gflop])),
            np.concatenate([np.ones(self.n_samples), np.full(self.n_prior, self.prior_weight)]),
        )

    def _checked_rows(self, X: Any) -> np.ndarray:
        """Rows to predict, as wide as the rows learned from (ValueError otherwise)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"predict needs X of shape (n, d); got {X.shape}")
        width = self._X.shape[1] if self.n_samples else self._prior_X.shape[1]
        if len(X) and X.shape[1] != width:
            raise ValueError(f"the model was trained on {width} features; got {X.shape[1]}")
        return X

    @property
    @abstractmethod
    def trained(self) -> bool:
        """Whether the model has learned enough to predict."""

    def predict(self, X: np.ndarray) -> np.ndarray | None:
        """Predicted latency in ms for each row, or None while the model has too few samples."""
        if not self.trained:
            return None
        X = self._checked_rows(X)
        if len(X) == 0:
            return np.zeros(0)
        return self._in_ms(self._predict_log(X))

    @abstractmethod
    def _predict_log(self, X: np.ndarray) -> np.ndarray:
        """The trained model's log labels for rows ``X`` (checked, at least one)."""

    def _in_ms(self, log_predicted: np.ndarray) -> np.ndarray:
        """Predicted log labels back to this problem's ms."""
        pred = np.exp(np.asarray(log_predicted, dtype=np.float64))
        return pred * self.gflop if self.n_prior else pred


class CostModel(TrainingRows):
    """XGBoost regressor from feature rows to latency in ms; deterministic for a given seed."""

    def __init__(
        self,
        *,
        seed: int = 0,
        min_samples: int = 4,
        num_boost_round: int = 50,
        nthread: int = 2,
        params: dict[str, Any] | None = None,
        loss: str = "reg",
    ) -> None:
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}; got {loss!r}")
        self.loss = loss
        self._calibration = (1.0, 0.0)  # rank loss: log label = slope * score + intercept
        self.seed = int(seed)
        # More threads do not pay at these data sizes, and OpenMP threads that spin while the
        # CPU is busy (builds, CPU measurements) make a fit orders of magnitude slower.
        self.nthread = max(1, int(nthread))
        self.min_samples = max(1, int(min_samples))
        self.num_boost_round = int(num_boost_round)
        self.params: dict[str, Any] = {**DEFAULT_PARAMS, **(params or {})}
        self._booster: xgb.Booster | None = None
        self._reset_rows()

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def _train_params(self) -> dict[str, Any]:
        return {**self.params, **LOSSES[self.loss], "seed": self.seed, "nthread": self.nthread}

    def fit(self, X: np.ndarray, latency_ms: np.ndarray | Sequence[float | None]) -> None:
        """Refit from scratch on these rows. Failed trials (None, NaN, <= 0) are left out."""
        data = self._training_data(X, latency_ms)
        if data is None:
            self._booster = None
            return
        rows, labels, weights = data
        if self.loss == "rank":
            dtrain = self._ranking_matrix(rows, labels)
        else:
            dtrain = xgb.DMatrix(
                rows, label=labels, weight=None if not self.n_prior else weights, nthread=self.nthread
            )
        self._booster = xgb.train(self._train_params(), dtrain, num_boost_round=self.num_boost_round)
        if self.loss == "rank":
            self._calibration = _line(self._booster.predict(dtrain), labels)

    def _ranking_matrix(self, rows: np.ndarray, labels: np.ndarray) -> xgb.DMatrix:
        """Ranking data: the faster the more relevant (a higher label). The session's own rows are one
        query and a warm start's prior rows another (XGBoost weighs a ranking query, not a row), so pairs
        are only ever drawn within one of them and the prior's weigh `prior_weight`."""
        groups = [(n, w) for n, w in ((self.n_samples, 1.0), (self.n_prior, self.prior_weight)) if n]
        dtrain = xgb.DMatrix(rows, label=-labels, nthread=self.nthread)
        dtrain.set_group([n for n, _ in groups])
        if self.n_prior:
            dtrain.set_weight(np.array([w for _, w in groups]))
        return dtrain

    def _predict_log(self, X: np.ndarray) -> np.ndarray:
        assert self._booster is not None  # predict asks only a trained model
        raw = self._booster.predict(xgb.DMatrix(X, nthread=self.nthread))
        if self.loss == "rank":
            slope, intercept = self._calibration
            raw = slope * raw + intercept
        return raw

    def to_bytes(self) -> bytes:
        """The raw XGBoost model plus its training data, so a resumed session keeps the model."""
        meta = {
            "format": _FORMAT,
            "seed": self.seed,
            "min_samples": self.min_samples,
            "num_boost_round": self.num_boost_round,
            "nthread": self.nthread,
            "params": self.params,
            "loss": self.loss,
            "calibration": list(self._calibration),
            "prior_weight": self.prior_weight,
            "gflop": self.gflop,
        }
        raw = bytes(self._booster.save_raw("ubj")) if self._booster is not None else b""
        buf = io.BytesIO()
        np.savez(
            buf,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            model=np.frombuffer(raw, dtype=np.uint8),
            X=self._X,
            latency_ms=self._latency_ms,
            prior_X=self._prior_X,
            prior_ms_per_gflop=self._prior_ms_per_gflop,
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> CostModel:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            meta = json.loads(npz["meta"].tobytes().decode())
            if meta.get("format") != _FORMAT:
                raise ValueError(f"not a tunelab cost model (format {meta.get('format')!r})")
            model = cls(
                seed=meta["seed"],
                min_samples=meta["min_samples"],
                num_boost_round=meta["num_boost_round"],
                nthread=meta.get("nthread", 2),
                params=meta["params"],
                loss=meta.get("loss", "reg"),  # a model saved before the loss was chosen regressed
            )
            slope, intercept = meta.get("calibration", (1.0, 0.0))
            model._calibration = (float(slope), float(intercept))
            model._X = npz["X"].astype(np.float64)
            model._latency_ms = npz["latency_ms"].astype(np.float64)
            if "prior_X" in npz.files:  # a model saved before warm starts has none
                model._prior_X = npz["prior_X"].astype(np.float64)
                model._prior_ms_per_gflop = npz["prior_ms_per_gflop"].astype(np.float64)
                model.prior_weight = float(meta.get("prior_weight", 0.0))
                model.gflop = float(meta.get("gflop", 1.0))
            raw = npz["model"].tobytes()
        if raw:
            booster = xgb.Booster(params=model._train_params())
            booster.load_model(bytearray(raw))
            model._booster = booster
        return model


def _line(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and intercept of labels on ranking scores; a flat line at the mean where the
    scores do not vary (every row alike, or a model of one leaf)."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) < 2 or float(np.ptp(scores)) == 0.0:
        return 0.0, float(np.mean(labels))
    slope, intercept = np.polyfit(scores, labels, 1)
    return float(slope), float(intercept)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given the mean of the ranks they span."""
    # Each distinct value spans the ranks ends - counts + 1 .. ends of the sorted array.
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    avg = (2 * ends - counts + 1) / 2.0
    return avg[inverse.reshape(-1)].astype(np.float64)


def spearman(a: Sequence[float | None] | np.ndarray, b: Sequence[float | None] | np.ndarray) -> float | None:
    """Spearman rank correlation of paired values (ties averaged).

    Pairs where either value is missing (None/NaN/inf) are dropped. None when fewer than 3 pairs
    remain or either side is constant (the correlation is undefined).
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman needs two 1-D sequences of equal length; got {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3:
        return None
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    if denom == 0:
        return None
    return float(np.clip((rx * ry).sum() / denom, -1.0, 1.0))


def topk_recall(
    predicted: Sequence[float] | np.ndarray, measured: Sequence[float] | np.ndarray, k: int
) -> float:
    """Fraction of the k fastest measured configs that are among the k fastest predicted ones.

    Lower is better on both sides (latencies). k is clipped to the number of configs; ties are
    broken by position.
    """
    p = np.asarray(predicted, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    if p.shape != m.shape or p.ndim != 1:
        raise ValueError(f"topk_recall needs two 1-D sequences of equal length; got {p.shape} and {m.shape}")
    if k < 1:
        raise ValueError(f"k must be at least 1; got {k}")
    k = min(k, len(p))
    if k == 0:
        return 0.0
    top_pred = set(np.argsort(p, kind="stable")[:k].tolist())
    top_meas = np.argsort(m, kind="stable")[:k].tolist()
    return sum(i in top_pred for i in top_meas) / k

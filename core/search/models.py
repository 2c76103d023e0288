"""Cost models behind one interface, and their registry (as the tuners have one).

Every model predicts a candidate's latency in ms from the space's feature rows (MetaSchedule's
per-store features plus the knob vector, tunelab.core.search.space) and learns from measured trials:

- ``xgb``: gradient-boosted trees (AutoTVM's and MetaSchedule's choice; tunelab.core.search.costmodel):
  fast to train, strong with a few dozen trials, prone to over-fit the regions it has seen.
- ``roofline`` and ``hybrid``: analytical, and the analytical model as a learned one's prior
  (tunelab.core.search.roofline_model).
- ``mlp``: a small neural network (scikit-learn's MLPRegressor, two hidden layers) on standardised
  features; MetaSchedule 0.27's own MLP model needs PyTorch and its SegmentSum features, which tunelab's
  dependencies do not include. Smoother between the points it has seen, but needs more of them.

Both learn log(latency) (or, with a warm start's prior, log(time per GFLOP): CostModel.set_prior) and
share ``fit``/``predict``/``trained``/``n_samples``/``n_prior``/``set_prior``/``min_samples``, so a tuner
takes either. ``tunelab models`` (tunelab.core.usecases.model_compare) compares them on a session's trials.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.core.search.costmodel import CostModel, TrainingRows
from tunelab.core.search.roofline_model import HybridCostModel, RooflineCostModel


class MLPCostModel(TrainingRows):
    """A two-layer perceptron from feature rows to log latency; deterministic for a given seed."""

    name = "mlp"

    def __init__(
        self, *, seed: int = 0, min_samples: int = 8, hidden: tuple[int, ...] = (64, 32), **_: Any
    ) -> None:
        self.seed = int(seed)
        self.min_samples = max(2, int(min_samples))
        self.hidden = tuple(int(h) for h in hidden)
        self._net: Any = None
        self._log_range = (-50.0, 50.0)
        self._mean = np.zeros(0)
        self._scale = np.ones(0)
        self._reset_rows()

    @property
    def trained(self) -> bool:
        return self._net is not None

    def fit(self, X: np.ndarray, latency_ms: Any) -> None:
        """Refit from scratch. Failed trials (None, NaN, <= 0) are left out."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPRegressor

        data = self._training_data(X, latency_ms)
        if data is None:
            self._net = None
            return
        rows, y, weight = data
        self._mean = rows.mean(axis=0)
        self._scale = rows.std(axis=0)
        self._scale[self._scale == 0] = 1.0  # constant features carry nothing
        net = MLPRegressor(
            hidden_layer_sizes=self.hidden,
            alpha=1e-3,
            learning_rate_init=1e-2,
            max_iter=400,
            tol=1e-5,
            random_state=self.seed,
        )
        with warnings.catch_warnings():  # a few dozen rows: it stops at max_iter, which is fine
            warnings.simplefilter("ignore", ConvergenceWarning)
            net.fit((rows - self._mean) / self._scale, y, sample_weight=weight)
        self._net = net
        self._log_range = (float(y.min()) - np.log(10.0), float(y.max()) + np.log(10.0))

    def _predict_log(self, X: np.ndarray) -> np.ndarray:
        # Outside the range it learned, a network extrapolates linearly in log space: clip to what
        # latencies its training data had, widened tenfold, so one wild row cannot rank first.
        log_pred = self._net.predict((X - self._mean) / self._scale)
        return np.clip(log_pred, *self._log_range)


COST_MODELS: dict[str, type] = {
    "xgb": CostModel,
    "mlp": MLPCostModel,
    "roofline": RooflineCostModel,
    "hybrid": HybridCostModel,
}
COST_MODEL_WORDS = {
    "xgb": "XGBoost regressor (gradient-boosted trees), as AutoTVM and MetaSchedule use",
    "mlp": "a two-layer perceptron (scikit-learn) on standardised features",
    "roofline": "analytical: each schedule's FLOPs and memory traffic against the machine's peak and "
    "bandwidth, no training",
    "hybrid": "XGBoost learning the roofline's error, with the roofline as its prior and a feature",
}
# The models that read the target (lanes, cores) and the machine's profile off the space they rank.
MACHINE_MODELS = ("roofline", "hybrid")


def cost_model_names() -> list[str]:
    return list(COST_MODELS)


def make_cost_model(
    name: str, *, seed: int = 0, nthread: int = 1, space: Any = None, profile: Any = None
) -> Any:
    """A fresh model of the registry by name; an unknown name is one TunelabError listing them.
    ``space`` (the space it ranks) and ``profile`` (the machine's stored roofline) configure the
    analytical models; the learned ones ignore them."""
    cls = COST_MODELS.get(name)
    if cls is None:
        raise TunelabError(f"unknown cost model {name!r}; cost models are {', '.join(COST_MODELS)}")
    if name in MACHINE_MODELS:
        return cls(seed=seed, nthread=nthread, space=space, profile=profile)
    return cls(seed=seed, nthread=nthread)

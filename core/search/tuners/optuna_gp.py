"""Optuna's Gaussian-process sampler over a template space's knobs (see optuna_samplers).

Optuna's GPSampler fits its process with PyTorch, which tunelab does not require (it is large; only the
optional `baselines` extra installs it). Importing it here, not at the first proposal, makes the
registry say "tuner 'gp' is not available here: No module named 'torch'" when gp is chosen, and the
New-session dialog grey it out, while tpe and cmaes work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import optuna
import torch  # noqa: F401 - GPSampler's dependency, checked when gp is chosen

from tunelab.core.errors import TunerError
from tunelab.core.search.tuners.optuna_samplers import OptunaTuner

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler


class GPTuner(OptunaTuner):
    name = "gp"
    description = (
        "Optuna's Gaussian-process sampler (Bayesian optimisation; needs PyTorch) over the template knobs."
    )
    default_options: ClassVar[dict[str, Any]] = {"n_startup_trials": 16}

    def check_options(self) -> None:
        if int(self.options["n_startup_trials"]) < 0:
            raise TunerError("gp: n_startup_trials must be 0 or more")

    def make_sampler(self, seed: int) -> BaseSampler:
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=int(self.options["n_startup_trials"]))

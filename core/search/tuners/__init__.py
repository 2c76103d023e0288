"""Ask/tell tuning strategies; pick one by name through `tunelab.core.search.tuners.registry`.

Strategy modules are imported lazily by the registry, so importing this package is cheap.
"""

from tunelab.core.search.tuners.base import Observation, Tuner
from tunelab.core.search.tuners.registry import (
    TUNERS,
    get_tuner_class,
    make_tuner,
    recommend_tuner,
    tuner_names,
)

__all__ = [
    "TUNERS",
    "Observation",
    "Tuner",
    "get_tuner_class",
    "make_tuner",
    "recommend_tuner",
    "tuner_names",
]

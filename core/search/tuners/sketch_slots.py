"""A batch's model-picked slots shared among an auto space's sketches (the ``per_sketch`` and
``sketch_trials`` options of the model-guided tuners, xgb and rl).

An auto space's sketches are parts of the space that no mutation leaves (``SearchSpace.region``), and their
limits differ: on the ResNet conv the best kernel of one sketch was 1.26x another's. A search that follows
its cost model alone stays in the sketch of its first good config, whichever it is (xgb: 99 % of the
model's picks in 13 real conv sessions; rl's agents: 243 and 248 of 256 trials in the slowest-limited
sketch in two of three). So each sketch other than the incumbent's (the fastest measured config's) gets
``per_sketch`` of a batch's model-picked slots, its predicted best, and an even share of them until
``sketch_trials`` trials are measured: the model still ranks within a sketch, and the sketches are compared
on measurements. A template space is one part, where nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tunelab.core.errors import TunerError

# The options' defaults (the docstring): measured on xgb (BENCHMARKS.md, "xgb on an auto space's sketches")
# and on rl ("rl's agents and the sketches").
SKETCH_OPTIONS: dict[str, int] = {"per_sketch": 1, "sketch_trials": 64}


def sketch_options(tuner: str, opts: dict[str, Any]) -> tuple[int, int]:
    """(per_sketch, sketch_trials) of resolved options; a negative one is a one-line TunerError."""
    values = []
    for name in SKETCH_OPTIONS:
        value = int(opts[name])
        if value < 0:
            raise TunerError(f"{tuner}: {name} must be 0 or more; got {value}")
        values.append(value)
    return values[0], values[1]


def sketch_picks(
    regions: Sequence[int],
    pred: np.ndarray,
    n: int,
    incumbent: int | None,
    per_sketch: int,
    even_share: bool,
) -> list[int]:
    """Indices of the ``n`` candidates to propose, fastest predicted first.

    ``regions[i]`` is candidate i's sketch and ``pred[i]`` its predicted latency. With ``per_sketch`` > 0
    and an incumbent sketch, first each other sketch its ``per_sketch`` predicted fastest (with
    ``even_share``, while fewer than sketch_trials are measured: ``n`` shared evenly among the sketches the
    candidates hold, if that is more), leaving one slot at least to the prediction alone; then the
    predicted fastest of the rest."""
    order = [int(i) for i in np.argsort(pred, kind="stable")]
    picked: list[int] = []
    if per_sketch and incumbent is not None:
        quota = per_sketch
        if even_share:
            quota = max(quota, n // max(1, len(set(regions))))
        taken: dict[int, int] = {}
        for i in order:
            region = regions[i]
            if region != incumbent and taken.get(region, 0) < quota and len(picked) < n - 1:
                taken[region] = taken.get(region, 0) + 1
                picked.append(i)
    chosen = set(picked)
    picked += [i for i in order if i not in chosen][: n - len(picked)]
    position = {i: rank for rank, i in enumerate(order)}  # order is by prediction, ties stable
    return sorted(picked, key=position.__getitem__)

"""Tuners replayed on real measurements: an exhaustive grid of a GEMM 64^3 template space recorded
on this project's CPU machine (tests/core/data/record_grid.py writes it).

Every config of the space has a measured latency, so each tuner's search can be replayed in
seconds and compared with the true optimum, with the real TemplateSpace (its features included).
"""

from __future__ import annotations

import numpy as np
import pytest
from recorded_spaces import load_recorded

from tunelab.core.search.tuners.registry import make_tuner, tuner_names, tuner_unavailable
from tunelab.core.session.replay import ReplayRunner, replay_tune

BUDGET = 64  # 11 % of the 576 configs
# Smaller candidate pools than the defaults keep feature extraction (a schedule built per scored
# candidate) to seconds.
FAST_OPTIONS = {"xgb": {"pool_size": 64}, "evolutionary": {"population_size": 64}}


@pytest.fixture(scope="module")
def recorded():
    rec = load_recorded("gemm64")
    assert len(rec.table) == 576
    return rec.space, rec.table


def test_recording_is_a_real_measured_space(recorded):
    _, table = recorded
    ok = np.array([v for v in table.values() if v is not None])
    assert len(ok) >= 500
    assert ok.max() / ok.min() > 5  # a space worth searching: the worst is far slower than the best


@pytest.mark.parametrize("name", tuner_names())
def test_tuner_on_recorded_space(recorded, name):
    if why := tuner_unavailable(name):  # an optional dependency missing here (gp: PyTorch)
        pytest.skip(why)
    space, table = recorded
    best = min(v for v in table.values() if v is not None)
    ratios = []
    # MetaSchedule's evolution spends ~0.7 s per generation on features: one run is enough for it.
    for seed in range(1 if name == "evolutionary" else 2):
        tuner = make_tuner(name, space, seed=seed, **FAST_OPTIONS.get(name, {}))
        history = replay_tune(tuner, ReplayRunner(space, table, missing_fails=True), BUDGET, batch=8)
        tuner.close()
        keys = [space.key(o.config) for o in history]
        assert len(keys) == len(set(keys)) and len(keys) <= BUDGET
        for o in history:
            space.check_config(o.config)
        found = min(o.latency_ms for o in history if o.latency_ms is not None)
        ratios.append(found / best)
    print(f"{name}: best found / true best per seed = {[round(r, 2) for r in ratios]}")
    assert min(ratios) >= 1.0
    if name in ("xgb", "genetic", "evolutionary"):
        # Model- or population-guided search finds a config within 25 % of the optimum of a space
        # it sees 11 % of (random search would in ~40 % of runs; these do in most).
        assert float(np.median(ratios)) <= 1.25, ratios

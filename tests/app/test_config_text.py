"""An auto-space config reads the same in every table, with its parallel-extent limit where MetaSchedule's
MutateParallel changed it (tunelab.core.search.space.auto); a knob config stays key=value."""

from __future__ import annotations

from tunelab.app.views.trials.model import _SummaryCache
from tunelab.app.widgets.formatting import config_summary, flatten_config

PLAIN = {"sketch": 1, "decisions": [[4, 8, 2, 1], 2, None]}
LIMITED = {**PLAIN, "parallel": [8]}


def test_an_auto_config_is_its_sketch_and_decisions_and_its_limit_where_it_has_one():
    assert config_summary(PLAIN) == "sketch 1: [4,8,2,1] 2"
    assert config_summary(LIMITED) == "sketch 1: [4,8,2,1] 2 parallel≤8"
    assert flatten_config(LIMITED) == {
        "sketch": 1,
        "decision 0": [4, 8, 2, 1],
        "decision 1": 2,
        "decision 2": None,
        "parallel limit 0": 8,
    }
    knobs = {"tile_i": [8], "unroll": True}
    assert config_summary(knobs) == "tile_i=[8] unroll=on" and flatten_config(knobs) == knobs


def test_the_trials_table_writes_them_as_the_other_tables_do():
    configs = [PLAIN, LIMITED, {"tile_i": [8], "parallel": 4}]
    assert _SummaryCache().many(configs) == [
        "sketch 1: [4,8,2,1] 2",
        "sketch 1: [4,8,2,1] 2 parallel≤8",
        "tile_i=[8] parallel=4",
    ]

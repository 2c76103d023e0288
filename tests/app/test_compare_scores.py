"""Compare view: each session's tuner score against random search, on real sessions in a real store.

The store holds real LLVM sessions of GEMM 32^3 on one small edited template space (6 configs): a grid
session that measured all of it and two genetic ones, beside a random-search session whose trials are the
grid's figures, slowest first. The expected scores are worked out here by brute force over every subset of
the grid's table, not with the code under test.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from tunelab.app.views.compare import CompareView
from tunelab.core.records import MeasureOptions, NewTrial, SessionSpec
from tunelab.core.search.space.base import config_key
from tunelab.core.store import Store

KNOBS = {
    "tile_i": [[1], [8]],
    "tile_j": [[8]],
    "tile_k": [[1], [8], [32]],
    "order": ["ro,si,ri"],
    "unroll": [0],
    "vectorize": [True],
    "parallel": [True],
}
SIZE = 6


# As tests/app/conftest.py's small sessions measure: fast, no cool-down.
MEASURE = MeasureOptions(number=1, repeat=2, min_repeat_ms=1, cooldown_s=0, confirm_runs=0)


def small_spec(**changes) -> SessionSpec:
    values = dict(
        workload="gemm",
        shape={"M": 32, "N": 32, "K": 32},
        target="llvm",
        space_kind="template",
        measure=MEASURE,
    )
    return SessionSpec(**(values | changes))


def add_auto_session(store: Store) -> int:
    """An auto-space session as MetaSchedule's search stores one (a trace's decisions, no knobs), with one
    measured trial; written through the store's own API."""
    auto_id = store.create_session(
        small_spec(space_kind="auto", tuner="evolutionary", name="auto"),
        target_json={"kind": "llvm"},
        target_kind="llvm",
        space_json={"kind": "auto", "rules": ["multi_level_tiling"]},
        tvm_version="test",
        flops=2.0 * 32**3,
    )
    now = time.time()
    trial = NewTrial(
        round=0,
        config={"sketch": 0, "decisions": [[4, 8], [2, 16]]},
        status="ok",
        error=None,
        samples_ms=(0.01, 0.011),
        predicted_ms=None,
        build_s=0.1,
        run_s=0.1,
        started_at=now,
        finished_at=now + 0.2,
    )
    store.add_trial(auto_id, trial, config_key="auto-0")
    return auto_id


@pytest.fixture(scope="module")
def scored_db(tmp_path_factory):
    from tunelab.core.session.loop import check_spec, create_session

    space = check_spec(small_spec()).space
    data = space.to_json()
    for knob in data["knobs"]:
        knob["candidates"] = KNOBS[knob["name"]]
    path = tmp_path_factory.mktemp("scores") / "scores.sqlite"
    ids = {}
    with Store(path) as store:
        for label, tuner, trials, seed in (
            ("grid", "grid", SIZE, 0),
            ("genetic", "genetic", 4, 0),
            ("genetic2", "genetic", 3, 1),
        ):
            spec = small_spec(tuner=tuner, trials=trials, batch=3, seed=seed, space=data, name=label)
            session = create_session(store, spec)
            for _ in session.run():
                pass
            ids[label] = session.session_id
        ids["random"] = add_random_session(store, ids["grid"], data)
        ids["auto"] = add_auto_session(store)
    return path, ids


def add_random_session(store: Store, grid_id: int, space: dict) -> int:
    """A random-search session of the same space, written through the store's API with the grid session's
    measured figures of the four slowest configs, slowest first. A real random session of 4 trials on this
    6-config space holds the best figure of all from its first trial in some runs (noise decides between
    configs a few percent apart): then there is nothing to score against it, which is a true answer but
    not the one this test asks for."""
    grid = store.session(grid_id)
    random_id = store.create_session(
        small_spec(tuner="random", trials=4, batch=3, seed=0, space=space, name="random"),
        target_json=grid.target,
        target_kind=grid.target_kind,
        space_json=grid.space,
        tvm_version=grid.tvm_version,
        flops=grid.flops,
    )
    measured = sorted(
        (t for t in store.trials(grid_id, with_samples=True) if t.ok and t.latency_ms is not None),
        key=lambda t: -(t.latency_ms or 0.0),
    )
    now = time.time()
    for i, t in enumerate(measured[:4]):
        trial = NewTrial(
            round=i // 3,
            config=t.config,
            status="ok",
            error=None,
            samples_ms=tuple(t.samples_ms or (t.latency_ms,)),
            predicted_ms=None,
            build_s=0.1,
            run_s=0.1,
            started_at=now + i,
            finished_at=now + i + 0.5,
        )
        store.add_trial(random_id, trial, config_key=config_key(t.config))
    store.set_status(random_id, "finished")
    return random_id


@pytest.fixture
def scored(scored_db):
    path, ids = scored_db
    store = Store(path)
    yield store, ids
    store.close()


def summary(view: CompareView) -> dict[str, list[str]]:
    table = view.summary_table
    rows = {}
    for r in range(table.rowCount()):
        rows[table.verticalHeaderItem(r).text()] = [
            table.item(r, c).text() for c in range(table.columnCount())
        ]
    return rows


def score_row(rows: dict[str, list[str]]) -> list[str]:
    (name,) = [n for n in rows if n.startswith("Score vs random")]
    return rows[name]


def brute_force_score(table: dict[str, float | None], path: list[float | None], budget: int) -> float:
    """Willemsen's P(t) averaged over t = 1..budget, f_random(t) the mean over every t-subset of the table."""
    values = list(table.values())
    ok = [v for v in values if v is not None]
    best, worst = min(ok), max(ok)
    scores = []
    for t in range(1, budget + 1):
        subsets = [[v for v in s if v is not None] for s in itertools.combinations(values, t)]
        f_random = float(np.mean([min(s) if s else worst for s in subsets]))
        found = [v for v in path[:t] if v is not None]
        f_tuner = min(found) if found else worst
        if f_random - best > 1e-9 * best:
            scores.append((f_random - f_tuner) / (f_random - best))
    return float(np.mean(scores))


def test_sessions_on_an_exhaustively_measured_space_are_scored_against_calculated_random(qtbot, scored):
    store, ids = scored
    order = [ids["grid"], ids["random"], ids["genetic"]]
    grid = store.trials(ids["grid"])
    assert len({config_key(t.config) for t in grid}) == SIZE  # the grid session measured every config
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    view.set_checked(order)
    text = view.score_label.text()
    assert f"#{ids['grid']}'s exhaustive space ({SIZE} configs)" in text, text
    budget = 4  # the common budget: the fewest trials of the ticked sessions
    assert f"first {budget} trials" in text
    rows = summary(view)
    table = {config_key(t.config): (t.latency_ms if t.ok else None) for t in grid}
    for col, sid in enumerate(sorted(order)):
        path = [table[config_key(t.config)] for t in store.trials(sid)]
        expected = brute_force_score(table, path, budget)
        shown = score_row(rows)[col]
        assert shown.split()[0] == f"{expected:+.2f}", (sid, shown, expected)
    assert score_row(rows)[sorted(order).index(ids["grid"])].endswith("(reference)")


def test_a_random_session_is_the_reference_where_no_space_was_measured_whole(qtbot, scored):
    store, ids = scored
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    view.set_checked([ids["random"], ids["genetic"]])
    assert f"random-search session #{ids['random']}" in view.score_label.text()
    cells = dict(zip(sorted([ids["random"], ids["genetic"]]), score_row(summary(view)), strict=True))
    # The reference scored against itself: 0 wherever random search has not yet found the best known.
    assert cells[ids["random"]] in ("+0.00 (reference)", "— (reference)")
    assert cells[ids["genetic"]] != "—"


def test_without_an_exhaustive_space_or_a_random_session_it_says_why(qtbot, scored):
    store, ids = scored
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    view.set_checked([ids["genetic"], ids["genetic2"]])
    assert "none is a random-search session" in view.score_label.text()
    assert set(score_row(summary(view))) == {"—"}


def test_best_trial_is_numbered_within_its_session_from_one(qtbot, scored):
    store, ids = scored
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    chosen = sorted([ids["random"], ids["genetic"]])
    view.set_checked(chosen)
    shown = summary(view)["Best trial"]
    for col, sid in enumerate(chosen):
        best = store.best_trial(sid)
        assert shown[col] == str(best.index + 1)
        assert 1 <= int(shown[col]) <= store.session(sid).n_trials
    # These sessions come after the grid's: their store ids are not their numbers.
    assert any(store.best_trial(s).id != store.best_trial(s).index + 1 for s in chosen)
    # The best-so-far curves count trials the same way: the first trial is trial 1.
    for curve, sid in zip(view.by_trial.listDataItems(), chosen, strict=True):
        first_ok = next(t.index for t in store.trials(sid) if t.ok)
        assert curve.xData[0] == first_ok + 1 and curve.xData[-1] == store.session(sid).n_trials


def test_a_template_session_and_an_auto_session_are_not_diffed_knob_by_knob(qtbot, scored):
    store, ids = scored
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    view.set_checked([ids["genetic"], ids["auto"]])
    assert view.diff_label.text() == "Best configs not comparable: different spaces (auto and template)."
    assert view.diff_table.rowCount() == 0
    assert "not comparable, different spaces" in view.score_label.text()
    view.set_checked([ids["genetic"], ids["random"]])  # two template sessions: diffed again
    assert "knobs differ" in view.diff_label.text() and view.diff_table.rowCount() == len(KNOBS)

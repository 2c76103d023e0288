"""Compare view: each session's tuner score against random search, on real sessions in a real store.

The store holds sessions of GEMM 64^3 on one small edited template space (6 configs) with the latencies a
real LLVM machine measured for them (tests/core/data/gemm64_grid_llvm.json, an exhaustive recording): a
grid session that measured all of it and two genetic ones (the real tuners, replayed on the recording),
beside a random-search session whose trials are the grid's figures, slowest first. The expected scores are
worked out here by brute force over every subset of the grid's table, not with the code under test.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from recorded_spaces import RecordedSpace, load_recorded

from tests.core.specs import quick_spec
from tests.core.stores import add_session, new_trial, open_built
from tunelab.app.views.compare import CompareView
from tunelab.core.records import Config, SessionSpec
from tunelab.core.search.space.base import SearchSpace, config_key
from tunelab.core.search.tuners.registry import make_tuner
from tunelab.core.session.replay import ReplayRunner, replay_tune
from tunelab.core.store import Store

RECORDING = "gemm64"
KNOBS = {
    "tile_i": [[1], [16]],
    "tile_j": [[16]],
    "tile_k": [[1], [8], [64]],
    "order": ["ro,si,ri"],
    "unroll": [0],
    "vectorize": [True],
    "parallel": [True],
}
SIZE = 6


def add_auto_session(store: Store, shape: dict[str, int]) -> int:
    """An auto-space session of ``shape`` as MetaSchedule's search stores one (a trace's decisions, no
    knobs), with one measured trial; written through the store's own API."""
    auto_id = add_session(
        store,
        quick_spec(shape=shape, space_kind="auto", tuner="evolutionary", name="auto"),
        space_json={"kind": "auto", "rules": ["multi_level_tiling"]},
        flops=2.0 * shape["M"] * shape["N"] * shape["K"],
    )
    trial = new_trial({"sketch": 0, "decisions": [[4, 8], [2, 16]]}, (0.01, 0.011))
    store.add_trial(auto_id, trial, config_key="auto-0")
    return auto_id


def add_recorded_session(
    store: Store, recording: RecordedSpace, spec: SessionSpec, space: SearchSpace, configs: list[Config]
) -> int:
    """A finished session of ``spec`` that measured ``configs`` in this order, in rounds of ``spec.batch``,
    each at the latency the recording holds for it; written through the store's API."""
    session_id = add_session(
        store,
        spec,
        target_json=recording.doc["target"],
        space_json=space.to_json(),
        tvm_version="recorded",
        flops=2.0 * spec.shape["M"] * spec.shape["N"] * spec.shape["K"],
    )
    now = time.time()
    for i, config in enumerate(configs):
        ms = recording.table[recording.space.key(config)]
        trial = new_trial(config, (ms,), round=i // spec.batch, started_at=now + i, finished_at=now + i + 0.5)
        store.add_trial(session_id, trial, config_key=config_key(config))
    store.set_status(session_id, "finished")
    return session_id


def replayed(
    recording: RecordedSpace, space: SearchSpace, tuner: str, trials: int, batch: int, seed: int
) -> list[Config]:
    """The configs the real ``tuner`` measures on ``space``, in order, when the recording answers them."""
    every = [space.point(i) for i in range(space.size)]
    runner = ReplayRunner(space, {space.key(c): recording.table[recording.space.key(c)] for c in every})
    return [o.config for o in replay_tune(make_tuner(tuner, space, seed=seed), runner, trials, batch)]


@pytest.fixture(scope="module")
def scored_db(tmp_path_factory):
    from tunelab.core.session.loop import check_spec

    recording = load_recorded(RECORDING)
    shape = recording.doc["shape"]
    data = check_spec(quick_spec(shape=shape)).space.to_json()
    for knob in data["knobs"]:
        knob["candidates"] = KNOBS[knob["name"]]
    space = check_spec(quick_spec(shape=shape, space=data)).space
    assert space.size == SIZE
    path = tmp_path_factory.mktemp("scores") / "scores.sqlite"
    ids = {}
    with Store(path) as store:
        for label, tuner, trials, seed in (
            ("grid", "grid", SIZE, 0),
            ("genetic", "genetic", 4, 0),
            ("genetic2", "genetic", 3, 1),
        ):
            spec = quick_spec(
                shape=shape, tuner=tuner, trials=trials, batch=3, seed=seed, space=data, name=label
            )
            ids[label] = add_recorded_session(
                store, recording, spec, space, replayed(recording, space, tuner, trials, 3, seed)
            )
        grid = store.trials(ids["grid"])
        slowest = sorted(grid, key=lambda t: -(t.latency_ms or 0.0))[:4]
        # A random-search session of the same space that measured the four slowest configs, slowest first:
        # a random session holding the best figure of all from its first trial leaves nothing to score against
        # it, which is a true answer but not the one this test asks for.
        ids["random"] = add_recorded_session(
            store,
            recording,
            quick_spec(shape=shape, tuner="random", trials=4, batch=3, space=data, name="random"),
            space,
            [t.config for t in slowest],
        )
        ids["auto"] = add_auto_session(store, shape)
    return path, ids


@pytest.fixture
def scored(scored_db):
    yield from open_built(scored_db)


def compare(qtbot, store: Store, checked: list[int]) -> CompareView:
    """The Compare view shown with ``checked`` ticked."""
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    view.set_checked(checked)
    qtbot.waitUntil(lambda: not view.scores_pending(), timeout=60_000)  # worked out in a worker
    return view


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
    view = compare(qtbot, store, order)
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
    view = compare(qtbot, store, [ids["random"], ids["genetic"]])
    assert f"random-search session #{ids['random']}" in view.score_label.text()
    cells = dict(zip(sorted([ids["random"], ids["genetic"]]), score_row(summary(view)), strict=True))
    # The reference scored against itself: 0 wherever random search has not yet found the best known.
    assert cells[ids["random"]] in ("+0.00 (reference)", "— (reference)")
    assert cells[ids["genetic"]] != "—"


def test_without_an_exhaustive_space_or_a_random_session_it_says_why(qtbot, scored):
    store, ids = scored
    view = compare(qtbot, store, [ids["genetic"], ids["genetic2"]])
    assert "none is a random-search session" in view.score_label.text()
    assert set(score_row(summary(view))) == {"—"}


def test_best_trial_is_numbered_within_its_session_from_one(qtbot, scored):
    store, ids = scored
    chosen = sorted([ids["random"], ids["genetic"]])
    view = compare(qtbot, store, chosen)
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
    view = compare(qtbot, store, [ids["genetic"], ids["auto"]])
    assert view.diff_label.text() == "Best configs not comparable: different spaces (auto and template)."
    assert view.diff_table.rowCount() == 0
    assert "not comparable, different spaces" in view.score_label.text()
    view.set_checked([ids["genetic"], ids["random"]])  # two template sessions: diffed again
    assert "knobs differ" in view.diff_label.text() and view.diff_table.rowCount() == len(KNOBS)

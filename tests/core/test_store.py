"""The SQLite store, on real files: roundtrips, migrations, refusal of foreign files, concurrent readers."""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tunelab.core.store.schema as store_module
from tunelab.core.errors import StoreError
from tunelab.core.records import MeasureOptions, NewTrial, SessionSpec
from tunelab.core.store import MIGRATIONS, TRIAL_FLOAT_COLUMNS, Store, default_db_path

REPO = Path(__file__).resolve().parents[2]


def make_spec(**overrides) -> SessionSpec:
    fields = {
        "workload": "matmul",
        "shape": {"M": 64, "N": 64, "K": 32},
        "tuner": "xgb",
        "tuner_options": {"plan_size": 16},
        "trials": 100,
        "batch": 4,
        "early_stop": 20,
        "seed": 7,
        "measure": MeasureOptions(repeat=5, cache_flush=True),
        "name": "first",
    }
    fields.update(overrides)
    return SessionSpec(**fields)


def new_session(store: Store, **overrides) -> int:
    return store.create_session(
        make_spec(**overrides),
        target_json={"kind": "llvm", "mcpu": "skylake"},
        target_kind="llvm",
        space_json={"knobs": {"tile_i": [1, 2, 4]}},
        tvm_version="0.27.0",
        flops=2 * 64 * 64 * 32,
    )


def make_trial(samples=(1.0, 2.0, 3.0), *, status="ok", round=0, config=None, trace=None) -> NewTrial:
    return NewTrial(
        round=round,
        config=config if config is not None else {"tile_i": [4], "unroll": 16},
        status=status,
        error=None if status == "ok" else "boom",
        samples_ms=tuple(samples),
        predicted_ms=1.5,
        build_s=0.25,
        run_s=0.5,
        started_at=1000.0,
        finished_at=1001.0,
        trace_json=trace,
    )


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tunelab.sqlite"


@pytest.fixture
def store(db_path: Path):
    with Store(db_path) as s:
        yield s


# ------------------------------------------------------------------------------------------ roundtrip


def test_session_roundtrip(store: Store) -> None:
    sid = new_session(store, custom_source="def f(): pass\n")
    rec = store.session(sid)
    assert rec.id == sid
    assert rec.name == "first"
    assert rec.workload == "matmul"
    assert rec.shape == {"M": 64, "N": 64, "K": 32}
    assert rec.dtype == "float32"
    assert rec.target == {"kind": "llvm", "mcpu": "skylake"}
    assert rec.target_kind == "llvm"
    assert rec.space_kind == "template"
    assert rec.space == {"knobs": {"tile_i": [1, 2, 4]}}
    assert rec.tuner == "xgb"
    assert rec.tuner_options == {"plan_size": 16}
    assert MeasureOptions.from_json(rec.measure) == MeasureOptions(repeat=5, cache_flush=True)
    assert (rec.trials_budget, rec.batch, rec.early_stop, rec.seed) == (100, 4, 20, 7)
    assert rec.status == "created" and rec.error is None
    assert rec.pid == os.getpid() and rec.hostname
    assert rec.tvm_version == "0.27.0"
    assert rec.flops == 2 * 64 * 64 * 32
    assert rec.custom_source == "def f(): pass\n"
    assert (rec.n_trials, rec.n_failed, rec.best_ms, rec.best_trial_id) == (0, 0, None, None)
    assert rec.best_gflops is None
    assert store.sessions() == [rec]
    assert store.session_updated_at(sid) == rec.updated_at
    # one task per session
    task = store.db.execute("SELECT session_id, workload, shape, dtype, flops FROM tasks").fetchall()
    assert task == [
        (sid, "matmul", json.dumps({"M": 64, "N": 64, "K": 32}, separators=(",", ":")), "float32", rec.flops)
    ]


def test_trials_roundtrip_with_samples_and_statistics(store: Store) -> None:
    sid = new_session(store)
    trace = {"insts": [["split", [1, 2]]], "decisions": [[0, [4, 8]]]}
    a = store.add_trial(sid, make_trial((3.0, 1.0, 2.0, 10.0), config={"tile_i": [2]}, trace=trace), "a")
    b = store.add_trial(sid, make_trial((0.5,), round=1, config={"tile_i": [4]}), "b")
    c = store.add_trial(sid, make_trial((), status="build_error", round=1, config={"tile_i": [8]}), "c")

    assert [t.index for t in (a, b, c)] == [0, 1, 2]
    assert a.latency_ms == 2.5  # median of an even count
    assert a.mean_ms == 4.0
    assert a.std_ms == pytest.approx(statistics.pstdev([3.0, 1.0, 2.0, 10.0]))
    assert (a.min_ms, a.max_ms) == (1.0, 10.0)
    assert a.samples_ms == (3.0, 1.0, 2.0, 10.0)  # measurement order kept
    assert b.latency_ms == 0.5 and b.std_ms == 0.0
    assert c.latency_ms is None and c.std_ms is None and c.error == "boom" and not c.ok

    stored = store.trials(sid, with_samples=True)
    assert stored == [a, b, c]  # what add_trial returned is exactly what a reader gets
    assert stored[0].trace_json == trace and stored[0].config == {"tile_i": [2]}
    assert [t.samples_ms for t in store.trials(sid)] == [(), (), ()]
    assert store.trials(sid, since_id=a.id) == store.trials(sid)[1:]
    assert store.trial(a.id) == a
    assert store.samples(a.id) == [3.0, 1.0, 2.0, 10.0]
    assert store.best_trial(sid) == b
    assert store.measured_keys(sid) == {"a", "b", "c"}
    assert store.max_trial_id() == c.id

    rec = store.session(sid)
    assert (rec.n_trials, rec.n_failed, rec.best_ms, rec.best_trial_id) == (3, 1, 0.5, b.id)
    assert rec.best_gflops == pytest.approx(rec.flops / 0.5e-3 / 1e9)


# Sample sets whose quartiles fall between samples (linear interpolation decides them), on samples
# (a single one, ties), and a wide outlier: NumPy's percentile is the reference.
QUARTILE_CASES = (
    (3.0, 1.0, 2.0, 10.0),
    (0.5,),
    (2.0, 2.0, 2.0),
    (1.0, 2.0, 3.0, 4.0, 5.0),
    (0.011, 0.0102, 0.0125, 0.0101, 0.0108, 0.0107, 0.5),
)


def test_trial_quartiles_are_numpys_linear_percentiles_of_the_samples(store: Store) -> None:
    import numpy as np

    sid = new_session(store)
    added = [
        store.add_trial(sid, make_trial(samples, config={"i": i}), f"q{i}")
        for i, samples in enumerate(QUARTILE_CASES)
    ]
    failed = store.add_trial(sid, make_trial((), status="run_error", config={"i": -1}), "failed")
    columns = store.trial_columns(sid)
    for row, (trial, samples) in enumerate(zip(added, QUARTILE_CASES, strict=False)):
        q1, q3 = np.percentile(np.asarray(samples), [25, 75])  # method="linear", NumPy's default
        for read in (trial, store.trial(trial.id), store.trials(sid)[row]):
            assert read.q1_ms == pytest.approx(q1, rel=1e-12) and read.q3_ms == pytest.approx(q3, rel=1e-12)
            assert read.iqr_ms == pytest.approx(q3 - q1, rel=1e-12, abs=1e-15)
        assert (columns["q1_ms"][row], columns["q3_ms"][row]) == (trial.q1_ms, trial.q3_ms)
    assert added[0].q1_ms == 1.75 and added[0].q3_ms == 4.75  # between samples: 1 + 0.75, 3 + 1.75
    assert added[1].iqr_ms == 0.0 and added[2].iqr_ms == 0.0
    assert failed.q1_ms is None and failed.q3_ms is None and failed.iqr_ms is None
    assert np.isnan(columns["q1_ms"][-1]) and np.isnan(columns["q3_ms"][-1])
    assert store.trials(sid)[-1] == failed


def _assert_columns_match(columns: dict, trials: list) -> None:
    """Store.trial_columns holds, field by field, what Store.trials returns for the same trials."""
    import math

    import numpy as np

    from tunelab.core.records import TRIAL_STATUSES
    from tunelab.core.store import TRIAL_COLUMNS

    assert tuple(columns) == TRIAL_COLUMNS
    assert all(len(column) == len(trials) for column in columns.values())
    assert columns["id"].dtype == np.int64 and columns["status"].dtype == np.int8
    for row, t in enumerate(trials):
        for name in ("id", "index", "round"):
            assert int(columns[name][row]) == getattr(t, name)
        assert TRIAL_STATUSES[columns["status"][row]] == t.status
        assert bool(columns["ok"][row]) == t.ok
        for name in TRIAL_FLOAT_COLUMNS:
            value, expected = float(columns[name][row]), getattr(t, name)
            assert math.isnan(value) if expected is None else value == expected, (name, row)
        assert int(columns["task_id"][row]) == (-1 if t.task_id is None else t.task_id)
        assert columns["error"][row] == t.error and columns["device"][row] == t.device


def test_trial_columns_match_trials_field_by_field(store: Store) -> None:
    sid = new_session(store)
    other = new_session(store, name="other")
    added = []
    for i in range(40):
        status = ("ok", "build_error", "run_error", "timeout", "wrong_result")[i % 5] if i % 3 else "ok"
        samples = () if status in ("build_error", "run_error", "timeout") else (1.0 + i, 2.0 + i, 0.5 * i + 1)
        trial = make_trial(samples, status=status, round=i // 8, config={"i": i, "tile": [i, 2]})
        if i % 7 == 0:  # no prediction (the first round's trials have none)
            trial = NewTrial(**{**trial.__dict__, "predicted_ms": None})
        if i % 11 == 0 and status == "ok":  # an ok trial may still carry a note in `error`
            trial = NewTrial(**{**trial.__dict__, "error": "note"})
        if i % 6 == 1:  # measured by an RPC server
            trial = NewTrial(**{**trial.__dict__, "device": f"127.0.0.1:{9090 + i % 2}"})
        added.append(store.add_trial(sid, trial, f"k{i}"))
        if i % 4 == 0:  # another session's trials interleave: never in this session's columns
            store.add_trial(other, make_trial(config={"other": i}), f"o{i}")
    trials = store.trials(sid)
    assert [t.id for t in trials] == [t.id for t in added]
    assert any(not t.ok for t in trials) and any(t.predicted_ms is None for t in trials)
    assert any(t.latency_ms is None for t in trials) and any(t.ok and t.error for t in trials)
    assert any(t.device for t in trials) and any(t.device is None for t in trials)
    _assert_columns_match(store.trial_columns(sid), trials)
    for since in (0, trials[0].id, trials[17].id, trials[-2].id, trials[-1].id, store.max_trial_id() + 5):
        _assert_columns_match(store.trial_columns(sid, since_id=since), store.trials(sid, since_id=since))
    empty = new_session(store, name="empty")
    _assert_columns_match(store.trial_columns(empty), [])
    with pytest.raises(StoreError):
        store.trial_columns(99_999)

    # Configs on demand: some or all of a session's, never another session's.
    configs = store.trial_configs(sid)
    assert configs == {t.id: t.config for t in trials}
    some = [trials[3].id, trials[30].id]
    assert store.trial_configs(sid, some) == {i: configs[i] for i in some}
    other_id = store.trials(other)[0].id
    assert store.trial_configs(sid, [other_id, trials[0].id]) == {trials[0].id: trials[0].config}
    many = [t.id for t in trials] * 30  # more ids than one statement takes
    assert store.trial_configs(sid, many) == configs


def test_session_stamps_and_sessions_with_new_trials(store: Store) -> None:
    a, b = new_session(store), new_session(store, name="b")
    stamps = store.session_stamps()
    assert set(stamps) == {a, b} and stamps[a] == store.session_updated_at(a)
    first = store.add_trial(a, make_trial(config={"x": 1}), "x1")
    assert store.sessions_with_trials_after(0) == {a}
    store.add_trial(b, make_trial(config={"x": 2}), "x2")
    assert store.sessions_with_trials_after(first.id) == {b}
    assert store.sessions_with_trials_after(store.max_trial_id()) == set()
    time.sleep(0.01)
    store.heartbeat(b)
    assert store.session_stamps()[b] > stamps[b] and store.session_stamps()[a] == stamps[a]


def test_rounds_status_heartbeat_tuner_state_delete(store: Store) -> None:
    sid = new_session(store)
    other = new_session(store, name="second")
    store.add_round(sid, 0, 4, 0.8, 1.5)
    store.add_round(sid, 1, 4, None, 1.2)
    store.add_round(sid, 1, 3, float("nan"), 1.1)  # a redone round replaces the earlier record
    rounds = store.rounds(sid)
    assert [(r.round, r.n, r.spearman, r.best_ms) for r in rounds] == [(0, 4, 0.8, 1.5), (1, 3, None, 1.1)]
    assert store.rounds(other) == []

    assert store.tuner_state(sid) is None
    state = {"rng": {"state": 2**127 + 5, "inc": 3}, "plan": [1, 2]}
    store.save_tuner_state(sid, state)
    assert store.tuner_state(sid) == state

    store.set_status(sid, "running")
    assert store.session(sid).status == "running"
    store.set_status(sid, "crashed", error="Traceback ...")
    assert (store.session(sid).status, store.session(sid).error) == ("crashed", "Traceback ...")
    store.set_status(sid, "paused")
    assert store.session(sid).error is None
    with pytest.raises(ValueError):
        store.set_status(sid, "exploded")
    before = store.session_updated_at(sid)
    time.sleep(0.01)
    store.heartbeat(sid)
    assert store.session_updated_at(sid) > before

    store.add_trial(sid, make_trial(), "k")
    store.add_trial(other, make_trial(), "k")  # keys are unique per session only
    max_id = store.max_trial_id()
    store.delete_session(sid)
    assert [s.id for s in store.sessions()] == [other]
    for table in ("trials", "tasks", "rounds"):
        assert (
            store.db.execute(f"SELECT count(*) FROM {table} WHERE session_id = ?", (sid,)).fetchone()[0] == 0
        )
    assert store.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 3  # only the other session's
    assert store.max_trial_id() == max_id  # never goes back: views polling it miss nothing
    with pytest.raises(StoreError):
        store.delete_session(sid)


def test_sessions_newest_first(store: Store) -> None:
    ids = [new_session(store, name=f"s{i}") for i in range(3)]
    assert [s.id for s in store.sessions()] == ids[::-1]


def test_unknown_session_and_trial(store: Store, db_path: Path) -> None:
    with pytest.raises(StoreError, match=f"session 7 does not exist in {db_path}"):
        store.session(7)
    for call in (
        lambda: store.trials(7),
        lambda: store.best_trial(7),
        lambda: store.rounds(7),
        lambda: store.measured_keys(7),
        lambda: store.tuner_state(7),
        lambda: store.session_updated_at(7),
        lambda: store.set_status(7, "running"),
        lambda: store.heartbeat(7),
        lambda: store.add_trial(7, make_trial(), "k"),
        lambda: store.add_round(7, 0, 1, None, None),
        lambda: store.save_tuner_state(7, {}),
    ):
        with pytest.raises(StoreError, match="session 7 does not exist"):
            call()
    with pytest.raises(StoreError, match="trial 3 does not exist"):
        store.trial(3)
    with pytest.raises(StoreError, match="trial 3 does not exist"):
        store.samples(3)
    assert store.db.execute("SELECT count(*) FROM trials").fetchone()[0] == 0


def test_duplicate_config_key_writes_nothing(store: Store) -> None:
    sid = new_session(store)
    first = store.add_trial(sid, make_trial((1.0, 2.0)), "same")
    with pytest.raises(StoreError, match="already measured"):
        store.add_trial(sid, make_trial((5.0, 6.0, 7.0)), "same")
    assert store.trials(sid, with_samples=True) == [first]
    assert store.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 2
    assert store.add_trial(sid, make_trial((3.0,)), "other").index == 1  # no gap in indexes


def test_failure_while_writing_samples_rolls_back_the_trial(store: Store, db_path: Path) -> None:
    sid = new_session(store)
    with sqlite3.connect(db_path) as raw:
        raw.execute(
            "CREATE TRIGGER no_negative BEFORE INSERT ON samples WHEN NEW.ms < 0 "
            "BEGIN SELECT RAISE(ABORT, 'negative sample'); END"
        )
    raw.close()
    with pytest.raises(StoreError, match="negative sample"):
        store.add_trial(sid, make_trial((1.0, 2.0, -1.0)), "bad")
    assert store.trials(sid) == []
    assert store.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 0
    assert store.add_trial(sid, make_trial((1.0,)), "good").index == 0


def test_trial_validation(store: Store) -> None:
    sid = new_session(store)
    with pytest.raises(ValueError):
        store.add_trial(sid, make_trial(status="weird"), "a")
    with pytest.raises(ValueError):
        store.add_trial(sid, make_trial(()), "a")  # ok without samples


# ------------------------------------------------------------------------------------------ opening


def test_file_settings(store: Store) -> None:
    conn = store.db.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert {"meta", "sessions", "tasks", "trials", "samples", "rounds"} <= set(store.db.table_names())
    assert {"idx_trials_session_id", "idx_trials_session_key", "idx_samples_trial"} <= {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }


def test_migrations_apply_once(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(db_path) as s:
        assert s.schema_version() == len(MIGRATIONS) == store_module.schema_version()

    calls = []

    def v_next(db) -> None:
        calls.append(1)
        db.execute("CREATE TABLE baselines (id INTEGER PRIMARY KEY, name TEXT)")

    monkeypatch.setattr(store_module, "MIGRATIONS", [*MIGRATIONS, v_next])
    with Store(db_path) as s:
        assert s.schema_version() == len(MIGRATIONS) + 1
        assert "baselines" in s.db.table_names()
    with Store(db_path) as s:  # re-opening applies nothing
        assert s.schema_version() == len(MIGRATIONS) + 1
    assert calls == [1]

    monkeypatch.undo()  # older code meets a newer file: refuse, change nothing
    before = db_path.read_bytes()
    with pytest.raises(StoreError, match="newer tunelab"):
        Store(db_path)
    assert db_path.read_bytes() == before


# How the trials table was written before the quartiles were stored (schema 5's add_trial).
_OLD_TRIAL_INSERT = """INSERT INTO trials (session_id, task_id, idx, round, config, config_key, status, error,
    latency_ms, mean_ms, std_ms, min_ms, max_ms, predicted_ms, build_s, run_s, started_at, finished_at,
    trace_json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""


def test_quartiles_migration_backfills_an_older_store(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from tunelab.core.stats import quartiles, summarize

    before = MIGRATIONS.index(store_module._v6_trial_quartiles)  # the schema just before the quartiles
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:before])
    cases = (*QUARTILE_CASES, ())  # the last: a trial that failed before it was timed
    with Store(db_path) as old:
        assert old.schema_version() == before
        assert "q1_ms" not in {c.name for c in old.db["trials"].columns}
        sid, other = new_session(old), new_session(old, name="other")
        task = {
            s: old.db.execute("SELECT id FROM tasks WHERE session_id = ?", (s,)).fetchone()[0]
            for s in (sid, other)
        }
        with old.db.conn:
            for i, samples in enumerate(cases):
                for session in (sid, other):
                    figures = summarize(samples)
                    stats = (
                        (None,) * 5
                        if figures is None
                        else (figures.median, figures.mean, figures.std, figures.min, figures.max)
                    )
                    cur = old.db.conn.execute(
                        _OLD_TRIAL_INSERT,
                        (
                            session,
                            task[session],
                            i,
                            0,
                            json.dumps({"i": i}),
                            f"k{i}",
                            "ok" if samples else "run_error",
                            None if samples else "boom",
                            *stats,
                            None,
                            0.1,
                            0.2,
                            1000.0,
                            1001.0,
                            None,
                        ),
                    )
                    old.db.conn.executemany(
                        "INSERT INTO samples (trial_id, idx, ms) VALUES (?, ?, ?)",
                        [(cur.lastrowid, k, ms) for k, ms in enumerate(samples)],
                    )
        rows_before = old.db.execute("SELECT * FROM trials ORDER BY id").fetchall()
    monkeypatch.undo()
    # Batches of two: the back-fill's updates are written while its read of the samples goes on.
    monkeypatch.setattr(store_module, "_BACKFILL_BATCH", 2)

    with Store(db_path) as s:
        assert s.schema_version() == len(MIGRATIONS)
        names = [c.name for c in s.db["trials"].columns]
        assert names[-3:] == ["q1_ms", "q3_ms", "device"]
        # Every other field as it was; the quartiles made from the stored samples, NULL without; no
        # device (v7): every trial stored before it was measured on the machine that ran the session.
        rows_after = s.db.execute("SELECT * FROM trials ORDER BY id").fetchall()
        assert [r[:-3] for r in rows_after] == rows_before
        assert all(r[-1] is None for r in rows_after)
        for session in (sid, other):
            trials = s.trials(session, with_samples=True)
            assert [t.samples_ms for t in trials] == [tuple(c) for c in cases]
            for t in trials[:-1]:
                q1, q3 = np.percentile(np.asarray(t.samples_ms), [25, 75])
                assert t.q1_ms == pytest.approx(q1, rel=1e-12) and t.q3_ms == pytest.approx(q3, rel=1e-12)
                # exactly what add_trial would have stored for these samples
                assert (t.q1_ms, t.q3_ms) == quartiles(t.samples_ms)
            assert trials[-1].q1_ms is None and trials[-1].q3_ms is None
            _assert_columns_match(s.trial_columns(session), trials)
        # A trial stored after the migration gets its quartiles as any other.
        new = s.add_trial(sid, make_trial((4.0, 1.0, 2.0, 3.0), config={"new": 1}), "new")
        assert (new.q1_ms, new.q3_ms) == (1.75, 3.25) and s.trial(new.id) == s.trials(sid, with_samples=True)[
            -1
        ]
    with Store(db_path) as again:  # migrated once: re-opening changes nothing
        assert (
            again.db.execute("SELECT * FROM trials ORDER BY id").fetchall()[: len(rows_after)] == rows_after
        )


def test_failed_migration_changes_nothing(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Store(db_path).close()

    def broken(db) -> None:
        db.execute("CREATE TABLE half (x)")
        raise RuntimeError("migration bug")

    monkeypatch.setattr(store_module, "MIGRATIONS", [*MIGRATIONS, broken])
    with pytest.raises(RuntimeError, match="migration bug"):
        Store(db_path)
    monkeypatch.undo()
    with Store(db_path) as s:
        assert s.schema_version() == len(MIGRATIONS)
        assert "half" not in s.db.table_names()


def test_readonly_and_older_schema(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store(db_path) as s:
        sid = new_session(s)
    with Store(db_path, readonly=True) as ro:
        assert ro.session(sid).name == "first"
        with pytest.raises(StoreError, match="read-only"):
            ro.heartbeat(sid)
        assert ro.reopen().readonly
    monkeypatch.setattr(store_module, "MIGRATIONS", [*MIGRATIONS, lambda db: None])
    with pytest.raises(StoreError, match="older schema"):
        Store(db_path, readonly=True)


@pytest.mark.parametrize("create", [True, False])
def test_garbage_file_is_refused_and_untouched(tmp_path: Path, create: bool) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"not a database")
    for readonly in (False, True):
        with pytest.raises(StoreError, match="not a tunelab database") as info:
            Store(path, create=create, readonly=readonly)
        assert "\n" not in str(info.value)
    assert path.read_bytes() == b"not a database"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.sqlite"]


def test_other_sqlite_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
        raw.execute("INSERT INTO photos (name) VALUES ('cat')")
    raw.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another application"):
        Store(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_missing_file_without_create(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "missing.sqlite"
    with pytest.raises(StoreError, match="no tunelab database"):
        Store(path, create=False)
    with pytest.raises(StoreError, match="no tunelab database"):
        Store(path, readonly=True)
    assert not path.exists() and not path.parent.exists()
    with Store(path) as s:  # create=True makes the folder and the file
        assert s.sessions() == []
    assert path.is_file()


def test_default_db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNELAB_DB", str(tmp_path / "x.sqlite"))
    assert default_db_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("TUNELAB_DB")
    monkeypatch.setattr("platformdirs.user_data_dir", lambda app: str(tmp_path / "data" / app))
    path = default_db_path()
    assert path == tmp_path / "data" / "tunelab" / "tunelab.sqlite"
    assert path.parent.is_dir()


def test_reopen_gives_a_store_for_another_thread(store: Store) -> None:
    import threading

    sid = new_session(store)
    seen = []

    def work() -> None:
        with pytest.raises(sqlite3.ProgrammingError):  # a connection belongs to its thread
            store.session(sid)
        with store.reopen() as mine:
            seen.append(mine.session(sid).name)
            mine.heartbeat(sid)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == ["first"]


# ------------------------------------------------------------------------------------------ concurrency

READER = """
import json, sys, time
from tunelab.core.store import Store

path, sid, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = Store(path, readonly=True)
print("ready", flush=True)
seen, since, polls, errors = {}, 0, 0, []
deadline = time.time() + 60
while len(seen) < expected and time.time() < deadline:
    try:
        store.max_trial_id()
        store.sessions()
        new = store.trials(sid, since_id=since, with_samples=True)
    except Exception as exc:
        errors.append(repr(exc))
        continue
    polls += 1
    for t in new:
        if len(t.samples_ms) != t.config["n"] or t.latency_ms is None:
            errors.append(f"trial {t.id} has {len(t.samples_ms)} samples, expected {t.config['n']}")
        seen[t.id] = len(t.samples_ms)
        since = t.id
print(json.dumps({"seen": len(seen), "polls": polls, "errors": errors[:5]}), flush=True)
"""


def test_reader_in_another_process_never_blocks_or_sees_half_trials(store: Store, db_path: Path) -> None:
    sid = new_session(store)
    n = 200
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db_path), str(sid), str(n)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().strip() == "ready"
        for i in range(n):
            k = i % 7 + 1  # a different number of samples for each trial
            store.add_trial(
                sid, make_trial([0.1 * (i + j + 1) for j in range(k)], config={"n": k, "i": i}), str(i)
            )
        out, err = reader.communicate(timeout=90)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert reader.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == []
    assert result["seen"] == n
    assert result["polls"] >= 1, result
    assert store.session(sid).n_trials == n


def test_running_session_of_a_dead_process_reads_as_crashed(store: Store, db_path: Path) -> None:
    sid = new_session(store)
    done = run_python(
        """
        import os, sys
        from tunelab.core.store import Store
        Store(sys.argv[1], create=False).set_status(int(sys.argv[2]), "running")
        print(os.getpid())
        """,
        str(db_path),
        str(sid),
    )
    assert done.returncode == 0, done.stderr
    rec = store.session(sid)
    assert rec.pid == int(done.stdout) and rec.hostname == store.session(sid).hostname
    assert rec.status == "crashed"
    assert [s.status for s in store.sessions()] == ["crashed"]
    # derived on read only: the file still says running
    assert store.db.execute("SELECT status FROM sessions WHERE id = ?", (sid,)).fetchone()[0] == "running"

    store.set_status(sid, "running")  # this (live) process owns it now
    assert store.session(sid).status == "running"

    def on_other_host(updated_at: float) -> str:
        store.db.execute(
            "UPDATE sessions SET hostname = 'elsewhere', pid = 1, updated_at = ? WHERE id = ?",
            (updated_at, sid),
        )
        return store.session(sid).status

    assert on_other_host(time.time() - 10) == "running"
    assert on_other_host(time.time() - 500) == "crashed"


def test_listing_sessions_with_many_trials(store: Store) -> None:
    sid = new_session(store)
    other = new_session(store, name="other")
    for i in range(2000):
        status = "ok" if i % 10 else "run_error"
        samples = (5.0 + (i * 37 % 1000) / 100, 6.0) if status == "ok" else ()
        store.add_trial(sid, make_trial(samples, status=status, config={"i": i}), str(i))
    started = time.perf_counter()
    listed = {s.id: s for s in store.sessions()}
    elapsed = time.perf_counter() - started
    rec = listed[sid]
    assert (rec.n_trials, rec.n_failed) == (2000, 200)
    best = store.best_trial(sid)
    assert rec.best_ms == best.latency_ms == min(t.latency_ms for t in store.trials(sid) if t.ok)
    assert rec.best_trial_id == best.id
    assert listed[other].n_trials == 0
    assert elapsed < 5  # generous; typically a few milliseconds

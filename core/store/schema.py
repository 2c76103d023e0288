"""The schema: the migrations that build a tunelab database, v1 to the version this code writes.

:data:`MIGRATIONS` holds them in order: version *n* is the schema after the first *n* functions have
run. To change the schema, write one function decorated with :func:`migration` below the others.
Opening a file checks its version and applies the missing ones (``tunelab.core.store.connection``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable

import numpy as np
from sqlite_utils import Database

Migration = Callable[[Database], None]

# Applied in order, each inside the same write transaction that bumps meta.schema_version.
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next schema version (keep them in definition order; never edit old ones)."""
    MIGRATIONS.append(fn)
    return fn


def _v1_session_tables() -> list[str]:
    """The first schema's sessions and their tasks."""
    return [
        """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL DEFAULT '',
            workload TEXT NOT NULL,
            shape TEXT NOT NULL,
            dtype TEXT NOT NULL,
            target TEXT NOT NULL,
            target_kind TEXT NOT NULL,
            space_kind TEXT NOT NULL,
            space TEXT NOT NULL,
            tuner TEXT NOT NULL,
            tuner_options TEXT NOT NULL,
            measure TEXT NOT NULL,
            trials_budget INTEGER NOT NULL,
            batch INTEGER NOT NULL,
            early_stop INTEGER,
            seed INTEGER NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            pid INTEGER,
            hostname TEXT,
            tvm_version TEXT NOT NULL,
            flops REAL NOT NULL,
            custom_source TEXT,
            tuner_state TEXT
        )""",
        """CREATE TABLE tasks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            workload TEXT NOT NULL,
            shape TEXT NOT NULL,
            dtype TEXT NOT NULL,
            flops REAL NOT NULL
        )""",
        "CREATE INDEX idx_tasks_session ON tasks(session_id)",
    ]


def _v1_trial_tables() -> list[str]:
    """The first schema's trials with their samples, and the rounds."""
    return [
        """CREATE TABLE trials (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            task_id INTEGER REFERENCES tasks(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            round INTEGER NOT NULL,
            config TEXT NOT NULL,
            config_key TEXT NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            latency_ms REAL,
            mean_ms REAL,
            std_ms REAL,
            min_ms REAL,
            max_ms REAL,
            predicted_ms REAL,
            build_s REAL,
            run_s REAL,
            started_at REAL NOT NULL,
            finished_at REAL NOT NULL,
            trace_json TEXT
        )""",
        "CREATE INDEX idx_trials_session_id ON trials(session_id, id)",
        "CREATE UNIQUE INDEX idx_trials_session_key ON trials(session_id, config_key)",
        "CREATE UNIQUE INDEX idx_trials_session_idx ON trials(session_id, idx)",
        # n_ok / best trial per session without touching the table rows
        "CREATE INDEX idx_trials_session_status_latency ON trials(session_id, status, latency_ms)",
        """CREATE TABLE samples (
            trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            ms REAL NOT NULL,
            PRIMARY KEY (trial_id, idx)
        )""",
        "CREATE INDEX idx_samples_trial ON samples(trial_id)",
        """CREATE TABLE rounds (
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            round INTEGER NOT NULL,
            n INTEGER NOT NULL,
            spearman REAL,
            best_ms REAL,
            finished_at REAL NOT NULL,
            PRIMARY KEY (session_id, round)
        )""",
    ]


@migration
def _v1_initial(db: Database) -> None:
    for sql in [*_v1_session_tables(), *_v1_trial_tables()]:
        db.execute(sql)


@migration
def _v2_telemetry(db: Database) -> None:
    # One row per telemetry sample (10 a second while a session runs); pid lists and per-core loads are
    # compact text, everything a plot or a query filters on is a column.
    statements = [
        """CREATE TABLE telemetry (
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            t REAL NOT NULL,
            gpu_temp_c REAL,
            gpu_power_w REAL,
            gpu_power_limit_w REAL,
            gpu_sm_clock_mhz REAL,
            gpu_mem_clock_mhz REAL,
            gpu_util_pct REAL,
            gpu_mem_util_pct REAL,
            gpu_mem_used_mib REAL,
            throttle_reasons TEXT NOT NULL DEFAULT '',
            other_gpu_procs INTEGER,
            other_gpu_pids TEXT NOT NULL DEFAULT '',
            cpu_load_per_core TEXT NOT NULL DEFAULT '[]',
            cpu_load_mean REAL,
            cpu_freq_mhz REAL,
            cpu_temp_c REAL,
            other_busy_procs INTEGER NOT NULL DEFAULT 0,
            other_busy_pids TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX idx_telemetry_session_t ON telemetry(session_id, t)",
        # What the hardware did while each trial ran (telemetry.summarize), with the values a trials
        # table sorts or filters on as columns.
        """CREATE TABLE trial_telemetry (
            trial_id INTEGER PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            n INTEGER NOT NULL,
            throttled INTEGER NOT NULL,
            gpu_temp_max REAL,
            gpu_power_max REAL,
            gpu_sm_clock_min REAL,
            cpu_load_mean REAL,
            other_procs_max INTEGER,
            summary TEXT NOT NULL
        )""",
        "CREATE INDEX idx_trial_telemetry_session ON trial_telemetry(session_id)",
    ]
    for sql in statements:
        db.execute(sql)


@migration
def _v3_validation_baselines_roofline(db: Database) -> None:
    # Re-measurements of tuned schedules (tunelab.core.trust.remeasure), vendor-library baselines
    # (tunelab.core.trust.baselines) and
    # this machine's roofline (tunelab.core.trust.roofline). Reports and details are JSON text; what a table sorts or
    # filters on is a column.
    statements = [
        """CREATE TABLE validations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
            schedule_file TEXT,
            created_at REAL NOT NULL,
            hostname TEXT,
            runs INTEGER NOT NULL,
            verdict TEXT NOT NULL,
            cause TEXT,
            summary TEXT NOT NULL DEFAULT '',
            report TEXT NOT NULL
        )""",
        "CREATE INDEX idx_validations_session ON validations(session_id, id)",
        """CREATE TABLE validation_results (
            validation_id INTEGER NOT NULL REFERENCES validations(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            trial_id INTEGER,
            label TEXT NOT NULL,
            recorded_ms REAL,
            remeasured_ms REAL,
            cv REAL,
            runs INTEGER NOT NULL,
            throttled INTEGER NOT NULL,
            verdict TEXT NOT NULL,
            cause TEXT,
            detail TEXT NOT NULL,
            PRIMARY KEY (validation_id, idx)
        )""",
        """CREATE TABLE baselines (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            hostname TEXT NOT NULL,
            workload TEXT NOT NULL,
            shape TEXT NOT NULL,
            dtype TEXT NOT NULL,
            target_kind TEXT NOT NULL,
            library TEXT NOT NULL,
            median_ms REAL NOT NULL,
            gflops REAL,
            measured_at REAL NOT NULL,
            detail TEXT NOT NULL,
            UNIQUE (hostname, workload, shape, dtype, target_kind)
        )""",
        """CREATE TABLE machine_profile (
            hostname TEXT NOT NULL,
            target_kind TEXT NOT NULL,
            measured_at REAL NOT NULL,
            peak_gflops TEXT NOT NULL,
            bandwidth_gbs REAL NOT NULL,
            detail TEXT NOT NULL,
            PRIMARY KEY (hostname, target_kind)
        )""",
    ]
    for sql in statements:
        db.execute(sql)


@migration
def _v4_vendor_baselines(db: Database) -> None:
    # "baselines" is a name other code may want (a test's stand-in migration creates one): the vendor
    # baselines of v3 keep a name of their own.
    tables = set(db.table_names())
    if "baselines" in tables and "vendor_baselines" not in tables:
        db.execute("ALTER TABLE baselines RENAME TO vendor_baselines")


@migration
def _v5_task_index(db: Database) -> None:
    # Per-task counts and bests (Store.tasks, asked on every refresh of a running session) would
    # otherwise scan every trial in the file.
    db.execute("CREATE INDEX IF NOT EXISTS idx_trials_task ON trials(task_id, status, latency_ms)")


@migration
def _v6_trial_quartiles(db: Database) -> None:
    # Each trial's quartiles as columns (q3 - q1 is the Trials table's IQR: a spread one outlier cannot
    # inflate), so that a table of 100,000 trials need not read their samples. Trials stored before
    # this get them from their stored samples; a trial without samples keeps NULL.
    db.execute("ALTER TABLE trials ADD COLUMN q1_ms REAL")
    db.execute("ALTER TABLE trials ADD COLUMN q3_ms REAL")
    rows = db.execute("SELECT trial_id, ms FROM samples ORDER BY trial_id, idx")
    pending: dict[int, tuple[list[int], list[list[float]]]] = {}  # by sample count: trial ids, samples
    n_pending = 0
    for trial_id, group in itertools.groupby(rows, key=operator.itemgetter(0)):
        samples = [ms for _, ms in group]
        ids, values = pending.setdefault(len(samples), ([], []))
        ids.append(trial_id)
        values.append(samples)
        n_pending += 1
        if n_pending >= _BACKFILL_BATCH:
            _write_quartiles(db, pending)
            n_pending = 0
    _write_quartiles(db, pending)


@migration
def _v7_trial_device(db: Database) -> None:
    # Which RPC server measured a trial (tunelab tune --rpc): "HOST:PORT" as the tracker names it;
    # NULL for a trial measured on this machine, as every trial stored before this was.
    db.execute("ALTER TABLE trials ADD COLUMN device TEXT")


@migration
def _v8_shadow_predictions(db: Database) -> None:
    # Cost models that predict every candidate without steering (tune --shadow-models): the session
    # names them, and each trial keeps every one's prediction, made before it was measured, so that all
    # models are compared out of sample on the same trials. NULL / no rows: a session without them.
    db.execute("ALTER TABLE sessions ADD COLUMN shadow_models TEXT")
    db.execute(
        """CREATE TABLE trial_predictions (
            trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            predicted_ms REAL NOT NULL,
            PRIMARY KEY (trial_id, model)
        )"""
    )


@migration
def _v9_round_search_time(db: Database) -> None:
    # How long each round's search took (proposing the batch, ranking it, learning from it) and the
    # round's whole time, so that `show` and the Live view can say what share of a session the search
    # ate (on a GPU it was 30-45 s a round). NULL: a round stored before rounds were timed.
    db.execute("ALTER TABLE rounds ADD COLUMN search_s REAL")
    db.execute("ALTER TABLE rounds ADD COLUMN wall_s REAL")


_BACKFILL_BATCH = 20_000  # trials whose quartiles are written at once while the samples are read


def _write_quartiles(db: Database, pending: dict[int, tuple[list[int], list[list[float]]]]) -> None:
    """Write the quartiles of the pending trials (grouped by their number of samples), then forget them.

    The 25th and 75th percentiles with NumPy's default linear interpolation, as add_trial stores them
    (tunelab.core.stats.quartiles; tests/core/test_store.py checks that they agree), here for all the
    trials with as many samples in one call: one call per trial kept the write lock for 15 s over
    100,000 trials on a busy 2-core machine, this 1.5 s."""
    for ids, values in pending.values():
        q1, q3 = np.percentile(np.asarray(values, dtype=np.float64), [25, 75], axis=1, method="linear")
        # A cursor of its own: the samples' SELECT is still being read through the other one.
        db.conn.executemany(
            "UPDATE trials SET q1_ms = ?, q3_ms = ? WHERE id = ?",
            zip(q1.tolist(), q3.tolist(), ids, strict=True),
        )
    pending.clear()


def schema_version() -> int:
    """The schema version this code writes (the number of migrations)."""
    return len(MIGRATIONS)


def apply_migrations(db: Database, version: int) -> int:
    """Bring ``db`` from schema ``version`` to :func:`schema_version` (the caller holds the write
    transaction that records it); the version it has then."""
    for fn in MIGRATIONS[version:]:
        fn(db)
    return len(MIGRATIONS)

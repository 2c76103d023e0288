"""Trials in the store: adding a measured trial with its samples, reading trials, tasks, rounds, tuner state.

A trial's latency is the median of its samples, kept with their mean, spread, range
(:func:`tunelab.core.stats.summarize`) and quartiles (:func:`tunelab.core.stats.quartiles`): the
columns a best trial is chosen and sorted by.
"""

from __future__ import annotations

import gc
import json
import math
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from tunelab.core.errors import StoreError
from tunelab.core.records import (
    TRIAL_STATUSES,
    NewTrial,
    RoundRecord,
    SearchTime,
    TaskRecord,
    TrialRecord,
    trial_number,
)
from tunelab.core.stats import quartiles, summarize
from tunelab.core.store.connection import StoreConnection, _reader
from tunelab.core.store.json_text import _dumps, _json_decode, _loads, inserted_id

_TRIAL_COLUMNS = (
    "id, session_id, idx, round, config, status, error, latency_ms, mean_ms, std_ms, min_ms, max_ms, "
    "predicted_ms, build_s, run_s, started_at, finished_at, trace_json, task_id, q1_ms, q3_ms, device"
)


def _latency_columns(samples: Sequence[float]) -> dict[str, float | None]:
    """A trial's latency columns (all None for no samples), named as the TrialRecord fields.

    ``q1_ms``/``q3_ms`` are the 25th/75th percentiles, linearly interpolated (NumPy's default), as
    every spread tunelab shows is made (:func:`tunelab.core.stats.quartiles`)."""
    figures = summarize(samples)
    quarters = quartiles(samples)
    if figures is None or quarters is None:
        return dict.fromkeys(("latency_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "q1_ms", "q3_ms"))
    return {
        "latency_ms": figures.median,
        "mean_ms": figures.mean,
        "std_ms": figures.std,
        "min_ms": figures.min,
        "max_ms": figures.max,
        "q1_ms": quarters[0],
        "q3_ms": quarters[1],
    }


def _insert_trial(
    conn: sqlite3.Connection,
    row: tuple[Any, ...],
    stats: dict[str, float | None],
    trial: NewTrial,
    trace_text: str | None,
    samples: Sequence[float],
) -> int:
    """Insert a trial's row, its samples and its shadow predictions; its id. ``row``: session id, task
    id, index, round, config, config key, status and error, in the trials table's order."""
    cur = conn.execute(
        """INSERT INTO trials (session_id, task_id, idx, round, config, config_key, status, error,
            latency_ms, mean_ms, std_ms, min_ms, max_ms, q1_ms, q3_ms, predicted_ms, build_s,
            run_s, started_at, finished_at, trace_json, device)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            *row,
            stats["latency_ms"],
            stats["mean_ms"],
            stats["std_ms"],
            stats["min_ms"],
            stats["max_ms"],
            stats["q1_ms"],
            stats["q3_ms"],
            trial.predicted_ms,
            trial.build_s,
            trial.run_s,
            trial.started_at,
            trial.finished_at,
            trace_text,
            trial.device,
        ),
    )
    trial_id = inserted_id(cur)
    conn.executemany(
        "INSERT INTO samples (trial_id, idx, ms) VALUES (?, ?, ?)",
        [(trial_id, i, ms) for i, ms in enumerate(samples)],
    )
    if trial.shadow_predictions:  # in the same transaction: a trial never lacks what was predicted
        conn.executemany(
            "INSERT INTO trial_predictions (trial_id, model, predicted_ms) VALUES (?, ?, ?)",
            [(trial_id, m, float(ms)) for m, ms in sorted(trial.shadow_predictions.items())],
        )
    return trial_id


class TrialStore(StoreConnection):
    """The Store's trial methods: the trials, samples, tasks and rounds tables, and the tuner's state."""

    def add_trial(
        self, session_id: int, trial: NewTrial, config_key: str, task_id: int | None = None
    ) -> TrialRecord:
        """Store one measured trial with its samples in one transaction; return it as stored.

        ``latency_ms`` is the median of ``samples_ms`` (mean/std/min/max and the quartiles q1/q3 too;
        std is the population standard deviation, as TVM's ``time_evaluator`` reports it). A trial
        without samples has no latency. A ``config_key`` already measured in this session raises
        :class:`StoreError`.
        """
        if trial.status not in TRIAL_STATUSES:
            raise ValueError(f"unknown trial status {trial.status!r}; expected one of {TRIAL_STATUSES}")
        samples = tuple(float(ms) for ms in trial.samples_ms)
        if trial.status == "ok" and not samples:
            raise ValueError("a trial with status 'ok' needs at least one sample")
        stats = _latency_columns(samples)
        config_text = _dumps(trial.config)
        trace_text = None if trial.trace_json is None else _dumps(trial.trace_json)
        with self._write() as conn:
            task = self._trial_task(conn, session_id, task_id)
            if conn.execute(
                "SELECT 1 FROM trials WHERE session_id = ? AND config_key = ?", (session_id, config_key)
            ).fetchone():
                raise StoreError(f"config {config_key} was already measured in session {session_id}")
            idx = conn.execute(
                "SELECT coalesce(max(idx) + 1, 0) FROM trials WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            row = (session_id, task, idx, trial.round, config_text, config_key, trial.status, trial.error)
            trial_id = _insert_trial(conn, row, stats, trial, trace_text, samples)
        return TrialRecord(
            id=trial_id,
            session_id=session_id,
            index=idx,
            round=trial.round,
            config=json.loads(config_text),
            status=trial.status,
            error=trial.error,
            predicted_ms=trial.predicted_ms,
            build_s=trial.build_s,
            run_s=trial.run_s,
            started_at=trial.started_at,
            finished_at=trial.finished_at,
            trace_json=_loads(trace_text),
            samples_ms=samples,
            task_id=task,
            device=trial.device,
            **stats,
        )

    def _trial_task(self, conn: sqlite3.Connection, session_id: int, task_id: int | None) -> int | None:
        """The id of the task a new trial belongs to: ``task_id`` when it is one of the session's, else
        the session's first task; None for a session stored without tasks. StoreError for another
        session's task or a session that does not exist."""
        if task_id is None:
            task = conn.execute(
                "SELECT id FROM tasks WHERE session_id = ? ORDER BY id LIMIT 1", (session_id,)
            ).fetchone()
        else:
            task = conn.execute(
                "SELECT id FROM tasks WHERE session_id = ? AND id = ?", (session_id, task_id)
            ).fetchone()
            if task is None:
                raise StoreError(f"task {task_id} is not a task of session {session_id}")
        if task is None:
            self._require_session(session_id)
            return None
        return int(task[0])

    def add_round(
        self,
        session_id: int,
        round: int,
        n: int,
        spearman: float | None,
        best_ms: float | None,
        *,
        search_s: float | None = None,
        wall_s: float | None = None,
    ) -> None:
        """Record a finished round (replaces an earlier record of the same round). ``search_s``: the
        seconds its search took; ``wall_s``: the round's whole seconds (RoundRecord)."""
        if spearman is not None and math.isnan(spearman):
            spearman = None
        for name, value in (("search_s", search_s), ("wall_s", wall_s)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise StoreError(f"a round's {name} must be a finite number of seconds >= 0, not {value}")
        with self._write() as conn:
            self._require_session(session_id)
            conn.execute(
                """INSERT INTO rounds (session_id, round, n, spearman, best_ms, finished_at, search_s, wall_s)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (session_id, round) DO UPDATE SET
                    n = excluded.n, spearman = excluded.spearman, best_ms = excluded.best_ms,
                    finished_at = excluded.finished_at, search_s = excluded.search_s,
                    wall_s = excluded.wall_s""",
                (session_id, round, n, spearman, best_ms, time.time(), search_s, wall_s),
            )

    def save_tuner_state(self, session_id: int, state: dict[str, Any]) -> None:
        text = _dumps(state)
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE sessions SET tuner_state = ?, updated_at = ? WHERE id = ?",
                (text, time.time(), session_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"session {session_id} does not exist in {self.path}")

    @_reader
    def tuner_state(self, session_id: int) -> dict[str, Any] | None:
        row = self._conn.execute("SELECT tuner_state FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise StoreError(f"session {session_id} does not exist in {self.path}")
        return _loads(row[0])

    @_reader
    def trials(self, session_id: int, since_id: int = 0, with_samples: bool = False) -> list[TrialRecord]:
        """The session's trials with ``id > since_id``, in id (= measurement) order."""
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(
                f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE session_id = ? AND id > ? ORDER BY id",
                (session_id, since_id),
            ).fetchall()
            samples: dict[int, list[float]] = {}
            if with_samples and rows:
                for trial_id, ms in conn.execute(
                    """SELECT trial_id, ms FROM samples
                    WHERE trial_id IN (SELECT id FROM trials WHERE session_id = ? AND id > ?)
                    ORDER BY trial_id, idx""",
                    (session_id, since_id),
                ):
                    samples.setdefault(trial_id, []).append(ms)
        # Building 100,000 records allocates millions of objects that all survive: the cyclic GC
        # would re-scan them again and again (half the time of a large read) and can free none.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            return [self._trial_record(r, samples.get(r[0], ())) for r in rows]
        finally:
            if gc_was_on:
                gc.enable()

    @_reader
    def tasks(self, session_id: int) -> list[TaskRecord]:
        """The session's shapes in order (the primary one first), each with its own best trial."""
        self._require_session(session_id)
        rows = self._conn.execute(
            """SELECT t.id, t.workload, t.shape, t.dtype, t.flops,
                (SELECT count(*) FROM trials r WHERE r.task_id = t.id),
                (SELECT count(*) FROM trials r WHERE r.task_id = t.id AND r.status != 'ok'),
                (SELECT min(latency_ms) FROM trials r WHERE r.task_id = t.id AND r.status = 'ok'),
                (SELECT r.id FROM trials r WHERE r.task_id = t.id AND r.status = 'ok'
                    ORDER BY r.latency_ms, r.id LIMIT 1),
                (SELECT r.idx FROM trials r WHERE r.task_id = t.id AND r.status = 'ok'
                    ORDER BY r.latency_ms, r.id LIMIT 1)
            FROM tasks t WHERE t.session_id = ? ORDER BY t.id""",
            (session_id,),
        ).fetchall()
        return [
            TaskRecord(
                r[0],
                session_id,
                i,
                r[1],
                _loads(r[2]),
                r[3],
                r[4],
                r[5],
                r[6],
                r[7],
                r[8],
                None if r[9] is None else trial_number(r[9]),
            )
            for i, r in enumerate(rows)
        ]

    @_reader
    def trial(self, trial_id: int) -> TrialRecord:
        """One trial with its samples."""
        with self._read() as conn:
            rows = conn.execute(f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE id = ?", (trial_id,)).fetchall()
            if not rows:
                raise StoreError(f"trial {trial_id} does not exist in {self.path}")
            samples = [
                r[0]
                for r in conn.execute("SELECT ms FROM samples WHERE trial_id = ? ORDER BY idx", (trial_id,))
            ]
        return self._trial_record(rows[0], samples)

    @_reader
    def trial_id_of(self, session_id: int, number: int) -> int:
        """The id of the session's trial ``#number`` (its number within the session, from 1)."""
        with self._read() as conn:
            self._require_session(session_id)
            row = conn.execute(
                "SELECT id FROM trials WHERE session_id = ? AND idx = ?", (session_id, int(number) - 1)
            ).fetchone()
        if row is None:
            raise StoreError(f"session {session_id} has no trial #{number}")
        return int(row[0])

    @_reader
    def samples(self, trial_id: int) -> list[float]:
        with self._read() as conn:
            if conn.execute("SELECT 1 FROM trials WHERE id = ?", (trial_id,)).fetchone() is None:
                raise StoreError(f"trial {trial_id} does not exist in {self.path}")
            return [
                r[0]
                for r in conn.execute("SELECT ms FROM samples WHERE trial_id = ? ORDER BY idx", (trial_id,))
            ]

    @_reader
    def best_trial(self, session_id: int) -> TrialRecord | None:
        """The ok trial with the lowest latency (the earliest among equals), with samples; None if none.

        In a session with several shapes (tasks) this is the primary shape's best: latencies of
        different shapes do not compare (see `tasks()` for each shape's best)."""
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(
                f"""SELECT {_TRIAL_COLUMNS} FROM trials
                WHERE session_id = ? AND status = 'ok' AND latency_ms IS NOT NULL
                    AND (task_id IS NULL OR task_id = (SELECT min(id) FROM tasks WHERE session_id = ?))
                ORDER BY latency_ms, id LIMIT 1""",
                (session_id, session_id),
            ).fetchall()
            if not rows:
                return None
            samples = [
                r[0]
                for r in conn.execute("SELECT ms FROM samples WHERE trial_id = ? ORDER BY idx", (rows[0][0],))
            ]
        return self._trial_record(rows[0], samples)

    @_reader
    def rounds(self, session_id: int) -> list[RoundRecord]:
        with self._read():
            self._require_session(session_id)
            rows = self._rows(
                "SELECT session_id, round, n, spearman, best_ms, finished_at, search_s, wall_s FROM rounds "
                "WHERE session_id = ? ORDER BY round",
                (session_id,),
            )
        return [RoundRecord(**dict(r)) for r in rows]

    def search_time(self, session_id: int) -> SearchTime | None:
        """How long the session's search took between its rounds, summed up; None when no round of
        it was timed (none yet, or all stored before rounds were timed)."""
        return SearchTime.of_rounds(self.rounds(session_id))

    @_reader
    def measured_keys(self, session_id: int) -> set[str]:
        with self._read() as conn:
            self._require_session(session_id)
            return {
                r[0]
                for r in conn.execute("SELECT config_key FROM trials WHERE session_id = ?", (session_id,))
            }

    @_reader
    def max_trial_id(self) -> int:
        """The largest trial id in the file (0 if none): poll it to notice new trials cheaply.

        Trial ids are never reused (AUTOINCREMENT), so the value only grows, even across deletes.
        """
        row = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'trials'").fetchone()
        return int(row[0]) if row else 0

    @_reader
    def trial_predictions(self, session_id: int) -> dict[int, dict[str, float]]:
        """The shadow models' predictions of the session's trials: {trial id: {model: predicted ms}}."""
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(
                """SELECT p.trial_id, p.model, p.predicted_ms FROM trial_predictions p
                JOIN trials t ON t.id = p.trial_id WHERE t.session_id = ? ORDER BY p.trial_id, p.model""",
                (session_id,),
            ).fetchall()
        out: dict[int, dict[str, float]] = {}
        for trial_id, model, ms in rows:
            out.setdefault(trial_id, {})[model] = ms
        return out

    @staticmethod
    def _trial_record(row: Sequence[Any], samples: Sequence[float]) -> TrialRecord:
        # _TRIAL_COLUMNS are in TrialRecord's field order (positional: listing 100k trials stays cheap)
        r = row
        return TrialRecord(
            r[0], r[1], r[2], r[3], _json_decode(r[4]), r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
            r[13], r[14], r[15], r[16], _loads(r[17]), tuple(samples), r[18], r[19], r[20], r[21],
        )  # fmt: skip

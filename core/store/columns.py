"""The column reads: a session's trials as one NumPy array per field, and configs by trial id.

What plots and tables read to show 100,000 trials without building a TrialRecord (and decoding a
config) for each: :meth:`TrialColumnReads.trial_columns` returns :data:`TRIAL_COLUMNS`.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

import numpy as np

from tunelab.core.records import TRIAL_STATUSES, Config, trial_number
from tunelab.core.store.connection import StoreConnection, _reader
from tunelab.core.store.json_text import _json_decode

# The float64 fields of Store.trial_columns (NaN where a trial has none), as TrialRecord names them.
TRIAL_FLOAT_COLUMNS = (
    "latency_ms",
    "mean_ms",
    "std_ms",
    "q1_ms",
    "q3_ms",
    "predicted_ms",
    "started_at",
    "finished_at",
)
# Store.trial_columns: the fields it returns, and the numeric ones read in one SELECT.
TRIAL_COLUMNS = (
    "id",
    "index",
    "number",
    "round",
    "status",
    "ok",
    *TRIAL_FLOAT_COLUMNS,
    "task_id",
    "error",
    "device",
)
_COLUMNS_NUMERIC = ("id", "index", "round", "status", *TRIAL_FLOAT_COLUMNS, "task_id")
_STATUS_CODE = (
    "CASE status " + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(TRIAL_STATUSES)) + " ELSE -1 END"
)
_COLUMNS_SELECT = (
    f"SELECT id, idx, round, {_STATUS_CODE}, {', '.join(TRIAL_FLOAT_COLUMNS)}, task_id "
    "FROM trials WHERE session_id = ? AND id > ? ORDER BY id"
)
_ERRORS_SELECT = (
    "SELECT id, error FROM trials WHERE session_id = ? AND id > ? AND error IS NOT NULL ORDER BY id"
)
_DEVICES_SELECT = (
    "SELECT id, device FROM trials WHERE session_id = ? AND id > ? AND device IS NOT NULL ORDER BY id"
)
_IN_CHUNK = 500  # ids per "id IN (...)" (SQLite allows at least 999 parameters)


class TrialColumnReads(StoreConnection):
    """The Store's column reads of the trials table."""

    @_reader
    def trial_columns(self, session_id: int, since_id: int = 0) -> dict[str, np.ndarray]:
        """The session's trials with ``id > since_id``, in id order, as one NumPy array per field.

        What plots and tables need without building a :class:`TrialRecord` (and decoding a config)
        per trial: reading 100,000 trials this way takes a fraction of what :meth:`trials` takes.
        The keys are :data:`TRIAL_COLUMNS`, named as the TrialRecord fields they hold:

        * ``id``, ``index``, ``number`` (the trial's number in its session, from 1: what people see),
          ``round``, ``task_id``: int64 (``task_id`` -1 where the trial has none);
        * ``status``: int8, the position of the status in ``TRIAL_STATUSES``; ``ok``: bool;
        * ``latency_ms``, ``mean_ms``, ``std_ms``, ``q1_ms``, ``q3_ms`` (the samples' quartiles),
          ``predicted_ms``, ``started_at``, ``finished_at``: float64, NaN where the trial has none;
        * ``error``: object, the error text or None;
        * ``device``: object, the RPC server that measured the trial ("HOST:PORT") or None (this machine).

        Configs, traces and samples are not read: :meth:`trial_configs` and :meth:`trial` give them
        for the trials that are shown.
        """
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(_COLUMNS_SELECT, (session_id, since_id)).fetchall()
            failed = conn.execute(_ERRORS_SELECT, (session_id, since_id)).fetchall() if rows else []
            remote = conn.execute(_DEVICES_SELECT, (session_id, since_id)).fetchall() if rows else []
        # Nothing made here can be freed by the cyclic GC, which would only re-scan the rows.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            # One float64 matrix (NULL -> NaN) for every numeric column, then typed columns of it.
            numbers = np.array(rows, dtype=np.float64).reshape(len(rows), len(_COLUMNS_NUMERIC))
        finally:
            if gc_was_on:
                gc.enable()
        out: dict[str, np.ndarray] = {}
        for k, name in enumerate(_COLUMNS_NUMERIC):
            column = numbers[:, k]
            if name in ("id", "index", "round"):
                out[name] = column.astype(np.int64)
            elif name == "task_id":
                out[name] = np.where(np.isnan(column), -1, column).astype(np.int64)
            elif name == "status":
                out[name] = column.astype(np.int8)
            else:
                out[name] = np.ascontiguousarray(column)
        out["number"] = trial_number(out["index"])
        out["ok"] = out["status"] == TRIAL_STATUSES.index("ok")
        # Errors and remote devices are rare: only the rows that have one are read (ids in order).
        for name, found in (("error", failed), ("device", remote)):
            column = np.full(len(rows), None, dtype=object)
            if found:
                column[np.searchsorted(out["id"], [r[0] for r in found])] = [r[1] for r in found]
            out[name] = column
        return {name: out[name] for name in TRIAL_COLUMNS}

    @_reader
    def trial_configs(self, session_id: int, trial_ids: Sequence[int] | None = None) -> dict[int, Config]:
        """The configs of the session's trials (of those in ``trial_ids``; all when None), by id.

        For views that read :meth:`trial_columns` and decode a config only when it is shown (or
        filtered on). Ids of other sessions' trials, or of none, are left out."""
        out: dict[int, Config] = {}
        with self._read() as conn:
            self._require_session(session_id)
            if trial_ids is None:
                rows = conn.execute(
                    "SELECT id, config FROM trials WHERE session_id = ?", (session_id,)
                ).fetchall()
            else:
                ids = [int(i) for i in trial_ids]
                rows = []
                for start in range(0, len(ids), _IN_CHUNK):
                    chunk = ids[start : start + _IN_CHUNK]
                    rows += conn.execute(
                        f"SELECT id, config FROM trials WHERE id IN ({','.join('?' * len(chunk))}) "
                        "AND session_id = ?",
                        (*chunk, session_id),
                    ).fetchall()
        gc_was_on = gc.isenabled()
        gc.disable()  # as in trials(): many surviving objects, nothing for the GC to free
        try:
            for trial_id, text in rows:
                out[trial_id] = _json_decode(text)
        finally:
            if gc_was_on:
                gc.enable()
        return out

"""Preallocated, growing NumPy columns for plots (pyqtgraph's scrollingPlots pattern: double when full),
and the trial batches the views share: `Store.trial_columns`'s dict of one NumPy array per field."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tunelab.core.records import TRIAL_STATUSES, TrialRecord
from tunelab.core.store import TRIAL_COLUMNS, TRIAL_FLOAT_COLUMNS

TrialColumns = dict[str, np.ndarray]  # as Store.trial_columns returns them
_INT_FIELDS = ("id", "index", "number", "round")
_FLOAT_FIELDS = TRIAL_FLOAT_COLUMNS


def columns_of(trials: Sequence[TrialRecord]) -> TrialColumns:
    """TrialRecords (in id order) as the columns `Store.trial_columns` gives for them."""
    n = len(trials)
    out: TrialColumns = {}
    for name in _INT_FIELDS:
        out[name] = np.fromiter((getattr(t, name) for t in trials), dtype=np.int64, count=n)
    status = {s: i for i, s in enumerate(TRIAL_STATUSES)}
    out["status"] = np.fromiter((status.get(t.status, -1) for t in trials), dtype=np.int8, count=n)
    out["ok"] = out["status"] == status["ok"]
    for name in _FLOAT_FIELDS:  # None -> NaN
        out[name] = np.array([getattr(t, name) for t in trials], dtype=np.float64).reshape(n)
    out["task_id"] = np.fromiter(
        (-1 if t.task_id is None else t.task_id for t in trials), dtype=np.int64, count=n
    )
    for name in ("error", "device"):
        texts = np.full(n, None, dtype=object)
        texts[:] = [getattr(t, name) for t in trials]
        out[name] = texts
    return {name: out[name] for name in TRIAL_COLUMNS}


def n_rows(columns: TrialColumns | None) -> int:
    return 0 if not columns else len(columns["id"])


def rows_after(columns: TrialColumns, last_id: int) -> TrialColumns:
    """The rows with an id above `last_id` (a view may be handed a batch it partly holds already)."""
    ids = columns["id"]
    if not len(ids) or ids[0] > last_id:
        return columns
    start = int(np.searchsorted(ids, last_id, side="right"))  # ids ascend
    return {name: column[start:] for name, column in columns.items()}


def concat_columns(a: TrialColumns, b: TrialColumns) -> TrialColumns:
    if not n_rows(a):
        return b
    if not n_rows(b):
        return a
    return {name: np.concatenate((a[name], b[name])) for name in a}


class GrowingColumns:
    """Named float64 columns of equal length; `col(name)` is a view of the filled part (no copy)."""

    def __init__(self, *names: str, capacity: int = 256) -> None:
        self._names = names
        self._data = {n: np.empty(capacity, dtype=np.float64) for n in names}
        self.n = 0

    @property
    def capacity(self) -> int:
        return len(next(iter(self._data.values())))

    def append(self, **values: float) -> None:
        if self.n == self.capacity:
            for name, column in self._data.items():
                grown = np.empty(2 * len(column), dtype=np.float64)
                grown[: self.n] = column[: self.n]
                self._data[name] = grown
        for name in self._names:
            self._data[name][self.n] = values[name]
        self.n += 1

    def _reserve(self, n: int) -> None:
        if n <= self.capacity:
            return
        capacity = self.capacity
        while capacity < n:
            capacity *= 2
        for name, column in self._data.items():
            grown = np.empty(capacity, dtype=np.float64)
            grown[: self.n] = column[: self.n]
            self._data[name] = grown

    def extend(self, **values) -> None:
        """Append many rows at once: one equal-length sequence per column."""
        arrays = {name: np.asarray(values[name], dtype=np.float64) for name in self._names}
        k = len(arrays[self._names[0]])
        if any(len(a) != k for a in arrays.values()):
            raise ValueError("extend needs columns of equal length")
        if k == 0:
            return
        self._reserve(self.n + k)
        for name, column in arrays.items():
            self._data[name][self.n : self.n + k] = column
        self.n += k

    def col(self, name: str) -> np.ndarray:
        return self._data[name][: self.n]

    def clear(self) -> None:
        self.n = 0

    def __len__(self) -> int:
        return self.n


def decimate(candidates: np.ndarray, cap: int, keep: np.ndarray | None = None) -> np.ndarray:
    """At most about `cap` of the sorted positions `candidates`, plus every position in `keep`.

    The thinning is deterministic and stable as data grows: it keeps the positions that are a
    multiple of a power-of-two stride, so a point drawn once stays drawn until the stride doubles.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    if len(candidates) > cap > 0:
        stride = 1 << max(0, math.ceil(math.log2(len(candidates) / cap)))
        candidates = candidates[candidates % stride == 0]
    if keep is not None and len(keep):
        candidates = np.union1d(candidates, np.asarray(keep, dtype=np.int64))
    return candidates

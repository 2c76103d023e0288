"""Preallocated, growing NumPy columns for plots (pyqtgraph's scrollingPlots pattern: double when full)."""

from __future__ import annotations

import math

import numpy as np


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
            self._data[name][self.n: self.n + k] = column
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

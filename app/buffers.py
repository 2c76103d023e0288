"""Preallocated, growing NumPy columns for plots (pyqtgraph's scrollingPlots pattern: double when full)."""

from __future__ import annotations

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

    def col(self, name: str) -> np.ndarray:
        return self._data[name][: self.n]

    def clear(self) -> None:
        self.n = 0

    def __len__(self) -> int:
        return self.n

"""What the template, auto and records spaces share: the problem they schedule, cost-model features, TVM's errors."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError
from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.space.tvm_context import InvalidSchedule, schedule_features
from tunelab.core.target.info import TargetInfo


class ScheduledSpace(SearchSpace):
    """A space of TVM schedules of one problem: a workload at a shape and dtype, for a target."""

    def __init__(
        self,
        workload: Any,
        shape: dict[str, int],
        dtype: str,
        target: TargetInfo,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.workload = workload
        self.shape = dict(shape)
        self.dtype = dtype
        self.target = target
        self._derive(data)
        self._features_cache: dict[str, np.ndarray] = {}

    @abstractmethod
    def _derive(self, data: dict[str, Any] | None) -> None:
        """Derive the space from the problem and ``data``, the space as edited (None: the default space);
        SpaceError when the data does not fit the problem."""

    def check_index(self, index: int) -> None:
        """SpaceError unless ``index`` is a grid index of this space."""
        if not 0 <= index < self.size:
            raise SpaceError(f"grid index {index} is outside the space (size {self.size})")

    def features(self, configs: list[Config]) -> np.ndarray:
        rows = []
        for config in configs:
            key = self.key(config)
            if key not in self._features_cache:
                try:
                    ir = schedule_features(self.schedule(config), self.target)
                except InvalidSchedule:
                    ir = np.zeros(328)
                self._features_cache[key] = np.concatenate([ir, self.knob_vector(config)])
            rows.append(self._features_cache[key])
        return np.stack(rows) if rows else np.zeros((0, 0))


def invalid_schedule(exc: BaseException) -> InvalidSchedule:
    """TVM's refusal of a schedule (a ScheduleError, a failed replay or postprocessor) as an InvalidSchedule
    saying its last line, where TVM says what is wrong."""
    return InvalidSchedule(str(exc).strip().splitlines()[-1][:300])


def last_line(exc: BaseException) -> str:
    """The last line of a TVM error (where it says what is wrong), or its type when it says nothing."""
    lines = str(exc).strip().splitlines()
    return lines[-1][:300] if lines else type(exc).__name__

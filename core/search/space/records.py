"""The records space: the schedules an imported MetaSchedule run measured, and nothing else.

A workload tunelab's catalog does not know (tunelab.core.workloads.tir) has no space to search: its
schedules came from someone else's search. Its session still needs a space, for what every session
does with one: rebuild a trial's schedule (export, re-measurement, validation) and compute its
features (the cost-model views). This space holds the imported traces, in the file's order; a config
names one of them (``{"record": 3}``). It cannot propose new points, so it cannot be tuned.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError, TunelabError
from tunelab.core.records import Config
from tunelab.core.search.space.scheduled import ScheduledSpace, invalid_schedule
from tunelab.core.search.space.tvm_context import schedule_features

RECORDS_KIND = "records"


def not_tunable(what: str) -> TunelabError:
    return TunelabError(
        f"{what}: an imported workload tunelab's catalog does not know; its records can be viewed, "
        "compared, re-measured and exported, not tuned further (tunelab's spaces need a catalog workload)"
    )


class RecordSpace(ScheduledSpace):
    kind = RECORDS_KIND

    def _derive(self, data: dict[str, Any] | None) -> None:
        traces = (data or {}).get("traces")
        if not isinstance(traces, list) or not traces:
            raise SpaceError("a records space needs the imported records' traces")
        self.traces = list(traces)
        self.mod = self.workload.ir_module(self.shape, self.dtype)

    def to_json(self) -> dict[str, Any]:
        return {"kind": RECORDS_KIND, "traces": self.traces}

    @property
    def size(self) -> int:
        return len(self.traces)

    def point(self, index: int) -> Config:
        if not 0 <= index < self.size:
            raise SpaceError(f"record {index} is not in this space of {self.size}")
        return {"record": int(index)}

    def sample(self, rng: np.random.Generator) -> Config:
        raise not_tunable("this space")

    def mutate(self, config: Config, rng: np.random.Generator) -> Config:
        raise not_tunable("this space")

    def crossover(self, a: Config, b: Config, rng: np.random.Generator) -> Config:
        raise not_tunable("this space")

    def check_config(self, config: Config) -> None:
        index = config.get("record") if isinstance(config, dict) else None
        if set(config or {}) != {"record"} or isinstance(index, bool) or not isinstance(index, int):
            raise SpaceError(
                f"a config of a records space names one record ({{'record': N}}), not {config!r}"
            )
        if not 0 <= index < self.size:
            raise SpaceError(f"record {index} is not in this space of {self.size}")

    def knob_vector(self, config: Config) -> np.ndarray:
        return np.array([float(config["record"])])

    def schedule(self, config: Config) -> Any:
        from tvm.s_tir import Schedule, Trace

        self.check_config(config)
        sch = Schedule(self.mod)
        try:  # the whole trace, postprocessors included (as imported): the schedule MetaSchedule measured
            Trace.apply_json_to_schedule(self.traces[config["record"]], sch)
        except Exception as exc:  # noqa: BLE001 - TVM's ScheduleError
            raise invalid_schedule(exc) from None
        return sch

    def features(self, configs: list[Config]) -> np.ndarray:
        # Not the scheduled spaces' zero row for a schedule TVM refuses: an imported record was measured, so
        # one that does not replay here is an error to report, not a point to rank.
        rows = [
            np.concatenate([schedule_features(self.schedule(c), self.target), self.knob_vector(c)])
            for c in configs
        ]
        return np.array(rows) if rows else np.zeros((0, 329))

    def ir_module(self) -> Any:
        return self.mod

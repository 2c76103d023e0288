"""One fresh-process run's records: its measurement and what the machine did meanwhile, as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunelab.core.records_json import JsonRecord


def int_tuple(values: Sequence[Any] | None) -> tuple[int, ...]:
    return tuple(int(v) for v in values or ())


@dataclass(frozen=True, slots=True)
class TelemetryWindow(JsonRecord):
    """What the machine did while one measurement ran: other busy processes (``names``: pid text ->
    process name), throttling, the CPU's clock and load."""

    n: int  # telemetry samples in the window
    other_busy_pids: tuple[int, ...]
    other_gpu_pids: tuple[int, ...]
    names: dict[str, str]
    throttled: bool
    throttle_reasons: tuple[str, ...]
    cpu_freq_mhz: float | None
    cpu_load_mean: float | None

    @property
    def quiet(self) -> bool:
        """No other busy process, nothing else on the GPU, no throttling."""
        return not (self.other_busy_pids or self.other_gpu_pids or self.throttled)


@dataclass(frozen=True, slots=True)
class RecordedTelemetry(JsonRecord):
    """The telemetry stamp the store holds for a trial's own measurement (:meth:`Store.trial_telemetry`),
    in brief; a field the stamp lacks is None."""

    n: int | None
    other_busy_pids: tuple[int, ...] | None
    other_gpu_pids: tuple[int, ...] | None
    throttled: bool | None
    throttle_reasons: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class Measurement(JsonRecord):
    """One schedule measured in one fresh process (run ``run``, at ``position`` in its order).

    ``layout_ms`` (the median per buffer layout), ``reference_ms`` (the reference kernel timed right
    before and after its window in that process) and ``again_ms`` (the median of a second window of the
    recorded layout, begun at ``again_t0``, after the other layouts) feed the schedule's figures and the
    jitter report and are not kept per run in the document."""

    run: int
    position: int
    pid: int | None
    ok: bool
    error: str | None
    load_ms: float | None
    cold_ms: float | None  # the first call: module init, thread pool start, first-touch allocation
    samples_ms: tuple[float, ...] | None  # None when it failed
    t0: float | None  # wall-clock time of the timed window
    t1: float | None
    telemetry: TelemetryWindow | None
    layout_ms: dict[str, float] | None = None
    reference_ms: float | None = None
    again_ms: float | None = None
    again_t0: float | None = None
    # the RPC server ("HOST:PORT") whose fresh session measured it (tunelab.core.trust.remeasure.remote_pool);
    # None: a worker process on this machine
    device: str | None = None

    json_unless_none = frozenset({"device"})
    json_left_out = frozenset({"layout_ms", "reference_ms", "again_ms", "again_t0"})

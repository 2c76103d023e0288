"""One fresh-process run's records: its measurement and what the machine did meanwhile, as JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def int_tuple(values: Sequence[Any] | None) -> tuple[int, ...]:
    return tuple(int(v) for v in values or ())


def maybe_list(values: Sequence[Any] | None) -> list[Any] | None:
    return None if values is None else list(values)


def maybe_tuple(values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


@dataclass(frozen=True, slots=True)
class TelemetryWindow:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "other_busy_pids": list(self.other_busy_pids),
            "other_gpu_pids": list(self.other_gpu_pids),
            "names": dict(self.names),
            "throttled": self.throttled,
            "throttle_reasons": list(self.throttle_reasons),
            "cpu_freq_mhz": self.cpu_freq_mhz,
            "cpu_load_mean": self.cpu_load_mean,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TelemetryWindow:
        return cls(
            n=int(data.get("n") or 0),
            other_busy_pids=int_tuple(data.get("other_busy_pids")),
            other_gpu_pids=int_tuple(data.get("other_gpu_pids")),
            names={str(k): str(v) for k, v in (data.get("names") or {}).items()},
            throttled=bool(data.get("throttled")),
            throttle_reasons=tuple(data.get("throttle_reasons") or ()),
            cpu_freq_mhz=data.get("cpu_freq_mhz"),
            cpu_load_mean=data.get("cpu_load_mean"),
        )


@dataclass(frozen=True, slots=True)
class RecordedTelemetry:
    """The telemetry stamp the store holds for a trial's own measurement (:meth:`Store.trial_telemetry`),
    in brief; a field the stamp lacks is None."""

    n: int | None
    other_busy_pids: tuple[int, ...] | None
    other_gpu_pids: tuple[int, ...] | None
    throttled: bool | None
    throttle_reasons: tuple[str, ...] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "other_busy_pids": maybe_list(self.other_busy_pids),
            "other_gpu_pids": maybe_list(self.other_gpu_pids),
            "throttled": self.throttled,
            "throttle_reasons": maybe_list(self.throttle_reasons),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedTelemetry:
        return cls(
            n=data.get("n"),
            other_busy_pids=maybe_tuple(data.get("other_busy_pids")),
            other_gpu_pids=maybe_tuple(data.get("other_gpu_pids")),
            throttled=data.get("throttled"),
            throttle_reasons=maybe_tuple(data.get("throttle_reasons")),
        )


@dataclass(frozen=True, slots=True)
class Measurement:
    """One schedule measured in one fresh process (run ``run``, at ``position`` in its order).

    ``layout_ms`` (the median per buffer layout) and ``reference_ms`` (the reference kernel in that
    process) feed the schedule's figures and are not kept per run in the document."""

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
    # the RPC server ("HOST:PORT") whose fresh session measured it (tunelab.core.trust.remeasure.remote_pool);
    # None: a worker process on this machine
    device: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run": self.run,
            "position": self.position,
            "pid": self.pid,
            "ok": self.ok,
            "error": self.error,
            "load_ms": self.load_ms,
            "cold_ms": self.cold_ms,
            "samples_ms": maybe_list(self.samples_ms),
            "t0": self.t0,
            "t1": self.t1,
            "telemetry": self.telemetry.to_json() if self.telemetry is not None else None,
        }
        if self.device is not None:
            data["device"] = self.device
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        telemetry = data.get("telemetry")
        return cls(
            run=int(data.get("run") or 0),
            position=int(data.get("position") or 0),
            pid=data.get("pid"),
            ok=bool(data.get("ok")),
            error=data.get("error"),
            load_ms=data.get("load_ms"),
            cold_ms=data.get("cold_ms"),
            samples_ms=maybe_tuple(data.get("samples_ms")),
            t0=data.get("t0"),
            t1=data.get("t1"),
            telemetry=TelemetryWindow.from_json(telemetry) if telemetry else None,
            device=data.get("device"),
        )

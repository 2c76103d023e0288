"""The Hardware view's one door to telemetry: the store's samples and trial stamps, read safely.

Kept apart so the view never depends on the sampler's internals: a store that cannot be read, or a
machine without a GPU, is said in words instead of raising.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store
from tunelab.core.usecases.monitor import TelemetrySample

# Panels of the Hardware view: (key, axis label, [(field, legend name)]); only fields with data are drawn.
PANELS = (
    ("temperature", "Temperature (°C)", (("gpu_temp_c", "GPU"), ("cpu_temp_c", "CPU"))),
    ("power", "Power (W)", (("gpu_power_w", "GPU"), ("gpu_power_limit_w", "GPU limit"))),
    (
        "clocks",
        "Clock (MHz)",
        (("gpu_sm_clock_mhz", "GPU SM"), ("gpu_mem_clock_mhz", "GPU memory"), ("cpu_freq_mhz", "CPU")),
    ),
    (
        "utilization",
        "Utilization (%)",
        (
            ("gpu_util_pct", "GPU"),
            ("gpu_mem_util_pct", "GPU memory"),
            ("cpu_load_mean", "CPU, mean of cores"),
        ),
    ),
    ("memory", "GPU memory (MiB)", (("gpu_mem_used_mib", "used"),)),
    (
        "others",
        "Other busy processes",
        (("other_busy_procs", "on the CPU"), ("other_gpu_procs", "on the GPU")),
    ),
)
FIELDS = tuple(field for _, _, series in PANELS for field, _ in series)


# This machine's GPU as NVML reports it, once a worker has asked (NVML's init can take a second, and a
# driver that hangs must not hang the window); what is said until then.
_gpu_status: tuple[bool, str] | None = None
CHECKING_GPU = (False, "checking for an NVIDIA GPU…")


def probe_gpu_status() -> tuple[bool, str]:
    """(an NVIDIA GPU is readable here, what the telemetry sampler would say about it). In a worker."""
    from tunelab.core.usecases.monitor import default_gpu_source

    try:
        source = default_gpu_source()
    except Exception as exc:  # noqa: BLE001 - a probe: never let it break the view
        return False, f"no NVIDIA GPU: CPU only ({exc})"
    try:
        return bool(source.available), str(source.status)
    finally:
        try:
            source.close()
        except Exception:  # noqa: BLE001
            pass


def machine_gpu_status() -> tuple[bool, str]:
    """(an NVIDIA GPU is readable here, what the sampler would say about it) once known (gpu_status_known),
    CHECKING_GPU until then: views ask with ask_gpu_status and redraw when it is known."""
    return _gpu_status or CHECKING_GPU


def gpu_status_known() -> bool:
    return _gpu_status is not None


class GpuStatusAsker(QObject):
    """Asks NVML once per process, in a worker; `known` when the answer is in machine_gpu_status."""

    known = Signal()

    def __init__(self) -> None:
        super().__init__()
        worker = CallWorker(None, probe_gpu_status)
        worker.succeeded.connect(self._on_answer)
        keep_alive(worker).start()

    def _on_answer(self, status: tuple[bool, str]) -> None:
        global _gpu_status
        _gpu_status = (bool(status[0]), str(status[1]))
        self.known.emit()


_asker: GpuStatusAsker | None = None


def ask_gpu_status() -> GpuStatusAsker:
    """The process's one asker (it asks when first called); connect to its `known` to redraw."""
    global _asker
    if _asker is None:
        _asker = GpuStatusAsker()
    return _asker


def read_samples(store: Store, session_id: int, since_t: float = 0.0) -> list[TelemetrySample]:
    """The session's telemetry samples after `since_t`, oldest first."""
    try:
        return list(store.telemetry(session_id, since_t=since_t))
    except TunelabError:
        raise
    except Exception as exc:  # a store that fails to read (locked, vanished): say so, don't crash
        raise TunelabError(f"cannot read telemetry: {type(exc).__name__}: {exc}") from exc


def is_throttled(sample: TelemetrySample) -> bool:
    """A limiting throttle reason was seen in this reading."""
    return sample.throttled


def read_trial_stamps(store: Store, session_id: int) -> dict[int, dict[str, Any]]:
    """What the hardware did while each trial ran (trial id -> summary)."""
    try:
        return dict(store.trial_telemetry(session_id))
    except TunelabError:
        raise
    except Exception as exc:  # a store that fails to read (locked, vanished): say so, don't crash
        raise TunelabError(f"cannot read the trials' telemetry stamps: {type(exc).__name__}: {exc}") from exc


def _pids(pids: list[int], limit: int = 12) -> str:
    shown = ", ".join(str(p) for p in pids[:limit])
    return f"pid {shown}" + (f" and {len(pids) - limit} more" if len(pids) > limit else "")


def disturbance(stamp: dict[str, Any] | None) -> dict[str, Any] | None:
    """Why a trial's figure may be unfair, from its stamp: ``{"kind", "cause", "pids"}`` or None.

    kind: "throttled" (the GPU limited its clocks), "gpu" (another process used the GPU), "busy"
    (another process was busy on the CPU) or "warning" (the session's own cool-down warning only).
    """
    if not stamp:
        return None
    busy = [int(p) for p in stamp.get("other_busy_pids") or []]
    gpu = [int(p) for p in stamp.get("other_gpu_pids") or []]
    throttled = bool(stamp.get("throttled"))
    warning = stamp.get("warning")
    if not (busy or gpu or throttled or warning):
        return None
    parts = []
    if throttled:
        reasons = ", ".join(stamp.get("throttle_reasons") or []) or "no reason given"
        parts.append(f"the GPU was throttled ({reasons})")
    if gpu:
        parts.append(
            f"{'another process' if len(gpu) == 1 else f'{len(gpu)} other processes'} used the GPU "
            f"({_pids(gpu)})"
        )
    if busy:
        parts.append(
            f"{'another process was' if len(busy) == 1 else f'{len(busy)} other processes were'} busy "
            f"on the CPU ({_pids(busy)})"
        )
    kind = "throttled" if throttled else "gpu" if gpu else "busy" if busy else "warning"
    cause = "measured while " + " and ".join(parts) if parts else str(warning)
    return {
        "kind": kind,
        "cause": cause,
        "pids": sorted(set(busy) | set(gpu)),
        "warning": warning,
        "throttle_reasons": list(stamp.get("throttle_reasons") or []),
    }

"""Whether this machine is fit to time kernels now: no other busy process, no throttled or hot GPU."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

GPU_HOT_C = 85.0


def busy_reason(sample: Any) -> str | None:
    """Why measuring now would be unfair (another busy process, throttling, a hot GPU), or None."""
    if sample is None:
        return None
    if sample.other_busy_procs:
        pids = ", ".join(str(p) for p in sample.other_busy_pids[:3])
        return f"measured while {sample.other_busy_procs} other process(es) were busy on the CPU (pid {pids})"
    if sample.other_gpu_procs:
        return f"measured while {sample.other_gpu_procs} other process(es) used the GPU"
    if sample.throttled:
        return f"measured while the GPU was throttled ({', '.join(sample.throttle_reasons)})"
    if sample.gpu_temp_c is not None and sample.gpu_temp_c >= GPU_HOT_C:
        return f"measured while the GPU was hot ({sample.gpu_temp_c:.0f} C)"
    return None


def cool_down(
    sampler: Any, limit_s: float, sampler_started: float, cancelled: Callable[[], bool]
) -> str | None:
    """Wait (up to `limit_s`) while the machine is hot or busy; the reason if it stays so.
    ``sampler_started``: when the telemetry sampler started (time.time()); ``cancelled`` ends the wait."""
    # The sampler knows which other processes are busy only after two process scans (~1 s).
    settle = sampler_started + 1.2 - time.time()
    if limit_s > 0 and settle > 0:
        time.sleep(min(settle, limit_s))
    deadline = time.time() + limit_s
    while True:
        reason = busy_reason(sampler.latest())
        if reason is None or time.time() >= deadline or cancelled():
            return reason
        time.sleep(0.25)

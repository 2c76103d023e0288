"""Hardware readings for the Hardware view's tests: a GPU under a kernel burst, as the sampler stores it."""

from __future__ import annotations

from collections.abc import Callable

from tunelab.core.telemetry.readings import TelemetrySample


def gpu_burst(
    t0: float, clock_mhz: Callable[[int], float], throttled: Callable[[int], bool] = lambda i: False
) -> list[TelemetrySample]:
    """50 readings 0.1 s apart from ``t0`` of a GPU at 95 % warming up and drawing more power under its
    300 W cap: reading ``i`` at SM clock ``clock_mhz(i)``, slowed by the power cap where ``throttled(i)``."""
    return [
        TelemetrySample(
            t=t0 + 0.1 * i,
            gpu_temp_c=60 + i * 0.1,
            gpu_power_w=200 + i,
            gpu_power_limit_w=300,
            gpu_sm_clock_mhz=clock_mhz(i),
            gpu_util_pct=95,
            throttle_reasons=("sw_power_cap",) if throttled(i) else (),
            cpu_load_mean=40.0,
        )
        for i in range(50)
    ]

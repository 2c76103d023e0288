"""Make ``nvml_trace_h200.jsonl``: a SYNTHETIC NVML trace of an H200 under a kernel burst.

No GPU was available when tunelab's telemetry was written, so this trace was not recorded from a
device. It is generated, deterministically, in the shape of NVIDIA H200 SXM specifications and of
what NVML reports on Hopper GPUs: a 700 W power limit, a 1980 MHz maximum SM clock stepping in
15 MHz bins, HBM3e at a fixed 3201 MHz, 143 771 MiB of memory. Replace it with a real recording
(``tunelab.core.telemetry.nvml.record_nvml_trace``) when a GPU machine is at hand; the format is the same.

The story, 300 readings 100 ms apart (30 s):

* 0.0-3.0 s   idle: ~35 W, 30 C, SM clock 345 MHz, reason ``idle``; our process holds a CUDA context.
* 3.0-4.5 s   a kernel burst starts: utilization 100 %, SM clock 1980 MHz, power ramps up.
* 4.5-22.0 s  power pinned at the cap (~690 W of 700 W): ``sw_power_cap`` is set and the SM clock
              sinks from 1980 towards ~1650 MHz as the chip heats (leakage grows with temperature);
              the temperature climbs towards ~75 C.
* 10.0-18.0 s a second process (pid 5151) runs on the GPU with 8 GiB.
* 22.0-30.0 s the burst ends: power falls back to ~35 W, clocks drop to idle, the chip cools.

Lines are raw NVML values (mW, bytes, the clock event reason bitmask), as ``record_nvml_trace``
writes them; the first line is a header whose ``own_pid`` is the recording process.

    python tests/core/data/make_nvml_trace.py            # rewrites nvml_trace_h200.jsonl
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACE = HERE / "nvml_trace_h200.jsonl"

N = 300
DT = 0.1
OWN_PID = 4242
OTHER_PID = 5151
MIB = 1 << 20
MEM_TOTAL = 143_771 * MIB
POWER_LIMIT_MW = 700_000
SM_MAX, SM_IDLE, SM_FLOOR = 1980, 345, 1650
MEM_CLOCK = 3201
IDLE_W, CAP_W = 35.0, 690.0
AMBIENT_C = 30.0
BURST = (30, 220)  # sample indices [start, end)
OTHER = (100, 180)

REASON_IDLE = 0x1
REASON_SW_POWER_CAP = 0x4


def trace_lines(seed: int = 200) -> list[str]:
    rng = random.Random(seed)
    meta = {
        "device": "NVIDIA H200",
        "interval_s": DT,
        "own_pid": OWN_PID,
        "memory_total_bytes": MEM_TOTAL,
        "power_limit_w": POWER_LIMIT_MW / 1000,
        "synthetic": True,
        "generator": "tests/core/data/make_nvml_trace.py",
    }
    lines = [json.dumps({"meta": meta}, separators=(",", ":"))]
    temp = AMBIENT_C
    power = IDLE_W
    sm = SM_IDLE
    for i in range(N):
        busy = BURST[0] <= i < BURST[1]
        other = OTHER[0] <= i < OTHER[1]
        since = (i - BURST[0]) * DT
        if busy:
            # Demand rises over ~1.5 s; the power controller holds it at the cap from then on.
            ramp = min(1.0, since / 1.5)
            power = IDLE_W + (CAP_W - IDLE_W) * (1 - (1 - ramp) ** 2) + rng.uniform(-5.0, 8.0)
            power = min(power, POWER_LIMIT_MW / 1000 - 0.4)
            capped = ramp >= 1.0
            if capped:
                # Hotter silicon leaks more, so the cap allows lower clocks: 1980 -> ~1650 MHz.
                heat = min(1.0, max(0.0, (temp - 45.0) / 30.0))
                target = SM_MAX - (SM_MAX - SM_FLOOR) * heat + rng.uniform(-20.0, 20.0)
                sm = int(min(SM_MAX - 15, max(SM_FLOOR - 15, round(target / 15) * 15)))
            else:
                sm = SM_MAX
            util = rng.choice((99, 100, 100, 100))
            mem_util = int(round(44 + 8 * math.sin(i / 7) + rng.uniform(-3, 3)))
            reasons = REASON_SW_POWER_CAP if capped and sm < SM_MAX else 0
        else:
            after = (i - BURST[1]) * DT if i >= BURST[1] else None
            power = IDLE_W + (power - IDLE_W) * math.exp(-DT / 0.5) + rng.uniform(-1.5, 1.5)
            # Clocks stay up for ~1 s after the last kernel, then drop to idle.
            sm = SM_MAX if after is not None and after < 1.0 else SM_IDLE
            util = 0
            mem_util = 0
            reasons = REASON_IDLE
        # First-order thermal model: heading for 30 C + 0.072 C/W, time constant 6 s.
        steady = AMBIENT_C + 0.072 * (power - IDLE_W)
        temp += (steady - temp) * (1 - math.exp(-DT / 6.0))
        pids = [OWN_PID] + ([OTHER_PID] if other else [])
        used = 512 * MIB + (2_400 * MIB if busy else 0) + (8_192 * MIB if other else 0)
        record = {
            "dt": round(i * DT, 1),
            "temp_c": int(round(temp)),
            "power_mw": int(round(power * 1000)),
            "power_limit_mw": POWER_LIMIT_MW,
            "sm_clock_mhz": sm,
            "mem_clock_mhz": MEM_CLOCK,
            "gpu_util_pct": util,
            "mem_util_pct": max(0, mem_util),
            "mem_used_bytes": used,
            "throttle_mask": reasons,
            "compute_pids": pids,
        }
        lines.append(json.dumps(record, separators=(",", ":")))
    return lines


def write(path: Path = TRACE) -> Path:
    path.write_text("\n".join(trace_lines()) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write())

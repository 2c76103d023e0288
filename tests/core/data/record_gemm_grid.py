"""Record a real, exhaustive measurement of a small GEMM template space for the replay tests.

Runs tunelab's own grid tuner over a restricted template space of GEMM 64x64x64 on this machine's
CPU (LLVM) and writes every config with its measured median latency to gemm64_grid_llvm.json.
Tuner tests then replay these real measurements (Kernel Tuner's SimulationRunner idea) instead of
a synthetic table. Re-run it on another machine to record that machine:

    python tests/core/data/record_gemm_grid.py
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.session.loop import check_spec, create_session
from tunelab.core.store import Store

SHAPE = {"M": 64, "N": 64, "K": 64}
KNOBS = {
    "tile_i": [[1], [4], [16], [64]],
    "tile_j": [[1], [4], [16], [64]],
    "tile_k": [[1], [8], [64]],
    "order": ["ro,si,ri", "ro,ri,si", "si,ro,ri"],
    "unroll": [0, 64],
    "vectorize": [True, False],
    "parallel": [True],
}


def main(out: Path) -> None:
    spec = SessionSpec(
        workload="gemm",
        shape=SHAPE,
        target="llvm",
        space_kind="template",
        tuner="grid",
        trials=10**6,
        batch=16,
        measure=MeasureOptions(number=5, repeat=5, min_repeat_ms=2),
    )
    *_, space = check_spec(spec)
    data = space.to_json()
    for knob in data["knobs"]:
        knob["candidates"] = KNOBS[knob["name"]]
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "record.sqlite") as store:
        session = create_session(
            store, SessionSpec(**{**spec.__dict__, "space": data, "trials": 4 * 4 * 3 * 3 * 2 * 2})
        )
        started = time.time()
        trials = list(session.run())
    table = [{"config": t.config, "latency_ms": t.latency_ms, "status": t.status} for t in trials]
    out.write_text(
        json.dumps(
            {
                "workload": "gemm",
                "shape": SHAPE,
                "target": session.target.json,
                "knobs": KNOBS,
                "machine": platform.processor() or platform.machine(),
                "recorded_s": round(time.time() - started, 1),
                "trials": table,
            },
            indent=0,
        )
    )
    print(f"{len(table)} configs in {time.time() - started:.0f} s -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main(Path(__file__).with_name("gemm64_grid_llvm.json"))

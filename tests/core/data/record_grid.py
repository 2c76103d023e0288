"""Record real, exhaustive measurements of small template spaces for the replay tests and benchmarks.

Runs tunelab's own grid tuner over a restricted template space on this machine's CPU (LLVM) and writes
every config with its measured median latency (None where it failed) to ``<name>_grid_llvm.json``.
Tuner tests and the tuner-score benchmark then replay these real measurements (Kernel Tuner's
SimulationRunner idea) instead of a synthetic table. Re-run it on another machine to record that one:

    python tests/core/data/record_grid.py            # every recording below
    python tests/core/data/record_grid.py conv2d     # one of them
    python tests/core/data/record_grid.py gemm1024   # the benchmarks' GEMM 1024^3 (tests/benchmarks/data)

Each grid's knob candidates are cut down so that the whole space is a few hundred configs (a few
minutes of building and running on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.session.loop import check_spec, create_session
from tunelab.core.store import Store

HERE = Path(__file__).resolve().parent


# The knobs past the tiles, cut down alike in every grid: 3 * 2 * 2 * 1 = 12 of each tiling's configs.
LOOP_KNOBS: dict[str, list[Any]] = {
    "order": ["ro,si,ri", "ro,ri,si", "si,ro,ri"],
    "unroll": [0, 64],
    "vectorize": [True, False],
    "parallel": [True],
}

# name -> (workload, shape, knob candidates); a knob left out keeps the workload's default candidates.
GRIDS: dict[str, tuple[str, dict[str, int], dict[str, list[Any]]]] = {
    # 4 * 4 * 3 * 3 * 2 * 2 = 576 configs
    "gemm64": (
        "gemm",
        {"M": 64, "N": 64, "K": 64},
        {
            "tile_i": [[1], [4], [16], [64]],
            "tile_j": [[1], [4], [16], [64]],
            "tile_k": [[1], [8], [64]],
            **LOOP_KNOBS,
        },
    ),
    # A skinny GEMM: 2 * 3 * 3 * 3 * 2 * 2 = 216 configs
    "gemm16x256x256": (
        "gemm",
        {"M": 16, "N": 256, "K": 256},
        {
            "tile_i": [[1], [16]],
            "tile_j": [[1], [16], [64]],
            "tile_k": [[1], [8], [64]],
            **LOOP_KNOBS,
        },
    ),
    # The catalog's conv2d (NCHW) at a small 3x3 layer: 3 * 2 * 2 * 2 * 3 * 2 * 2 = 288 configs
    "conv2d": (
        "conv2d_nchw",
        {"N": 1, "C": 16, "H": 14, "W": 14, "K": 16, "R": 3, "S": 3, "stride": 1, "pad": 1, "dilation": 1},
        {
            "tile_n": [[1]],
            "tile_f": [[1], [4], [16]],
            "tile_y": [[1], [14]],
            "tile_x": [[1], [14]],
            "tile_rc": [[1], [16]],
            "tile_ry": [[1]],
            "tile_rx": [[3]],
            **LOOP_KNOBS,
        },
    ),
}


# Recordings too large for the tests' replays, for the benchmarks alone (tests/benchmarks/data): name ->
# (workload, shape, knob candidates, how each config is measured). Not recorded unless named.
BENCH_DATA = HERE.parents[1] / "benchmarks" / "data"
BENCHMARK_GRIDS: dict[str, tuple[str, dict[str, int], dict[str, list[Any]], MeasureOptions]] = {
    # Issue 28's GEMM 1024^3 template space (16,464 configs, hours on 2 cores) cut to the tiles that keep a
    # 1024^3 kernel within seconds a call: 4 * 4 * 3 * 3 * 2 * 2 = 576 configs. One run of three samples
    # each: a 2 GFLOP kernel is long enough to be its own figure, and the runner's leader band times the
    # contenders fully while a clearly slow one is timed once (MeasureOptions.leader_band).
    "gemm1024": (
        "gemm",
        {"M": 1024, "N": 1024, "K": 1024},
        {
            "tile_i": [[8], [16], [32], [64]],
            "tile_j": [[8], [16], [32], [64]],
            "tile_k": [[4], [16], [64]],
            **LOOP_KNOBS,
        },
        MeasureOptions(number=1, repeat=3, min_repeat_ms=2),
    ),
}


def recording_path(name: str) -> Path:
    folder = BENCH_DATA if name in BENCHMARK_GRIDS else HERE
    return folder / f"{name}_grid_llvm.json"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def record(name: str) -> Path:
    if name in BENCHMARK_GRIDS:
        workload, shape, knobs, measure = BENCHMARK_GRIDS[name]
    else:
        workload, shape, knobs = GRIDS[name]
        measure = MeasureOptions(number=5, repeat=5, min_repeat_ms=2)
    spec = SessionSpec(
        workload=workload,
        shape=shape,
        target="llvm",
        space_kind="template",
        tuner="grid",
        trials=10**6,
        batch=16,
        measure=measure,
    )
    space = check_spec(spec).space
    data = space.to_json()
    for knob in data["knobs"]:
        knob["candidates"] = knobs.get(knob["name"], knob["candidates"])
    spec = SessionSpec(**{**spec.__dict__, "space": data})
    space = check_spec(spec).space
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "record.sqlite") as store:
        session = create_session(store, SessionSpec(**{**spec.__dict__, "trials": space.size}))
        trials = list(session.run())
    assert len(trials) == space.size, f"{len(trials)} trials for a space of {space.size}"
    doc = {
        "workload": workload,
        "shape": shape,
        "target": session.target.json,
        "knobs": {k["name"]: k["candidates"] for k in data["knobs"]},
        "machine": cpu_model(),
        "recorded_s": round(time.time() - started, 1),
    }
    # Only what a replay needs, one trial a line: the file stays small and its diffs readable.
    lines = [
        json.dumps(
            {"config": t.config, "latency_ms": t.latency_ms, "status": t.status}, separators=(",", ":")
        )
        for t in trials
    ]
    out = recording_path(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps(doc, indent=1)[:-2]
    out.write_text(head + ',\n "trials": [\n' + ",\n".join(lines) + "\n ]\n}\n")
    json.loads(out.read_text())  # what was written reads back
    print(f"{name}: {len(trials)} configs in {time.time() - started:.0f} s -> {out}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = [*GRIDS, *BENCHMARK_GRIDS]
    parser.add_argument(
        "names", nargs="*", help=f"recordings to make, of {', '.join(known)} (default: {', '.join(GRIDS)})"
    )
    names = parser.parse_args().names or list(GRIDS)
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"no recording named {', '.join(unknown)}; choose from {', '.join(known)}")
    for name in names:
        record(name)


if __name__ == "__main__":
    main()

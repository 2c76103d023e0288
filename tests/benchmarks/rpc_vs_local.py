"""Kernel quality measured through TVM's RPC tracker against a local session of the same budget.

A real tracker and two servers on 127.0.0.1 (``tests/rpc_cluster.py``), each running kernels on one
thread, as a person splitting a 2-core host between two servers would; the local session's kernels run
on one thread too (``TVM_NUM_THREADS=1``), so both searches optimise for the same per-kernel resources.
Per seed, a local session and an ``--rpc`` session (``--rpc-workers``, default 2: both servers measuring at once)
tune the same problem with the same space, tuner, budget and timing options; then both winners are built
and timed side by side in this process, round by round in alternating order. The figure is
local time / RPC time of the winners (1: the same quality; above 1: the RPC session's kernel is faster).

    python tests/benchmarks/rpc_vs_local.py --out tests/benchmarks/results/rpc_vs_local.json

Prints the BENCHMARKS.md table (markdown) on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["TVM_NUM_THREADS"] = "1"  # before TVM starts its pool: the servers' share of the cores
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the cluster helper

from benchmarks.run_suite import MEASURE  # the kernel suite's timing options
from rpc_cluster import start_cluster

from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.search.space.auto import default_auto_space
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store

ROUNDS = 7


def tune(
    store: Store, shape: dict[str, int], trials: int, seed: int, rpc: dict[str, object], search_threads: int
) -> dict:
    spec = SessionSpec(
        workload="gemm",
        shape=shape,
        target="llvm",
        space_kind="auto",
        space=default_auto_space("llvm"),
        tuner="evolutionary",
        tuner_options={"search_threads": search_threads},
        trials=trials,
        batch=16,
        seed=seed,
        measure=MeasureOptions(**MEASURE, **rpc),  # type: ignore[arg-type]
    )
    started = time.perf_counter()
    session = create_session(store, spec)
    for _ in session.run():
        pass
    wall_s = time.perf_counter() - started
    trials_done = store.trials(session.session_id)
    ok = [t for t in trials_done if t.ok and t.latency_ms is not None]
    best = min(ok, key=lambda t: t.latency_ms or float("inf"))
    return {
        "session": session.session_id,
        "wall_s": wall_s,
        "n_ok": len(ok),
        "best_trial": best.number,
        "best_ms_in_session": best.latency_ms,
        "devices": sorted({t.device for t in trials_done if t.device}),
        "schedule": session.space.schedule(best.config),
        "target": session.target,
    }


def side_by_side(kernels: dict[str, tuple], shape: dict[str, int]) -> dict[str, list[float]]:
    """Each winner built here and timed round by round, alternating which goes first: medians per round."""
    import numpy as np
    import tvm

    from tunelab.core.measure.runner import fast_build
    from tunelab.core.measure.timing import kernel_timer
    from tunelab.core.workloads.catalog import get_workload

    workload = get_workload("gemm")
    full = workload.parse_shape(shape, complete=True)
    inputs = workload.make_inputs(full, "float32", 0)
    expected = workload.reference(inputs, full)
    rtol, atol = workload.tolerance("float32", full)
    dev = tvm.cpu(0)
    timers = {}
    folder = Path(tempfile.mkdtemp(prefix="tunelab-rpc-vs-local-"))
    for label, (sch, target) in kernels.items():
        path = folder / f"{label}.so"
        fast_build(sch.mod, target.tvm_target(), None).export_library(str(path))
        lib = tvm.runtime.load_module(str(path))
        args = [tvm.runtime.tensor(x, dev) for x in inputs]
        args.append(tvm.runtime.tensor(np.zeros(workload.output_shape(full), "float32"), dev))
        lib["main"](*args)
        if not np.allclose(args[-1].numpy(), expected, rtol=rtol, atol=atol):
            raise SystemExit(f"{label}: the winner's result is wrong")
        timer = kernel_timer(lib, dev, number=3, repeat=3, min_repeat_ms=20, entry="main")
        timers[label] = lambda timer=timer, args=args: [1e3 * s for s in timer(*args)]
    rounds: dict[str, list[float]] = {label: [] for label in timers}
    labels = list(timers)
    for r in range(ROUNDS):
        for label in labels if r % 2 == 0 else labels[::-1]:
            rounds[label].append(statistics.median(timers[label]()))
    return rounds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", default="1024,1024,1024", help="M,N,K of the GEMM")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--rpc-workers", type=int, default=2, help="candidates in flight on the servers")
    parser.add_argument(
        "--search-threads",
        type=int,
        default=0,
        help="the evolutionary tuner's search_threads: 0 every core (its default), 1 the same proposals for "
        "the same seed and measurements, so the two paths start from one search and part only where "
        "their measurements differ",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    m, n, k = (int(x) for x in args.shape.split(","))
    shape = {"M": m, "N": n, "K": k}
    started = time.time()
    load_start = os.getloadavg()[0]
    cluster = start_cluster(2)
    rows = []
    try:
        rpc = {"rpc_tracker": str(cluster.tracker), "rpc_key": cluster.key, "rpc_workers": args.rpc_workers}
        for seed in (int(s) for s in args.seeds.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                store = Store(Path(tmp) / "tunelab.sqlite")
                # alternate which goes first, so drift over the run does not favour one side
                order = [("local", {}), ("rpc", rpc)]
                order = order if seed % 2 == 0 else order[::-1]
                runs = {
                    name: tune(store, shape, args.trials, seed, extra, args.search_threads)
                    for name, extra in order
                }
                store.close()
            rounds = side_by_side({name: (r["schedule"], r["target"]) for name, r in runs.items()}, shape)
            row = {"seed": seed}
            for name, r in runs.items():
                row[name] = {
                    key: value for key, value in r.items() if key not in ("schedule", "target", "session")
                }
                row[name]["rounds_ms"] = rounds[name]
                row[name]["median_ms"] = statistics.median(rounds[name])
            row["local_over_rpc"] = row["local"]["median_ms"] / row["rpc"]["median_ms"]
            rows.append(row)
            print(
                f"[rpc-vs-local] seed {seed}: local/rpc {row['local_over_rpc']:.2f}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        cluster.close()
    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "machine": {
            "cores": os.cpu_count(),
            "cpu": platform.processor(),
            "load_avg": [load_start, os.getloadavg()[0]],
        },
        "shape": shape,
        "trials": args.trials,
        "rpc_workers": args.rpc_workers,
        "search_threads": args.search_threads,
        "measure": MEASURE,
        "rows": rows,
        "wall_s": time.time() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print("| seed | local ms | RPC ms | local / RPC | local wall s | RPC wall s | RPC servers |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        local, rpc_run = row["local"], row["rpc"]
        print(
            f"| {row['seed']} | {local['median_ms']:.3f} | {rpc_run['median_ms']:.3f} | {row['local_over_rpc']:.2f} | "
            f"{local['wall_s']:.0f} | {rpc_run['wall_s']:.0f} | {len(rpc_run['devices'])} |"
        )
    ratios = [row["local_over_rpc"] for row in rows]
    print(f"\nmedian local / RPC: {statistics.median(ratios):.2f} over {len(ratios)} seeds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The search alone on a CUDA target, built without a GPU: milliseconds per proposed batch.

A tuning session on a GPU spends its time between rounds in the evolutionary tuner (MetaSchedule's
evolutionary search, its cost model's feature extraction and ranking) and in replaying each proposal
as a schedule. This runs exactly that, with nothing built or measured: the tuner is asked for a batch as
a session's task asks (``TuningTask.ask_valid``: each proposal scheduled, the postprocessors, VerifyGPUCode
included, run; the rejected told back as failures and asked again), and the batch is told back with
stand-in latencies (a fixed function of each config, so that the cost model trains on something and a
run repeats for a seed; the figures are the search's time, not its quality).

    python tests/benchmarks/cuda_search.py --rounds 4 --batch 16 --out tests/benchmarks/results/cuda_search.json
    python tests/benchmarks/cuda_search.py --options '{"population_size": 512, "init_min_unmeasured": 50}'
    python tests/benchmarks/cuda_search.py --prefetch --measure-s 10
    python tests/benchmarks/cuda_search.py --tuner random --rounds 8 --batch 8   # any tuner of auto spaces

With ``--measure-s S`` each batch's building and measuring is stood for by S seconds of waiting; with
``--prefetch`` the next batch is proposed meanwhile, as a session on a GPU does, and a round's search is
what the loop still waited for.

Prints one line per round and a summary (median / max ms per batch, round 0 apart: its first
population is sampled from nothing; the share of proposals the target rejected: a session asks again for
each, a batch is told back with the rejected ones as failures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tunelab.core.records import SessionSpec
from tunelab.core.search.space.factory import make_space
from tunelab.core.search.tuners.base import Observation
from tunelab.core.session.task import TuningTask
from tunelab.core.store import Store
from tunelab.core.target.info import H200_TARGET, resolve_target
from tunelab.core.workloads.catalog import get_workload

H200 = H200_TARGET


def stand_in_ms(key: str) -> float:
    """A latency that depends only on the config (0.5-5.5 ms): the cost model learns a fixed table."""
    return 0.5 + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF * 5.0


def session_task(store: Store, space: Any, args: argparse.Namespace, shape: dict, target: Any) -> TuningTask:
    """The task a session of this tuner would run, in a store of its own: its batches are asked as the
    session asks them (`TuningTask.ask_valid`: the rejected told back as failures, asked again)."""
    options = json.loads(args.options) if args.options else {}
    spec = SessionSpec(
        workload=args.workload,
        shape=shape,
        dtype=args.dtype,
        space_kind="auto",
        tuner=args.tuner,
        tuner_options=options,
        seed=args.seed,
    )
    sid = store.create_session(
        spec,
        target_json=target.json,
        target_kind=target.kind,
        space_json=space.to_json(),
        tvm_version="",
        flops=0.0,
    )
    return TuningTask(store.tasks(sid)[0], space, [], False, store.session(sid), None)


def run(args: argparse.Namespace) -> dict:
    workload = get_workload(args.workload)
    shape = workload.parse_shape(args.shape, complete=True)
    target = resolve_target(args.target)
    space = make_space(workload, shape, args.dtype, target, "auto", None)
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "search.sqlite") as store:
        task = session_task(store, space, args, shape, target)
    tuner = task.tuner
    if args.prefetch and not hasattr(tuner, "prefetch"):
        raise SystemExit(f"--prefetch: the {args.tuner} tuner does not propose ahead")
    rounds = []
    profiler = None
    if args.profile:
        from tvm.s_tir import meta_schedule as ms

        profiler = ms.Profiler()
        profiler.__enter__()
    try:
        for index in range(args.rounds):
            start, cpu_start = time.perf_counter(), time.process_time()
            rejected: list[str] = []
            batch = task.ask_valid(args.batch, rejected.append)  # each config scheduled, as a session does
            end = time.perf_counter()
            if args.prefetch:
                tuner.prefetch(args.batch)  # as a session on a GPU: the next batch while this one is measured
            time.sleep(args.measure_s)  # stands in for building and measuring on the GPU
            telling = time.perf_counter()
            for config, _schedule in batch:
                task.measured.add(task.key(config))
            tuner.tell([Observation(c, stand_in_ms(space.key(c))) for c, _ in batch])
            told, cpu_told = time.perf_counter(), time.process_time()
            row = {
                "round": index,
                "proposed": len(batch) + len(rejected),
                "rejected": len(rejected),
                "short": args.batch - len(batch),  # fewer than asked: task.spent says why
                "ask_ms": (end - start) * 1e3,  # asking, scheduling, and asking again for the rejected
                "tell_ms": (told - telling) * 1e3,  # with a prefetch: the wait for it
                # what the loop waited for: the search, less what a prefetch hid behind the measuring
                "search_ms": (told - start - args.measure_s) * 1e3,
                # CPU seconds of every thread of this process: what a busy machine does not inflate
                "cpu_ms": (cpu_told - cpu_start) * 1e3,
            }
            rounds.append(row)
            print(
                f"round {index}: {row['search_ms']:.0f} ms, CPU {row['cpu_ms']:.0f} ms ({row['proposed']} proposed, "
                f"ask {row['ask_ms']:.0f}, {row['rejected']} rejected, tell {row['tell_ms']:.0f})",
                flush=True,
            )
    finally:
        tuner.close()
        if profiler is not None:
            profiler.__exit__(None, None, None)
            print(profiler.table())
    later = [r["search_ms"] for r in rounds[1:]] or [rounds[0]["search_ms"]]
    later_cpu = [r["cpu_ms"] for r in rounds[1:]] or [rounds[0]["cpu_ms"]]
    return {
        "workload": args.workload,
        "shape": shape,
        "dtype": args.dtype,
        "target": json.loads(args.target) if args.target.lstrip().startswith("{") else args.target,
        "tuner": args.tuner,
        "options": dict(tuner.options),
        "sizes": dict(getattr(tuner, "sizes", {})),  # what MetaSchedule's EvolutionarySearch was given
        "batch": args.batch,
        "measure_s": args.measure_s,
        "prefetch": args.prefetch,
        "seed": args.seed,
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "rounds": rounds,
        "round0_ms": rounds[0]["search_ms"],
        "later_median_ms": statistics.median(later),
        "later_max_ms": max(later),
        "later_median_cpu_ms": statistics.median(later_cpu),
        # the share of proposals the target refuses (VerifyGPUCode): a session asks again for each
        "rejected_share": sum(r["rejected"] for r in rounds) / max(1, sum(r["proposed"] for r in rounds)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="gemm")
    parser.add_argument("--shape", default="M=4096,N=4096,K=4096")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--target", default=json.dumps(H200))
    parser.add_argument("--tuner", default="evolutionary", help="a tuner that drives an auto space")
    parser.add_argument("--options", default="", help="the tuner's options, as JSON")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="")
    parser.add_argument("--measure-s", type=float, default=0.0, help="seconds a batch's measuring stands for")
    parser.add_argument(
        "--prefetch", action="store_true", help="propose the next batch while one is measured"
    )
    parser.add_argument("--profile", action="store_true", help="print MetaSchedule's profiler table")
    args = parser.parse_args(argv)
    result = run(args)
    print(
        f"round 0: {result['round0_ms']:.0f} ms; later rounds: median {result['later_median_ms']:.0f} ms, "
        f"max {result['later_max_ms']:.0f} ms per batch of {args.batch} "
        f"(CPU median {result['later_median_cpu_ms']:.0f} ms); {result['rejected_share']:.0%} of the "
        f"proposals rejected "
        f"(load average {result['load_average'][0]:.1f})"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

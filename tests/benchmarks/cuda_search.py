"""The search alone on a CUDA target, built without a GPU: milliseconds per proposed batch.

A tuning session on a GPU spends its time between rounds in the evolutionary tuner (MetaSchedule's
evolutionary search, its cost model's feature extraction and ranking) and in replaying each proposal
as a schedule. This runs exactly that, with nothing built or measured: the tuner is asked for a batch,
each proposal is scheduled (the postprocessors, VerifyGPUCode included, run as in a session), and the
batch is told back with stand-in latencies (a fixed function of each config, so that the cost model
trains on something and a run repeats for a seed; the figures are the search's time, not its quality).

    python tests/benchmarks/cuda_search.py --rounds 4 --batch 16 --out tests/benchmarks/results/cuda_search.json
    python tests/benchmarks/cuda_search.py --options '{"population_size": 512, "init_min_unmeasured": 50}'
    python tests/benchmarks/cuda_search.py --prefetch --measure-s 10

With ``--measure-s S`` each batch's building and measuring is stood for by S seconds of waiting; with
``--prefetch`` the next batch is proposed meanwhile, as a session on a GPU does, and a round's search is
what the loop still waited for.

Prints one line per round and a summary (median / max ms per batch, round 0 apart: its first
population is sampled from nothing).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time

from tunelab.core.search.space.factory import make_space
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.search.tuners.base import Observation
from tunelab.core.search.tuners.evolutionary import EvolutionaryTuner
from tunelab.core.target.info import H200_TARGET, resolve_target
from tunelab.core.workloads.catalog import get_workload

H200 = H200_TARGET


def stand_in_ms(key: str) -> float:
    """A latency that depends only on the config (0.5-5.5 ms): the cost model learns a fixed table."""
    return 0.5 + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF * 5.0


def run(args: argparse.Namespace) -> dict:
    workload = get_workload(args.workload)
    shape = workload.parse_shape(args.shape, complete=True)
    target = resolve_target(args.target)
    space = make_space(workload, shape, args.dtype, target, "auto", None)
    options = json.loads(args.options) if args.options else {}
    tuner = EvolutionaryTuner(space, seed=args.seed, **options)
    rounds = []
    profiler = None
    if args.profile:
        from tvm.s_tir import meta_schedule as ms

        profiler = ms.Profiler()
        profiler.__enter__()
    try:
        for index in range(args.rounds):
            start, cpu_start = time.perf_counter(), time.process_time()
            configs = tuner.ask(args.batch)
            asked = time.perf_counter()
            scheduled, rejected = [], []
            for config in configs:
                try:
                    space.schedule(config)
                    scheduled.append(config)
                except InvalidSchedule:
                    rejected.append(config)
            end = time.perf_counter()
            if args.prefetch:
                tuner.prefetch(args.batch)  # as a session on a GPU: the next batch while this one is measured
            time.sleep(args.measure_s)  # stands in for building and measuring on the GPU
            telling = time.perf_counter()
            tuner.tell(
                [Observation(c, stand_in_ms(space.key(c))) for c in scheduled]
                + [Observation(c, None) for c in rejected]
            )
            told, cpu_told = time.perf_counter(), time.process_time()
            row = {
                "round": index,
                "proposed": len(configs),
                "rejected": len(rejected),
                "ask_ms": (asked - start) * 1e3,
                "schedule_ms": (end - asked) * 1e3,
                "tell_ms": (told - telling) * 1e3,  # with a prefetch: the wait for it
                # what the loop waited for: the search, less what a prefetch hid behind the measuring
                "search_ms": (told - start - args.measure_s) * 1e3,
                # CPU seconds of every thread of this process: what a busy machine does not inflate
                "cpu_ms": (cpu_told - cpu_start) * 1e3,
            }
            rounds.append(row)
            print(
                f"round {index}: {row['search_ms']:.0f} ms, CPU {row['cpu_ms']:.0f} ms ({row['proposed']} proposed, "
                f"ask {row['ask_ms']:.0f}, schedule {row['schedule_ms']:.0f}, tell {row['tell_ms']:.0f})",
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
        "options": dict(tuner.options),
        "sizes": dict(tuner.sizes),  # what MetaSchedule's EvolutionarySearch was given
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="gemm")
    parser.add_argument("--shape", default="M=4096,N=4096,K=4096")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--target", default=json.dumps(H200))
    parser.add_argument("--options", default="", help="the evolutionary tuner's options, as JSON")
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
        f"(CPU median {result['later_median_cpu_ms']:.0f} ms) "
        f"(load average {result['load_average'][0]:.1f})"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

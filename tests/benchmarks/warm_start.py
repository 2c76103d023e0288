"""Warm start against a cold start: trials needed to reach 90 % of the best kernel on shapes not seen before.

Three GEMM shapes are tuned first (the store's earlier sessions, xgb, 64 trials each); then three other
shapes, each with and without a warm start from those three sessions, over several seeds, 64 trials each. Per shape the
yardstick is the fastest kernel any of its sessions found; a session's figure is the number of trials
until its best-so-far reaches 90 % of that throughput (65: not within 64). Cold and warm sessions of a
shape and seed run back to back, so the machine's drift affects both alike.

    python tests/benchmarks/warm_start.py --out tests/benchmarks/results/warm_start.json

Prints the BENCHMARKS.md table (markdown) on stdout; the JSON holds every session's curve.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store

SOURCES = ({"M": 256, "N": 256, "K": 256}, {"M": 128, "N": 512, "K": 256}, {"M": 384, "N": 128, "K": 192})
UNSEEN = ({"M": 192, "N": 320, "K": 128}, {"M": 512, "N": 64, "K": 256}, {"M": 320, "N": 192, "K": 320})
MEASURE = MeasureOptions(
    number=1, repeat=3, min_repeat_ms=5, warmup=1, cooldown_s=0, confirm_runs=0, max_repeat=6
)
TARGET_SHARE = 0.9


def spec(shape: dict[str, int], seed: int, trials: int, warm: str = "") -> SessionSpec:
    return SessionSpec(
        workload="gemm",
        shape=shape,
        target="llvm",
        space_kind="template",
        tuner="xgb",
        tuner_options={"warm_start": warm} if warm else {},
        trials=trials,
        batch=8,
        seed=seed,
        measure=MEASURE,
    )


def best_so_far(latencies: list[float | None]) -> list[float]:
    out, best = [], float("inf")
    for x in latencies:
        if x is not None and x < best:
            best = x
        out.append(best)
    return out


def trials_to_reach(curve: list[float], target_ms: float) -> int:
    """1-based trial at which the best-so-far is within the target; len+1 when never."""
    for i, ms in enumerate(curve):
        if ms <= target_ms:
            return i + 1
    return len(curve) + 1


def machine() -> dict[str, object]:
    from tunelab.core.target.host_cpu import choose_cpu, host_cpu

    model = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        platform.machine(),
    )
    choice = choose_cpu(host_cpu())
    return {"cpu": model, "mcpu": choice.mcpu, "isa": choice.isa, "cores": os.cpu_count()}


def render(doc: dict) -> str:
    """The BENCHMARKS.md table of a results file: per unseen shape, cold against warm."""
    runs = doc["runs"]
    lines = [
        f"`{doc['command']}`, {doc['date']}: {doc['machine']}; {doc['seeds']} seeds x {doc['trials']} trials "
        f"per shape and mode; the whole run took {doc['wall_s'] / 60:.0f} min.",
        "",
        "| shape (unseen) | best after 8 trials, cold / warm (median) | best after 64, cold / warm (median) "
        "| trials to 90 % of the shape's best, cold / warm (mean; 65 = not within 64) "
        "| trials to 90 % of the session's own best, cold / warm (mean) |",
        "|---|---|---|---|---|",
    ]
    for shape in {json.dumps(r["shape"]): r["shape"] for r in runs}.values():
        mine = [r for r in runs if r["shape"] == shape]
        yardstick = min(r["curve"][-1] for r in mine) / TARGET_SHARE

        def cell(warm: int, figure, mine=mine) -> list:
            return [figure(r) for r in mine if r["warm"] == bool(warm)]

        after8 = [
            statistics.median(cell(w, lambda r: r["curve"][min(7, len(r["curve"]) - 1)])) for w in (0, 1)
        ]
        final = [statistics.median(cell(w, lambda r: r["curve"][-1])) for w in (0, 1)]
        shared = [cell(w, lambda r, y=yardstick: trials_to_reach(r["curve"], y)) for w in (0, 1)]
        own = [cell(w, lambda r: trials_to_reach(r["curve"], r["curve"][-1] / TARGET_SHARE)) for w in (0, 1)]
        name = "×".join(str(shape[k]) for k in ("M", "N", "K"))
        lines.append(
            f"| {name} | {after8[0]:.4f} / {after8[1]:.4f} ms ({after8[0] / after8[1]:.2f}x) "
            f"| {final[0]:.4f} / {final[1]:.4f} ms ({final[0] / final[1]:.2f}x) "
            f"| {statistics.mean(shared[0]):.1f} ({', '.join(map(str, shared[0]))}) / "
            f"{statistics.mean(shared[1]):.1f} ({', '.join(map(str, shared[1]))}) "
            f"| {statistics.mean(own[0]):.1f} / {statistics.mean(own[1]):.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JSON results file")
    p.add_argument("--db", default=None, help="store (default: next to --out)")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--render", action="store_true", help="print the table of an existing --out file")
    args = p.parse_args()
    if args.render:
        with open(args.out) as f:
            print(render(json.load(f)))
        return 0
    db = args.db or os.path.splitext(args.out)[0] + ".sqlite"
    if os.path.exists(db):
        os.remove(db)
    store = Store(db)
    started = time.time()
    sources = []
    for shape in SOURCES:  # the earlier sessions a warm start learns from
        session = create_session(store, spec(shape, 0, args.trials))
        list(session.run())
        sources.append(str(session.session_id))
        print(f"source {shape}: best {store.session(session.session_id).best_ms:.4f} ms", file=sys.stderr)
    runs = []
    for shape in UNSEEN:
        for seed in range(args.seeds):
            for warm in (False, True) if seed % 2 == 0 else (True, False):  # alternate which goes first
                # Named sources, not auto: auto would also learn from this benchmark's earlier sessions of
                # the same shape, which a shape "not seen before" must not have.
                warm_from = ",".join(sources) if warm else ""
                session = create_session(store, spec(shape, seed, args.trials, warm_from))
                trials = list(session.run())
                curve = best_so_far([t.latency_ms if t.ok else None for t in trials])
                runs.append(
                    {
                        "shape": shape,
                        "seed": seed,
                        "warm": warm,
                        "session": session.session_id,
                        "curve": curve,
                    }
                )
                print(
                    f"{shape} seed {seed} {'warm' if warm else 'cold'}: best {curve[-1]:.4f} ms",
                    file=sys.stderr,
                )
    doc = {
        "command": "python tests/benchmarks/warm_start.py --out " + args.out,
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "trials": args.trials,
        "seeds": args.seeds,
        "wall_s": time.time() - started,
        "runs": runs,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(render(doc))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

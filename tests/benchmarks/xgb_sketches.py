"""The xgb tuner on the two auto problems with and without its sketch options (``per_sketch``,
``sketch_trials``), in real sessions of the same seeds, interleaved.

An auto space's sketches are parts of the space no mutation leaves, and on the ResNet conv their limits
differ (the best kernel of one sketch 1.26x another's). xgb followed from the fastest configs alone stays
in the sketch of its first good config (``per_sketch=0``, the tuner before 2026-12-06). Each seed runs
both variants back to back, in alternating order, so a drift in the machine's load falls on both; each
session is a ``tunelab tune`` process of its own, timed as ``tuners_on_auto.py`` times them. Run:

    python tests/benchmarks/xgb_sketches.py --seeds 10 --trials 64
    python tests/benchmarks/xgb_sketches.py --seeds 3 --trials 256 --problems conv_resnet
    python tests/benchmarks/xgb_sketches.py --render     # the table from the JSON file

The stores go to ``--stores`` (default ``<tmp>/tunelab-bench/xgb-sketches``); a finished session is not
tuned again. The result goes to ``tests/benchmarks/results/xgb_sketches_<trials>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_suite import machine  # noqa: E402 - beside this script
from tuners_on_auto import MEASURE, PROBLEMS, RESULTS, finished_sessions  # noqa: E402

# variant -> its xgb options (--tuner-option): the defaults, and the search before the sketch options
VARIANTS: dict[str, list[str]] = {"per sketch": [], "before": ["per_sketch=0"]}


def tune(problem: str, variant: str, seed: int, trials: int, db: Path) -> float:
    workload, shape = PROBLEMS[problem]
    command = [sys.executable, "-m", "tunelab", "tune", workload, "--space", "auto", "--tuner", "xgb"]
    for option in VARIANTS[variant]:
        command += ["--tuner-option", option]
    command += ["--seed", str(seed), "--trials", str(trials), "--db", str(db), *MEASURE]
    command += ["--name", f"{variant} s{seed}", *(["--shape", shape] if shape else [])]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started


def session_rows(db: Path, problem: str, seed: int) -> list[dict[str, Any]]:
    """Per variant of the seed: its best, the sketch it lies in, and the trials per sketch."""
    from tunelab.core.store import Store

    rows = []
    with Store(db, create=False) as store:
        for s in store.sessions():
            variant = s.name.rsplit(" s", 1)[0]
            trials = [t for t in store.trials(s.id) if t.ok]
            best = min(trials, key=lambda t: t.latency_ms)
            per_sketch: dict[str, int] = {}  # JSON's keys are text
            for t in trials:
                per_sketch[str(t.config["sketch"])] = per_sketch.get(str(t.config["sketch"]), 0) + 1
            rows.append({
                "problem": problem, "seed": seed, "variant": variant, "best_ms": best.latency_ms,
                "best_sketch": int(best.config["sketch"]), "trials_per_sketch": per_sketch,
                "trials": len(trials),
            })  # fmt: skip
    return rows


def run(seeds: int, trials: int, stores: Path, problems: list[str]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for problem in problems:
        for seed in range(seeds):
            db = stores / f"{problem}-{trials}-s{seed}.sqlite"
            order = list(VARIANTS) if seed % 2 == 0 else list(reversed(VARIANTS))
            for variant in order:
                if f"{variant} s{seed}" in finished_sessions(db):
                    continue
                print(f"[xgb-sketches] {problem} seed {seed}: {variant}", file=sys.stderr, flush=True)
                wall = tune(problem, variant, seed, trials, db)
                print(f"[xgb-sketches]   {wall:.0f} s", file=sys.stderr, flush=True)
            rows += session_rows(db, problem, seed)
    return {"trials": trials, "seeds": seeds, "measure": MEASURE, "machine": machine(), "rows": rows}


def table(doc: dict[str, Any]) -> str:
    """Per problem and variant: the best found over the best either variant found in the run (median,
    worst seed), over the other variant's of the same seed, and the seeds whose best lies in the sketch
    of the run's best."""
    lines = [
        "| problem | variant | best / best of all (median, worst seed) | best / the other variant's, same seed "
        "(median; seeds better) | seeds ending in the best's sketch | trials in it (median) |",
        "|---|---|---|---|---|---|",
    ]
    for problem in dict.fromkeys(r["problem"] for r in doc["rows"]):
        rows = [r for r in doc["rows"] if r["problem"] == problem]
        best = min(rows, key=lambda r: r["best_ms"])
        by = {(r["variant"], r["seed"]): r for r in rows}
        for variant in VARIANTS:
            mine = [r for r in rows if r["variant"] == variant]
            other = next(v for v in VARIANTS if v != variant)
            paired = [
                r["best_ms"] / by[(other, r["seed"])]["best_ms"] for r in mine if (other, r["seed"]) in by
            ]
            ratios = [r["best_ms"] / best["best_ms"] for r in mine]
            in_best = sum(r["best_sketch"] == best["best_sketch"] for r in mine)
            share = statistics.median(r["trials_per_sketch"].get(str(best["best_sketch"]), 0) for r in mine)
            lines.append(
                f"| {problem} | {variant} | {statistics.median(ratios):.3f}, {max(ratios):.3f} | "
                f"{statistics.median(paired):.3f}; {sum(p < 1 for p in paired)} of {len(paired)} | "
                f"{in_best} of {len(mine)} | {share:.0f} of {doc['trials']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument(
        "--stores", type=Path, default=Path(tempfile.gettempdir()) / "tunelab-bench" / "xgb-sketches"
    )
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="of tuners_on_auto's (default: both)")
    parser.add_argument("--render", action="store_true", help="print the table of the JSON file")
    args = parser.parse_args()
    out = RESULTS / f"xgb_sketches_{args.trials}.json"
    if not args.render:
        args.stores.mkdir(parents=True, exist_ok=True)
        doc = run(args.seeds, args.trials, args.stores, [p for p in args.problems.split(",") if p])
        out.write_text(json.dumps(doc, indent=1) + "\n")
    print(table(json.loads(out.read_text())))


if __name__ == "__main__":
    main()

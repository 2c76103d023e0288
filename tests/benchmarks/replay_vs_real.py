"""Issue 28: do replays on a recording score tuners as real sessions of the same seeds would?

A sample of the (tuner, seed) pairs that test_tuners_at_size replays on the GEMM 1024^3 template recording
runs again as real ``tunelab tune`` sessions: the same 576-config space (``--space-file``), the same tuner
options and seed, batches of 8, timed as the recording was timed. Each real run is set beside its replay:

- **first batch**: the configs asked before anything was told. Same seed, same space: they must be the
  same, or the replay does not drive the tuner as a session does (the benchmark fails).
- **recorded / real**: for the configs both measured, the real latency over the recorded one (median and
  range): how well the machine reproduces the recording the replay reads.
- **best / optimum at T**: the best found by T trials over the recording's optimum, real and replayed; and
  the real run's fastest config judged on the recording (its recorded latency over the optimum), which
  compares with the replay's figure even where the machine runs faster or slower than when it recorded.
- **rank correlation**: Spearman's, of the real and the recorded latencies of the configs both measured.
- **P at T**: the Compare view's score against random search of the recording (its exhaustive baseline,
  as test_tuners_at_size scores) of the real run's configs judged on the recording, and of the replay.

After the first batch the two runs part: each tells its tuner what it measured, and the machine's noise
makes the real figures differ from the recorded ones. What has to hold is that the replay's verdict (how
close to the optimum, how it scores) stays within that noise. Run:

    python tests/core/data/record_grid.py gemm1024     # once per machine (test_tuners_at_size's recording)
    python tests/benchmarks/replay_vs_real.py --pairs xgb:0 xgb:1 xgb:2 random:0

The stores go to ``--stores`` (default ``<tmp>/tunelab-bench/replay-vs-real``); a finished session is not
tuned again. The result goes to ``tests/benchmarks/results/replay_vs_real_gemm1024.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path[:0] = [str(HERE), str(HERE.parent)]

from recorded_spaces import BENCH_DATA, DATA, load_recorded  # noqa: E402 - tests/, put on the path above
from run_suite import machine  # noqa: E402
from tuner_replays import FAST_OPTIONS, replay_one  # noqa: E402
from tuners_on_auto import MEASURE, finished_sessions  # noqa: E402

RECORDING = "gemm1024"  # issue 28's template problem; the tests' small recordings check the plumbing
BUDGET = 64  # issue 28's: the recommended tuner within 5 % of the best at 64 trials
BATCH = 8  # MEASURE's --batch, and the replays'


def real_session(rec: Any, tuner: str, seed: int, trials: int, db: Path, space_file: Path) -> list[Any]:
    """The trials of a real session of ``tuner`` (seed ``seed``) on the recording's space, tuned now
    unless the store already has it finished."""
    import subprocess

    from tunelab.core.store import Store

    name = f"{tuner} s{seed}"
    if name not in finished_sessions(db):
        shape = ",".join(f"{k}={v}" for k, v in rec.doc["shape"].items())
        options = [f"{k}={v}" for k, v in FAST_OPTIONS.get(tuner, {}).items()]
        command = [sys.executable, "-m", "tunelab", "tune", rec.doc["workload"], "--shape", shape]
        command += ["--space", "template", "--space-file", str(space_file), "--tuner", tuner]
        command += [arg for option in options for arg in ("--tuner-option", option)]
        command += ["--seed", str(seed), "--trials", str(trials), "--db", str(db), "--name", name, *MEASURE]
        print(f"[replay-vs-real] {name}, {trials} trials", file=sys.stderr, flush=True)
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    with Store(db, create=False) as store:
        record = next(s for s in store.sessions() if s.name == name)
        return store.trials(record.id)  # in measurement order


def compare(rec: Any, tuner: str, seed: int, trials: list[Any]) -> dict[str, Any]:
    """One real run beside the replay of the same tuner and seed (the module's four measures)."""
    from tunelab.core.search.scoring import exhaustive_baseline, score_runs

    space = rec.space
    real = [t.latency_ms if t.ok else None for t in trials]
    real_keys = [space.key(t.config) for t in trials]
    history = replay_one(rec, tuner, seed, len(trials), BATCH, FAST_OPTIONS.get(tuner, {}))
    replayed = [o.latency_ms for o in history]
    replay_keys = [space.key(o.config) for o in history]
    replayed_set = set(replay_keys)
    ratios = [
        t.latency_ms / rec.table[key]
        for t, key in zip(trials, real_keys, strict=True)
        if t.ok and rec.table.get(key) and key in replayed_set
    ]
    budget = min(BUDGET, len(trials))  # fewer where a plumbing check asked for fewer trials
    baseline = exhaustive_baseline(list(rec.table.values()), budget)
    optimum = baseline.optimum
    row: dict[str, Any] = {
        "tuner": tuner,
        "seed": seed,
        "first batch same": real_keys[:BATCH] == replay_keys[:BATCH],
        "configs in common": len(set(real_keys) & replayed_set),
        "real / recorded (median, min, max)": (
            [statistics.median(ratios), min(ratios), max(ratios)] if ratios else None
        ),
    }
    row[f"best / optimum @{budget} (real, replay)"] = [
        min(v for v in run[:budget] if v is not None) / optimum for run in (real, replayed)
    ]
    # The real run's fastest config judged on the recording: comparable with the replay's figure even
    # where the machine is faster or slower today than when it recorded.
    ok_real = [
        (t.latency_ms, key) for t, key in zip(trials[:budget], real_keys[:budget], strict=True) if t.ok
    ]
    real_pick = min(ok_real)[1]
    row[f"real's best config, recorded / optimum @{budget}"] = (rec.table[real_pick] or math.inf) / optimum
    shared = [
        (t.latency_ms, rec.table[key])
        for t, key in zip(trials, real_keys, strict=True)
        if t.ok and rec.table.get(key)
    ]
    row["rank correlation, real and recorded"] = _spearman([a for a, _ in shared], [b for _, b in shared])
    # P of the real run's choices judged on the recording (the real latencies would be scored against a
    # baseline measured on another day), beside the replay's
    judged = [rec.table.get(key) if t.ok else None for t, key in zip(trials, real_keys, strict=True)]
    row[f"P @{budget} (real choices on the recording, replay)"] = [
        score_runs(tuner, [run], baseline, budget).mean for run in (judged, replayed)
    ]
    return row


def _spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation of two paired lists (ties broken by order: latencies rarely tie)."""
    import numpy as np

    if len(a) < 3:
        return None
    ra, rb = (np.argsort(np.argsort(np.asarray(x))).astype(float) for x in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", nargs="+", default=["xgb:0", "xgb:1", "xgb:2", "random:0"])
    parser.add_argument("--recording", default=RECORDING, help="gemm1024, or one of tests/core/data's")
    parser.add_argument("--trials", type=int, default=BUDGET)
    parser.add_argument(
        "--stores", type=Path, default=Path(tempfile.gettempdir()) / "tunelab-bench" / "replay-vs-real"
    )
    args = parser.parse_args(argv)
    folder = next((f for f in (BENCH_DATA, DATA) if (f / f"{args.recording}_grid_llvm.json").exists()), None)
    if folder is None:
        parser.error(f"no recording {args.recording}: python tests/core/data/record_grid.py {args.recording}")
    rec = load_recorded(args.recording, folder)
    args.stores.mkdir(parents=True, exist_ok=True)
    space_file = args.stores / f"{args.recording}_space.json"
    space_file.write_text(json.dumps(rec.space.to_json()))
    rows = []
    for pair in args.pairs:
        tuner, _, seed_text = pair.partition(":")
        seed = int(seed_text or 0)
        db = args.stores / f"{args.recording}-{args.trials}-s{seed}.sqlite"
        trials = real_session(rec, tuner, seed, args.trials, db, space_file)
        rows.append(compare(rec, tuner, seed, trials))
        print(json.dumps(rows[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"replay_vs_real_{args.recording}.json"
    out.write_text(
        json.dumps(
            {"recording": args.recording, "measure": MEASURE, "machine": machine(), "rows": rows}, indent=1
        )
    )
    failed = [f"{r['tuner']} s{r['seed']}" for r in rows if not r["first batch same"]]
    if failed:
        print(f"the first batch differs from the replay's: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

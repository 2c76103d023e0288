"""Issue 28's auto-space sessions, their bests re-measured side by side: one yardstick for every day.

``tuners_on_auto.py`` scores each session's best as the session measured it. Its seeds ran on different
days beside different loads (random search's best GEMM kernel read 11.2 ms on one day and 18.0 on
another), so "best over the best of all" mixes the machine's load with the tuners' choices. Here each
session's best trial by each budget is rebuilt from its store and all of them are measured again in
the same fresh processes (``tunelab.core.trust.remeasure.api.validate_schedules``: each process times
every kernel once, in a rotated order, and checks its output against NumPy first). A kernel's figure
is the median over all its samples; the tables of ``tuners_on_auto.py`` are then made with these
figures in place of the sessions' own. Run:

    python tests/benchmarks/remeasure_bests.py --problem gemm1024 --trials 64
    python tests/benchmarks/remeasure_bests.py --problem conv_resnet --trials 256
    python tests/benchmarks/remeasure_bests.py --render      # the tables and the goal, re-measured
    python tests/benchmarks/remeasure_bests.py --problem gemm1024 --label seeds40more --tuners ucb,rl

``--tuners`` re-measures only some tuners' bests (each pair is read in the same processes, so a tuner
added to a run later can be set beside the recommended one without timing every other again); the
tables then leave the others out.

The sessions are those of ``tests/benchmarks/results/auto_tuners_<problem>_<trials>.json`` in the stores
it names. Where it says that tuners were tuned again after a change (``tuners_on_auto.py --retune``),
their sessions before the change are re-measured too, as "<tuner> (before)". The result goes to
``tests/benchmarks/results/auto_tuners_<problem>_<trials>_remeasured.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from process_spread import ESTIMATORS, estimate  # noqa: E402 - beside this script
from run_suite import machine  # noqa: E402
from tuners_on_auto import (  # noqa: E402
    RESULTS,
    choice,
    median_interval,
    result_name,
    session_name,
    store_path,
    table,
)

RUNS = 7  # fresh processes; each times every kernel once
# More samples per kernel than a session takes (one run per sample, 3 samples, 2 ms at least): each
# figure here is compared with dozens of others.
REPEAT, MIN_REPEAT_MS = 5, 10


def before_label(tuner: str) -> str:
    return f"{tuner} (before)"


def bests(doc: dict[str, Any], tuners: list[str] | None = None) -> list[dict[str, Any]]:
    """Every (seed, tuner, budget) of the result file with the store, session and trial of its best: the
    fastest successful trial among the session's first ``budget``, in measurement order; only ``tuners``'
    where given."""
    from tunelab.core.store import Store
    from tunelab.core.usecases.compare_scores import primary_run

    budgets = sorted({r["budget"] for r in doc["per_seed"]})
    sources = [(Path(doc["stores"]), None)]
    if doc.get("retuned"):
        sources.append((Path(doc["retuned_from"]), doc["retuned"]))
    found = []
    for stores, only in sources:
        for seed in range(doc["seeds"]):
            db = store_path(stores, doc["problem"], doc["trials"], seed)
            with Store(db, create=False) as store:
                by_name = {s.name: s for s in store.sessions()}
                for tuner in only or sorted({r["tuner"] for r in doc["per_seed"]}):
                    if tuners is not None and tuner not in tuners:
                        continue
                    if only and session_name(tuner, seed) not in by_name:
                        continue  # retuned into stores that had no session of it: a tuner added, no before
                    rec = by_name[session_name(tuner, seed)]
                    ids, latencies = primary_run(store, rec)
                    for budget in budgets:
                        ok = [
                            (v, i)
                            for v, i in zip(latencies[:budget], ids[:budget], strict=True)
                            if v is not None
                        ]
                        if not ok:
                            continue
                        latency_ms, trial_id = min(ok)
                        found.append({
                            "seed": seed, "tuner": before_label(tuner) if only else tuner, "budget": budget,
                            "db": str(db), "session_id": rec.id, "trial_id": trial_id, "session_ms": latency_ms,
                        })  # fmt: skip
    return found


def remeasure(doc: dict[str, Any], runs: int, tuners: list[str] | None = None) -> dict[str, Any]:
    """The bests of ``doc`` (``tuners``' only, where given) measured again side by side; one row per
    (seed, tuner, budget)."""
    from tunelab.core.records import MeasureOptions
    from tunelab.core.search.space.factory import space_for_session
    from tunelab.core.store import Store
    from tunelab.core.trust.remeasure.api import validate_schedules
    from tunelab.core.trust.remeasure.recorded import recorded_item
    from tunelab.core.trust.remeasure.report import ValidationSource
    from tunelab.core.trust.remeasure.verdict import Problem

    rows = bests(doc, tuners)
    kernels: dict[tuple[str, int], Any] = {}  # (store, trial id) -> its schedule: a best at two budgets once
    problem = None
    for row in rows:
        key = (row["db"], row["trial_id"])
        if key in kernels:
            continue
        with Store(Path(row["db"]), create=False) as store:
            rec = store.session(row["session_id"])
            trial = next(t for t in store.trials(rec.id, with_samples=True) if t.id == row["trial_id"])
            here = Problem(
                rec.workload, dict(rec.shape), rec.dtype, dict(rec.target), rec.custom_source, 0, rec.flops
            )
            if problem is None:
                problem = here
            elif (here.workload, here.shape, here.dtype, here.target) != (
                problem.workload,
                problem.shape,
                problem.dtype,
                problem.target,
            ):
                raise SystemExit(
                    f"{row['db']}: session {rec.id} tunes another problem or target than the rest"
                )
            kernels[key] = recorded_item(trial, None, None, space_for_session(rec), ())
    assert problem is not None
    keys = list(kernels)
    options = MeasureOptions(number=1, repeat=REPEAT, min_repeat_ms=MIN_REPEAT_MS, timeout_s=20.0)
    started = time.time()
    print(f"[remeasure] {len(keys)} kernels of {len(rows)} bests, {runs} fresh processes", file=sys.stderr)
    report = validate_schedules(
        problem,
        [kernels[k] for k in keys],
        runs,
        options,
        ValidationSource("session", name=f"{doc['problem']} bests"),
        lambda done, total, message: print(f"[remeasure] {message}", file=sys.stderr, flush=True),
    )
    figures = {k: s for k, s in zip(keys, report.schedules, strict=True)}
    for row in rows:
        s = figures[(row["db"], row["trial_id"])]
        row.update(
            remeasured_ms=s.remeasured_ms,
            run_cv=s.run_cv,
            runs=s.runs,
            quiet_runs=s.quiet_runs,
            verdict=s.verdict,
            error=None if s.remeasured_ms is not None else s.cause,
            # each fresh process's figure of it, for the decomposition into process and kernel
            # (``decompose``): the process's number, the kernel's place in its order, when, the median
            per_run=[
                {
                    "run": m.run,
                    "position": m.position,
                    "t0": m.t0,
                    "median_ms": statistics.median(m.samples_ms),
                }
                for m in s.measurements
                if m.ok and m.samples_ms
            ],
        )
    return {
        "problem": doc["problem"],
        "trials": doc["trials"],
        "seeds": doc["seeds"],
        "runs": runs,
        "tuners": tuners,  # None: every tuner of the result file
        "measure": {"number": 1, "repeat": REPEAT, "min_repeat_ms": MIN_REPEAT_MS},
        "machine": machine(),
        "started_at": started,
        "elapsed_s": time.time() - started,
        "summary": report.summary,
        "rows": rows,
    }


def figure(row: dict[str, Any], estimator: str) -> float | None:
    """A re-measured best's figure: "median", the median of all its samples (the validation's own), or
    an estimator of ``process_spread`` over its processes' medians (a low quantile: "q10")."""
    if estimator == "median" or row["remeasured_ms"] is None:
        return row["remeasured_ms"]
    if not row.get("per_run"):
        raise SystemExit(f"--estimator {estimator}: this result keeps no per-process figures; re-measure it")
    return estimate([m["median_ms"] for m in row["per_run"]], estimator)


def figures(again: dict[str, Any], estimator: str) -> dict[tuple[int, str, int], float | None]:
    return {(r["seed"], r["tuner"], r["budget"]): figure(r, estimator) for r in again["rows"]}


def as_scored(doc: dict[str, Any], again: dict[str, Any], estimator: str = "median") -> dict[str, Any]:
    """``doc`` with each best replaced by its re-measured figure (P and the rest as the sessions scored
    them), and a row per seed and budget for each "<tuner> (before)"; for ``tuners_on_auto``'s tables."""
    out = copy.deepcopy(doc)
    again_ms = figures(again, estimator)
    if again.get("tuners"):  # only these were re-measured: the others have no figure on this yardstick
        out["per_seed"] = [r for r in out["per_seed"] if r["tuner"] in again["tuners"]]
    for r in out["per_seed"]:
        r["best_ms"] = again_ms.get((r["seed"], r["tuner"], r["budget"]))
    for (seed, tuner, budget), ms in again_ms.items():
        if tuner.endswith("(before)"):
            out["per_seed"].append({
                "seed": seed, "tuner": tuner, "budget": budget, "trials": budget, "P": None,
                "best_ms": ms, "failed": 0, "wall_s": None,
            })  # fmt: skip
    return out


def spread(again: dict[str, Any]) -> str:
    """How far apart the fresh processes' medians of one kernel lay: the noise of the figures above."""
    cvs = sorted(r["run_cv"] for r in again["rows"] if r["run_cv"] is not None)
    failed = [r for r in again["rows"] if r["remeasured_ms"] is None]
    ratio = [r["remeasured_ms"] / r["session_ms"] for r in again["rows"] if r["remeasured_ms"]]
    text = (
        f"{len(again['rows'])} bests, {again['runs']} fresh processes, {again['elapsed_s'] / 60:.0f} min; "
        f"the processes' medians of a kernel apart by CV {statistics.median(cvs):.1%} (median), "
        f"{cvs[-1]:.1%} (most); re-measured / the session's figure: median {statistics.median(ratio):.3f}, "
        f"{min(ratio):.3f}-{max(ratio):.3f}"
    )
    return text + (f"; {len(failed)} failed" if failed else "")


def before_and_after(again: dict[str, Any], estimator: str = "median") -> str:
    """Each retuned tuner against its sessions before the change, seed by seed (the same seed's best
    now over its best before, both re-measured in the same processes): median, range, seeds faster."""
    again_ms = figures(again, estimator)
    lines = []
    pairs = sorted({(label, budget) for _, label, budget in again_ms if label.endswith("(before)")})
    for label, budget in pairs:
        tuner = label.removesuffix(" (before)")
        ratios = [
            now / before
            for s in range(again["seeds"])
            if (now := again_ms.get((s, tuner, budget))) and (before := again_ms.get((s, label, budget)))
        ]
        if ratios:
            lines.append(
                f"- {tuner} at {budget} trials, now / before (same seed): median {statistics.median(ratios):.3f}, "
                f"{min(ratios):.3f}-{max(ratios):.3f}, faster in {sum(r < 1 for r in ratios)} of {len(ratios)} seeds"
            )
    return "\n".join(lines)


def paired(again: dict[str, Any], estimator: str = "median", budget: int = 64) -> str:
    """Every two tuners but random, seed by seed: the same seed's bests, re-measured in the same processes,
    one over the other (median of the seeds' ratios, a 90 % interval over 2,000 resampled seeds, and the
    seeds where the first is faster): a side experiment's comparison, free of the other seeds' luck."""
    import itertools
    import random

    again_ms = figures(again, estimator)
    tuners = list(dict.fromkeys(t for _, t, b in again_ms if b == budget and t != "random"))
    draw = random.Random(0)
    lines = []
    for a, b in itertools.combinations(tuners, 2):
        ratios = [
            mine / theirs
            for seed in range(again["seeds"])
            if (mine := again_ms.get((seed, b, budget))) and (theirs := again_ms.get((seed, a, budget)))
        ]
        if len(ratios) < 2:
            continue
        centre, low, high = median_interval(ratios, draw)
        lines.append(
            f"- {b} / {a} at {budget} trials (same seed): median {centre:.3f} "
            f"({low:.3f}-{high:.3f}), faster in {sum(r < 1 for r in ratios)} of {len(ratios)} seeds"
        )
    return "\n".join(lines)


def render(estimator: str, label: str | None = None, read_as: str | None = None) -> None:
    for trials in (64, 256):
        docs = []
        for path in sorted(RESULTS.glob(result_name("*", trials, label, "_remeasured"))):
            again = json.loads(path.read_text())
            doc = json.loads((RESULTS / result_name(again["problem"], trials, label)).read_text())
            scored = as_scored(doc, again, estimator)
            print(table(scored), end="\n\n")
            print(f"Re-measured: {spread(again)}.\n")
            changed = before_and_after(again, estimator)
            if changed:
                print(changed + "\n")
            if label:  # a side experiment on a few tuners: each two of them seed by seed
                print(paired(again, estimator, 64) + "\n")
            # the goal is among the tuners as they are: the sessions before a change are shown, not chosen
            scored["per_seed"] = [r for r in scored["per_seed"] if not r["tuner"].endswith("(before)")]
            docs.append(scored)
        if docs:
            print(f"At {trials} trials, re-measured ({', '.join(d['problem'] for d in docs)}):\n")
            print(choice(docs, trials, read_as), end="\n\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--runs", type=int, default=RUNS, help=f"fresh processes (default {RUNS})")
    parser.add_argument("--render", action="store_true", help="print the tables of the re-measured files")
    parser.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="median",
        help="with --render: a best's figure from its processes' medians (default: the median of its samples)",
    )
    parser.add_argument("--label", help="a side experiment of tuners_on_auto.py --label (its result files)")
    parser.add_argument(
        "--read-as",
        help="with --render: read the goal tuner against tuner for this tuner (default: the run's pick)",
    )
    parser.add_argument(
        "--tuners", help="re-measure only these tuners' bests (comma-separated), default every one"
    )
    args = parser.parse_args(argv)
    if args.render:
        render(args.estimator, args.label, args.read_as)
        return 0
    source = RESULTS / result_name(args.problem, args.trials, args.label)
    if args.problem is None or not source.exists():
        parser.error(f"--problem: no result file {source.name} (tuners_on_auto.py makes it), or --render")
    if args.runs < 2:
        parser.error("--runs: at least 2 fresh processes")
    doc = json.loads(source.read_text())
    tuners = args.tuners.split(",") if args.tuners else None
    unknown = sorted(set(tuners or ()) - {r["tuner"] for r in doc["per_seed"]})
    if unknown:
        parser.error(f"--tuners: {', '.join(unknown)} not in {source.name}")
    again = remeasure(doc, args.runs, tuners)
    (RESULTS / result_name(args.problem, args.trials, args.label, "_remeasured")).write_text(
        json.dumps(again, indent=1)
    )
    print(spread(again))
    return 0


if __name__ == "__main__":
    sys.exit(main())

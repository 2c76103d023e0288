"""The kernel-quality, vs-raw-MetaSchedule and overhead benchmarks (BENCHMARKS.md, "Kernels").

    python tests/benchmarks/run_suite.py --tier quick     # CI-sized, under 20 minutes on 2 cores
    python tests/benchmarks/run_suite.py --tier long      # the 1000-trial rows and 3 seeds: hours
    python tests/benchmarks/run_suite.py --render         # only re-render BENCHMARKS.md from the JSON

For each case of the tier (tests/benchmarks/suite/cases.py) and each seed, tunelab tunes the problem in
a process of its own, then plain ``tune_tir`` does in another; the best kernels at each checkpoint are
built, and one fresh process re-measures all of them and the vendor side by side. The results go to
``tests/benchmarks/results/<tier>.json`` (or ``--out``), and the tables of BENCHMARKS.md are rendered
from the JSON files there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from suite.cases import TIERS, Case  # noqa: E402
from suite.tables import render_into  # noqa: E402

RESULTS = HERE / "results"
DOC = HERE.parents[1] / "BENCHMARKS.md"
COMMANDS = {
    "quick": "python tests/benchmarks/run_suite.py --tier quick",
    "long": "python tests/benchmarks/run_suite.py --tier long",
    "tiny": "python tests/benchmarks/run_suite.py --tier tiny --out FILE",
}
ROUNDS = {"quick": 5, "long": 7, "tiny": 3}
# The same timing options for both tools and for the re-measurement. tunelab's cool-down (it waits
# while another process is busy) and its confirmation of the winners are off: the suite re-measures
# every winner itself, side by side.
MEASURE = {
    "number": 3,
    "repeat": 3,
    "min_repeat_ms": 20,
    "timeout_s": 60.0,
    "cooldown_s": 0.0,
    "confirm_runs": 0,
}


def machine() -> dict[str, Any]:
    """Cores, CPU model and ISA, GPU: what the tables' header says the figures were measured on."""
    from tunelab.core.target.info import cpu_core_count, cuda_available, cuda_target, llvm_target

    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    target = llvm_target()
    return {
        "cores": cpu_core_count(),
        "cpu_model": model,
        "target": target.description,
        "mcpu": target.json.get("mcpu"),
        "gpu": cuda_target().description if cuda_available() else "none",
        "python": platform.python_version(),
        "tvm": _tvm_version(),
        "load_avg_start": list(os.getloadavg()),
    }


def _tvm_version() -> str:
    import tvm

    return str(tvm.__version__)


def _child(
    script: str, job: dict[str, Any], folder: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    job_path, out_path = folder / f"{job['label']}.job.json", folder / f"{job['label']}.out.json"
    job_path.write_text(json.dumps(job))
    proc = subprocess.run(
        [sys.executable, str(HERE / "suite" / script), str(job_path), str(out_path)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {job['label']} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(out_path.read_text())


def run_case(case: Case, tier: str, folder: Path) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    tools = ["tunelab", *(f"tunelab+{v}" for v in case.variants), *(["tune_tir"] if case.raw else [])]
    for seed in case.seeds:
        walls: dict[str, float] = {}
        for tool in tools:
            label = f"{case.name}_{tool.replace('+', '_')}_s{seed}"
            print(f"[suite] {label}: tuning {case.budget} trials", file=sys.stderr, flush=True)
            job = {
                "label": label,
                "tool": tool,
                "workload": case.workload,
                "shape": case.shape,
                "budget": case.budget,
                "batch": case.batch,
                "seed": seed,
                "checkpoints": list(case.checkpoints),
                "measure": MEASURE,
                "folder": str(folder / label),
                "space_params": case.variants.get(tool.partition("+")[2], {}),
                "tuner_options": case.variants.get(tool.partition("+")[2], {}).get("tuner", {}),
                # tune_tir's best within the time tunelab's default session took (the equal-wall-time row)
                "equal_wall_s": walls.get("tunelab") if tool == "tune_tir" else None,
            }
            result = _child("tune_job.py", job, folder)
            result.pop("job")
            runs.append({"tool": tool, "seed": seed, **result})
            walls[tool] = result["wall_s"]
            print(f"[suite] {label}: {result['wall_s']:.0f} s", file=sys.stderr, flush=True)
    kernels = [
        {"label": _kernel_label(r, n), "library": k["library"]}
        for r in runs
        for n, k in r["checkpoints"].items()
    ]
    remeasured = _remeasure(case.name, case.workload, case.shape, kernels, tier, folder)
    for r in runs:  # the libraries lived in the scratch folder; the JSON keeps what they were
        for k in r["checkpoints"].values():
            k.pop("library", None)
    return {"case": case.to_json(), "runs": runs, "remeasured": remeasured}


def _kernel_label(run: dict[str, Any], checkpoint: str) -> str:
    return f"{run['tool']}_s{run['seed']}_{checkpoint}"


def _remeasure(
    name: str, workload: str, shape: dict[str, int], kernels: list[dict[str, Any]], tier: str, folder: Path
) -> dict[str, Any]:
    """The kernels and the vendor re-measured side by side in one fresh process (remeasure_job.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    print(f"[suite] {name}: re-measuring {len(kernels)} kernels and the vendor", file=sys.stderr)
    return _child(
        "remeasure_job.py",
        {
            "label": f"{name}_remeasure",
            "workload": workload,
            "shape": shape,
            "measure": MEASURE,
            "rounds": ROUNDS[tier],
            "kernels": kernels,
        },
        folder,
        env=env,
    )


def remeasure_case(result: dict[str, Any], tier: str, folder: Path) -> dict[str, Any]:
    """A case's stored result with its kernels rebuilt from their traces and re-measured against the vendor
    again (the tuning runs and their figures kept): for a vendor baseline that changed since the run (the
    optional PyTorch convolution installed), or a re-measurement that was disturbed."""
    case = result["case"]
    traced = [(_kernel_label(r, n), k["trace"]) for r in result["runs"] for n, k in r["checkpoints"].items()]
    rebuilt = _child(
        "rebuild_job.py",
        {
            "label": f"{case['name']}_rebuild",
            "workload": case["workload"],
            "shape": case["shape"],
            "folder": str(folder / f"{case['name']}_rebuilt"),
            "kernels": [{"label": label, "trace": trace} for label, trace in traced],
        },
        folder,
    )["libraries"]
    kernels = [{"label": label, "library": rebuilt[label]} for label, _ in traced]
    remeasured = _remeasure(case["name"], case["workload"], case["shape"], kernels, tier, folder)
    return {**result, "remeasured": remeasured}


def _override(case: Case, args: argparse.Namespace) -> Case:
    """The case with the command line's budget, seeds and variant choice (a shorter experiment)."""
    changes: dict[str, Any] = {}
    if args.budget is not None:
        changes["budget"] = args.budget
        changes["checkpoints"] = tuple(
            sorted({*(n for n in case.checkpoints if n < args.budget), args.budget})
        )
        changes["goals"] = {n: g for n, g in case.goals.items() if n <= args.budget}
    if args.seeds:
        changes["seeds"] = tuple(int(s) for s in args.seeds.split(","))
    if args.variant:
        offered = {**case.variants, **case.probes}
        changes["variants"] = {k: v for k, v in offered.items() if k in args.variant}
    if args.no_raw:
        changes["raw"] = False
    return dataclasses.replace(case, **changes)


def main(argv: list[str] | None = None) -> int:
    from tunelab.core.measure.threads import use_every_core

    use_every_core()  # both tools' jobs inherit it: TVM alone would run kernels on half the cores
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tier", choices=sorted(TIERS))
    parser.add_argument(
        "--out", type=Path, help="the JSON file (default: tests/benchmarks/results/<tier>.json)"
    )
    parser.add_argument("--render", action="store_true", help="only re-render BENCHMARKS.md from the JSON")
    parser.add_argument("--doc", type=Path, default=DOC, help="the document whose tables are rendered")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (libraries, databases)")
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this case of the tier (repeatable); its results replace the same case's in the JSON",
    )
    parser.add_argument(
        "--budget",
        type=int,
        metavar="N",
        help="tune N trials per run instead of the case's budget (checkpoints above N are dropped, N is added)",
    )
    parser.add_argument(
        "--seeds", metavar="S,S,...", help="the seeds to run instead of the case's (comma-separated)"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these of the case's variants and probes (repeatable; 'none': no variant); default: its variants",
    )
    parser.add_argument(
        "--no-raw",
        action="store_true",
        help="leave out the plain tune_tir runs (tunelab against its variants)",
    )
    parser.add_argument(
        "--remeasure",
        action="store_true",
        help="do not tune: rebuild the named cases' stored kernels (--case, from the tier's JSON or --out) "
        "from their traces and re-measure them against the vendor again",
    )
    args = parser.parse_args(argv)
    if args.remeasure:
        return _remeasure_only(parser, args, argv)
    if args.tier is None and not args.render:
        parser.error("give --tier or --render")
    shortened = args.budget is not None or args.seeds or args.variant or args.no_raw
    if shortened and args.out is None:
        # the tier's JSON (and so BENCHMARKS.md) holds what the tier's own command measures, unless a
        # person names that file: then its tables say the shortened command that measured each case
        parser.error("--budget, --seeds, --variant and --no-raw need --out FILE")
    if args.tier is not None:
        out = args.out or RESULTS / f"{args.tier}.json"
        tier_file = out.resolve() == (RESULTS / f"{args.tier}.json").resolve()
        given = sys.argv[1:] if argv is None else argv
        command = (
            COMMANDS[args.tier]
            if not shortened
            else "python tests/benchmarks/run_suite.py " + shlex.join(given)
        )
        folder = Path(tempfile.mkdtemp(prefix=f"tunelab-suite-{args.tier}-"))
        started = time.time()
        doc: dict[str, Any] = {
            "tier": args.tier,
            "command": command,
            "date": time.strftime("%Y-%m-%d", time.localtime(started)),
            "machine": machine(),
            "cases": [],
        }
        cases = [_override(c, args) for c in TIERS[args.tier] if not args.case or c.name in args.case]
        unknown = set(args.case) - {c.name for c in TIERS[args.tier]}
        if unknown:
            parser.error(f"no case {sorted(unknown)} in the {args.tier} tier")
        if args.case and out.is_file():  # the other cases' results stay as they were measured
            earlier = json.loads(out.read_text())
            doc["cases"] = [c for c in earlier["cases"] if c["case"]["name"] not in args.case]
            doc["earlier_runs"] = [
                *earlier.get("earlier_runs", []),
                {k: earlier[k] for k in ("date", "machine")},
            ]
        try:
            for case in cases:
                doc["cases"].append({**run_case(case, args.tier, folder), "command": command})
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        doc["machine"]["load_avg_end"] = list(os.getloadavg())
        doc["suite_wall_s"] = time.time() - started
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1))
        print(f"[suite] wrote {out} ({doc['suite_wall_s']:.0f} s)", file=sys.stderr)
        if args.out is not None and not tier_file and args.doc == DOC:
            return 0  # a result kept elsewhere (a test, a trial run) does not change the document
    render_into(args.doc, _result_docs())
    print(f"[suite] rendered the tables of {args.doc}", file=sys.stderr)
    return 0


def _result_docs() -> dict[str, dict[str, Any]]:
    return {
        t: json.loads((RESULTS / f"{t}.json").read_text())
        for t in ("quick", "long")
        if (RESULTS / f"{t}.json").is_file()
    }


def _remeasure_only(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str] | None) -> int:
    """``--remeasure``: the named cases of a results file re-measured from their traces; nothing tuned."""
    if args.tier is None or not args.case:
        parser.error("--remeasure needs --tier and the cases to re-measure (--case NAME)")
    if args.budget is not None or args.seeds or args.variant or args.no_raw:
        parser.error(
            "--remeasure re-measures the stored runs as they are: no --budget, --seeds, --variant or --no-raw"
        )
    out = args.out or RESULTS / f"{args.tier}.json"
    if not out.is_file():
        parser.error(f"{out} does not exist: nothing to re-measure")
    doc = json.loads(out.read_text())
    stored = {c["case"]["name"]: c for c in doc["cases"]}
    missing = sorted(set(args.case) - set(stored))
    if missing:
        parser.error(f"{out} holds no case {missing}; it holds {sorted(stored)}")
    given = sys.argv[1:] if argv is None else argv
    command = "python tests/benchmarks/run_suite.py " + shlex.join(given)
    folder = Path(tempfile.mkdtemp(prefix=f"tunelab-suite-{args.tier}-"))
    started = time.time()
    load_start = list(os.getloadavg())
    try:
        for name in args.case:
            redone = remeasure_case(stored[name], args.tier, folder)
            redone["remeasure"] = {
                "command": command,
                "date": time.strftime("%Y-%m-%d", time.localtime(started)),
                "load_avg": [load_start[0], os.getloadavg()[0]],
            }
            doc["cases"] = [redone if c["case"]["name"] == name else c for c in doc["cases"]]
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"[suite] wrote {out} ({time.time() - started:.0f} s)", file=sys.stderr)
    if out.resolve() == (RESULTS / f"{args.tier}.json").resolve():  # a file kept elsewhere: no document
        render_into(args.doc, _result_docs())
        print(f"[suite] rendered the tables of {args.doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

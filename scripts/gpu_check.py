"""The prepared GPU check (issue 12): one run on a machine with a CUDA GPU proves tunelab's GPU path.

    python3 scripts/gpu_check.py --out OUT              # on the GPU machine (falls back to the CPU there is none)
    python3 scripts/gpu_check.py --out OUT --cpu        # the same steps on this CPU (LLVM), small shapes

In one run, within ``--budget-s`` seconds (480 by default), into one folder:

1. the environment: TVM, the GPU TVM sees, NVML, PyTorch and CuPy (what the vendor baseline goes through);
2. four sessions on the GPU, each with a share of the budget (stopped when it is spent, keeping what it
   measured): fp32 GEMM 4096³ with the template space, the same with the auto space, fp16 GEMM 4096³
   with float32 accumulation on tensor cores (``float16:float32``, the auto space's wmma rule), and the
   ResNet 3x3 conv2d layer (N=1, C=K=64, 56x56, pad 1); with NVML telemetry for every trial;
3. the vendor library (cuBLAS / cuDNN through PyTorch, TF32 off) and this machine's roofline, measured
   in the same run, each session's best against both;
4. ``OUT/tunelab.sqlite`` (opens in the app: its Hardware view shows the real NVML trace) and
   ``OUT/summary.json`` (what ``BENCHMARKS.md`` takes: x vendor, % of roofline, clocks and temperature).

With ``--bundle DIR`` it first installs what scripts/gpu_bundle.py packed (TVM's wheel in parts, one per run,
and the other wheels). With ``--wheels DIR`` it first installs what the GPU machine lacks from wheels carried in ``DIR``
(``pip install --no-index --find-links DIR``); tunelab itself is imported from this checkout.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CARRIED = ("apache-tvm", "apache-tvm-ffi", "xgboost-cpu", "sqlite-utils", "archspec", "psutil")


def _cases(gpu: bool) -> list[dict[str, Any]]:
    if gpu:
        gemm = {"M": 4096, "N": 4096, "K": 4096}
        conv = {
            "N": 1,
            "C": 64,
            "H": 56,
            "W": 56,
            "K": 64,
            "R": 3,
            "S": 3,
            "stride": 1,
            "pad": 1,
            "dilation": 1,
        }
        trials = 64
    else:  # the CPU path: the same steps at sizes two cores finish in a few minutes
        gemm = {"M": 128, "N": 128, "K": 128}
        conv = {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "stride": 1, "pad": 1, "dilation": 1}
        trials = 4
    return [
        {"name": "gemm_fp32_template", "workload": "gemm", "shape": gemm, "dtype": "float32", "space": "template",
         "tuner": "xgb", "trials": trials, "share": 0.2},
        {"name": "gemm_fp32_auto", "workload": "gemm", "shape": gemm, "dtype": "float32", "space": "auto",
         "tuner": "evolutionary", "trials": trials, "share": 0.25},
        {"name": "gemm_fp16_tensor_cores", "workload": "gemm", "shape": gemm, "dtype": "float16:float32",
         "space": "auto", "tuner": "evolutionary", "trials": trials, "share": 0.25},
        {"name": "conv2d_resnet", "workload": "conv2d_nchw", "shape": conv, "dtype": "float32", "space": "auto",
         "tuner": "evolutionary", "trials": trials, "share": 0.2},
    ]  # fmt: skip


def install_wheels(folder: Path) -> list[str]:
    """pip install the carried wheels (no index: the GPU machine has no network); the command run."""
    wanted = [name for name in CARRIED if any(folder.glob(name.replace("-", "_") + "-*.whl"))]
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--find-links",
        str(folder),
        *wanted,
    ]
    subprocess.run(command, check=True, timeout=600)
    return [" ".join(command)]


def import_checkout() -> str:
    """``tunelab`` from this checkout when it is not installed (the GPU machine builds nothing: its pip
    has no network for setuptools). The package's three folders are linked as pyproject.toml maps them
    into a folder put first on ``sys.path`` and on ``PYTHONPATH``: the processes tunelab starts (the
    kernel runners, the builders) import it too."""
    try:
        import tunelab.core  # noqa: F401

        return "installed"
    except ImportError:
        pass
    import os
    import tempfile

    linked = Path(tempfile.mkdtemp(prefix="tunelab-checkout-"))
    package = linked / "tunelab"
    package.mkdir()
    for path in (ROOT / "packaging" / "tunelab").iterdir():
        if path.suffix == ".py":
            (package / path.name).symlink_to(path)
    (package / "core").symlink_to(ROOT / "core", target_is_directory=True)
    (package / "app").symlink_to(ROOT / "app", target_is_directory=True)
    sys.path.insert(0, str(linked))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(linked), os.environ.get("PYTHONPATH")) if p)
    import tunelab.core  # noqa: F401, F811

    return f"from the checkout at {ROOT} (linked as a package in {linked})"


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    import tvm

    env["tvm"] = tvm.__version__
    env["cuda_in_tvm"] = bool(tvm.runtime.enabled("cuda") and tvm.cuda(0).exist)
    if env["cuda_in_tvm"]:
        dev = tvm.cuda(0)
        env["gpu"] = {"name": str(dev.device_name), "compute_version": str(dev.compute_version),
                      "l2_bytes": getattr(dev, "l2_cache_size_bytes", None)}  # fmt: skip
    for module in ("torch", "cupy", "pynvml", "xgboost"):
        try:
            env[module] = getattr(__import__(module), "__version__", "installed")
        except Exception as exc:  # noqa: BLE001 - what is missing is the finding
            env[module] = f"missing ({type(exc).__name__})"
    from tunelab.core.telemetry.nvml import NvmlSource

    nvml = NvmlSource()
    env["nvml"] = nvml.name if nvml.available else nvml.status
    nvml.close()
    return env


def run_case(store: Any, case: dict[str, Any], target: str, deadline_s: float) -> dict[str, Any]:
    """One session, stopped when its time share is spent; its best against the vendor and the roofline."""
    import threading

    from tunelab.core.records import MeasureOptions, SessionSpec
    from tunelab.core.session.loop import create_session
    from tunelab.core.trust.baselines import baseline_for
    from tunelab.core.trust.roofline import roofline_for

    started = time.time()
    out: dict[str, Any] = {"case": case["name"], "workload": case["workload"], "shape": case["shape"],
                           "dtype": case["dtype"], "space": case["space"], "tuner": case["tuner"]}  # fmt: skip
    spec = SessionSpec(
        workload=case["workload"], shape=case["shape"], dtype=case["dtype"], target=target,
        space_kind=case["space"], tuner=case["tuner"], trials=case["trials"], batch=16 if target != "llvm" else 4,
        measure=MeasureOptions(confirm_runs=0, cooldown_s=0.0, timeout_s=60.0), name=f"gpu check: {case['name']}",
    )  # fmt: skip
    try:
        session = create_session(store, spec)
    except Exception as exc:  # noqa: BLE001 - a case that cannot start is a finding, not the end
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    timer = threading.Timer(deadline_s, session.cancel)  # the share is spent: keep what was measured
    timer.start()
    stages: list[str] = []
    session.on_stage.append(stages.append)
    try:
        trials = list(session.run())
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
        trials = []
    finally:
        timer.cancel()
    record = store.session(session.session_id)
    ok = [t for t in trials if t.ok]
    out.update(session_id=record.id, status=record.status, trials=len(trials), ok=len(ok),
               best_ms=record.best_ms, best_gflops=record.best_gflops, stages=stages[-5:])  # fmt: skip
    failures: dict[str, int] = {}
    for t in trials:
        if not t.ok:
            key = (t.error or "?").splitlines()[0][:160]
            failures[key] = failures.get(key, 0) + 1
    out["failures"] = failures
    if record.best_ms:
        for what, fn in (("vendor", baseline_for), ("roofline", roofline_for)):
            try:
                value = fn(store, record)
                out[what] = None if value is None else value.to_json()
            except Exception as exc:  # noqa: BLE001
                out[what] = {"error": f"{type(exc).__name__}: {exc}"}
    samples = store.telemetry(record.id)
    gpu = [s for s in samples if s.has_gpu]
    if gpu:

        def span(name: str) -> list[float] | None:
            values = [v for s in gpu if (v := getattr(s, name)) is not None]
            return [min(values), max(values)] if values else None

        out["telemetry"] = {"samples": len(gpu), "sm_clock_mhz": span("gpu_sm_clock_mhz"),
                            "mem_clock_mhz": span("gpu_mem_clock_mhz"), "temp_c": span("gpu_temp_c"),
                            "power_w": span("gpu_power_w"),
                            "throttle_reasons": sorted({r for s in gpu for r in s.throttle_reasons})}  # fmt: skip
    else:
        out["telemetry"] = {"samples": len(samples), "gpu": False}
    out["wall_s"] = round(time.time() - started, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="the folder for tunelab.sqlite and summary.json"
    )
    parser.add_argument(
        "--budget-s", type=float, default=480.0, help="the whole run's time (default 8 minutes)"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="the CPU (LLVM) path, small shapes, even with a GPU"
    )
    parser.add_argument("--wheels", type=Path, help="a folder of wheels to install first (the GPU machine)")
    parser.add_argument(
        "--bundle",
        type=Path,
        help="a folder holding every run's files of scripts/gpu_bundle.py: TVM and the rest installed first",
    )
    args = parser.parse_args(argv)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started)) + " UTC"}
    if args.bundle:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gpu_bundle import install_bundle

        summary["installed"] = install_bundle(args.bundle)
    if args.wheels:
        summary["installed"] = summary.get("installed", []) + install_wheels(args.wheels)
    summary["tunelab"] = import_checkout()
    from tunelab.core.measure.threads import use_every_core

    use_every_core()
    summary["environment"] = env = environment()
    gpu = bool(env.get("cuda_in_tvm")) and not args.cpu
    summary["path"] = "cuda" if gpu else "llvm"
    if not gpu and not args.cpu:
        summary["note"] = "TVM sees no CUDA GPU here: the CPU path ran instead"
    from tunelab.core.store import Store

    db = args.out / "tunelab.sqlite"
    store = Store(db)
    cases = _cases(gpu)
    reserve = 0.15 * args.budget_s  # the vendor, the roofline and the summary after each session
    summary["cases"] = []
    for case in cases:
        left = args.budget_s - (time.time() - started)
        if left < 30:
            summary["cases"].append({"case": case["name"], "skipped": f"{left:.0f} s left of the budget"})
            continue
        share = max(min(case["share"] * (args.budget_s - reserve), left - reserve / len(cases)), 20.0)
        print(f"[gpu-check] {case['name']}: up to {share:.0f} s", file=sys.stderr, flush=True)
        try:
            result = run_case(store, case, "cuda" if gpu else "llvm", share)
        except Exception:  # noqa: BLE001 - one broken case must not lose the others' results
            result = {"case": case["name"], "error": traceback.format_exc(limit=3)}
        summary["cases"].append(result)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    store.close()
    summary["wall_s"] = round(time.time() - started, 1)
    summary["database"] = str(db)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    for c in summary["cases"]:
        vendor = (c.get("vendor") or {}).get("x_of_vendor") if isinstance(c.get("vendor"), dict) else None
        roof = (c.get("roofline") or {}).get("fraction") if isinstance(c.get("roofline"), dict) else None
        print(
            f"{c['case']:24s} {c.get('status', c.get('skipped', c.get('error', '?')))!s:10.10s} "
            f"best {c.get('best_gflops') or 0:8.1f} GFLOP/s"
            + (f"  {vendor:.2f}x vendor" if vendor else "")
            + (f"  {100 * roof:.0f}% of roofline" if roof else "")
        )
    print(f"[gpu-check] {summary['wall_s']:.0f} s; {args.out / 'summary.json'}", file=sys.stderr)
    return 0 if any(c.get("ok") for c in summary["cases"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())

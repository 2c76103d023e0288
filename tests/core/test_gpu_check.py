"""The prepared GPU check (scripts/gpu_check.py) end to end on the CPU path: the same steps the GPU's
breadth run takes (five sessions confirmed in fresh processes, each export re-timed in a fresh process,
the vendor and the roofline in the same run, telemetry, a store and a JSON summary the renderer prints),
so that on the GPU only the GPU differs; and the CUDA space checks built for sm_90 without a GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tunelab.core.store import Store

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def test_the_gpu_check_runs_end_to_end_on_the_cpu_path(tmp_path):
    out = tmp_path / "check"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--cpu",
            "--no-cuda-build-check",
            "--out",
            str(out),
            "--budget-s",
            "400",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["path"] == "llvm" and summary["environment"]["tvm"].startswith("0.27")
    cases = {c["case"]: c for c in summary["cases"]}
    assert set(cases) == {
        "gemm_fp32_template", "gemm_fp32_auto", "gemm_fp16_tensor_cores", "gemm_bf16_tensor_cores", "conv2d_resnet"
    }  # fmt: skip
    measured = [c for c in cases.values() if c.get("ok")]
    assert len(measured) >= 3, {k: (c.get("status"), c.get("error")) for k, c in cases.items()}
    for c in measured:
        assert c["best_gflops"] > 0 and c["vendor"]["x_of_vendor"] > 0
        assert c["roofline"]["bound_gflops"] > 0 and c["telemetry"]["samples"] > 0
        assert c["started"] and c["trials_per_min"] > 0 and isinstance(c["failures"], dict)
        assert c["confirmation"] and not c["confirmation"].startswith("confirmation failed"), c[
            "confirmation"
        ]
        # the export, loaded and timed in a fresh process, agrees with NumPy and gives a time
        again = c["retime"]
        assert again["output_ok"] and again["time_evaluator_ms"] > 0, again
    table = subprocess.run(
        [sys.executable, str(SCRIPT), "--render", str(out / "summary.json")], capture_output=True, text=True
    )
    assert table.returncode == 0
    rows = [
        line for line in table.stdout.splitlines() if line.startswith("| gemm") or line.startswith("| conv")
    ]
    assert len(rows) == len(cases) and all(row.count("|") == 10 for row in rows)
    assert cases["gemm_fp16_tensor_cores"]["dtype"] == "float16:float32"
    # the store it wrote opens, with a session per case
    store = Store(out / "tunelab.sqlite")
    assert {r.name for r in store.sessions()} >= {f"gpu check: {c}" for c in cases}
    store.close()
    assert "x vendor" in done.stdout or "GFLOP/s" in done.stdout


def test_the_tuners_run_races_three_tuners_on_each_auto_problem_on_the_cpu_path(tmp_path):
    """Issue 28's GPU recommendation: the run that tunes each auto problem with evolutionary, rl and ucb
    (the order rotated per problem), confirms each best and sets it against the problem's best."""
    out = tmp_path / "tuners"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu", "--no-cuda-build-check", "--run", "tuners", "--out", str(out),
         "--case-s", "150", "--budget-s", "1200"],  # a case ends at its 4 trials; the time only bounds it
        capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    order = [(c["problem"], c["tuner"]) for c in summary["cases"]]
    assert order == [
        ("conv2d_resnet", "evolutionary"), ("conv2d_resnet", "rl"), ("conv2d_resnet", "ucb"),
        ("gemm_fp32_auto", "rl"), ("gemm_fp32_auto", "ucb"), ("gemm_fp32_auto", "evolutionary"),
    ]  # fmt: skip
    for c in summary["cases"]:
        assert c["started"] and c["ok"] >= 1 and c["trials"] <= 4, c
        assert c["confirmation"] and not c["confirmation"].startswith("confirmation failed"), c
        assert "retime" not in c  # the time goes to the sessions
    for problem, ratios in summary["race"].items():
        bests = {c["tuner"]: c["best_ms"] for c in summary["cases"] if c["problem"] == problem}
        assert ratios == {t: ms / min(bests.values()) for t, ms in bests.items()}
        assert min(ratios.values()) == 1.0
    table = subprocess.run(
        [sys.executable, str(SCRIPT), "--render", str(out / "summary.json")], capture_output=True, text=True
    )
    assert table.returncode == 0
    assert "conv2d_resnet: best over the best of the tuners: " in table.stdout
    assert sum(line.startswith("| conv2d_resnet:") for line in table.stdout.splitlines()) == 3


def test_a_checkout_that_is_not_installed_is_importable_in_the_processes_it_starts(tmp_path):
    """The GPU machine has no tunelab installed: the check imports it from the checkout, and the kernel
    runners and builders it starts (fresh Python processes) must import it too (they did not, and every
    session crashed: "the worker running the kernel exited with status 1")."""
    probe = (
        "import sys, subprocess; sys.path.insert(0, sys.argv[1]); import gpu_check; "
        "print(gpu_check.import_checkout()); import tunelab.core; "
        "child = subprocess.run([sys.executable, '-S', '-c', 'import tunelab.core, tunelab.app; "
        "print(tunelab.core.__file__)'], capture_output=True, text=True); "
        "print(child.returncode, child.stdout.strip(), child.stderr.strip()[-300:])"
    )
    # -S: no site-packages, so the installed tunelab is out of reach, as on the GPU machine
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(SCRIPT.parent)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    how, child = done.stdout.strip().splitlines()
    assert how.startswith("from the checkout at")
    code, path, *_ = child.split(" ", 2)
    assert code == "0" and Path(path).resolve() == (SCRIPT.parents[1] / "core" / "__init__.py").resolve(), (
        child
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_cuda_space_checks_build_every_case_for_sm90_without_a_gpu(tmp_path):
    """Issue 29: on an H200 three of the four sessions never started (SpaceError from the schedulability
    probe). Here every GPU case's spec is checked for sm_90 as a session's is and two sampled schedules
    are compiled to PTX: the tensor-core cases with mma.sync, ldmatrix and cp.async."""
    out = tmp_path / "cuda"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cuda-build-check", "--out", str(out)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    checks = {c["case"]: c for c in summary["cuda_build_check"]}
    assert done.returncode == 0, {k: (c.get("error"), c.get("not_built")) for k, c in checks.items()}
    assert len(checks) == 5 and all(c["checked"] and c["built"] >= 1 for c in checks.values()), checks
    for name in ("gemm_fp16_tensor_cores", "gemm_bf16_tensor_cores"):
        ptx = checks[name]["ptx"]
        assert ptx["mma.sync"] > 0 and ptx["ldmatrix"] > 0 and ptx["cp.async"] > 0, (name, ptx)
    assert checks["gemm_fp32_auto"]["ptx"]["mma.sync"] == 0  # float32 runs on the CUDA cores


def test_the_renderer_prints_a_summary_as_a_markdown_table(tmp_path):
    """The table BENCHMARKS.md takes, from a planted summary (a case that did not start says why)."""
    summary = {
        "run": "depth", "path": "cuda", "started": "2026-12-05 10:00:00 UTC", "wall_s": 575.0,
        "environment": {"gpu": {"name": "NVIDIA H200"}},
        "cases": [
            {"case": "gemm_fp16_tensor_cores", "started": True, "trials": 310, "trials_per_min": 74.4,
             "best_ms": 0.2501, "best_gflops": 549_546.0, "vendor": {"x_of_vendor": 0.74},
             "retime": {"retime_over_stated": 1.003}, "failures": {"CUDA_ERROR_INVALID_VALUE at launch": 2}},
            {"case": "conv2d_resnet", "started": False, "error": "SpaceError: every config was rejected"},
        ],
        "tune_tir": {"case": "gemm_fp16_tensor_cores", "trials": 256, "wall_s": 250.0, "best_ms": 0.41, "failed": 3},
        "nvml": {"samples": 570, "sm_clock_mhz": [345, 1980], "temp_c": [32, 52], "power_w": [77, 592]},
    }  # fmt: skip
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--render", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("depth run, cuda (NVIDIA H200)")
    row = next(line for line in lines if line.startswith("| gemm_fp16"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells == ["gemm_fp16_tensor_cores", "yes", "310", "74.4", "0.2501", "549546.0", "0.74", "1.003",
                     "CUDA_ERROR_INVALID_VALUE at launch (2)"]  # fmt: skip
    assert "| conv2d_resnet | no: SpaceError: every config was rejected |" in done.stdout
    raw = next(line for line in lines if line.startswith("| raw tune_tir"))
    assert "| 256 | 61.4 | 0.4100 |" in raw and "3 failed" in raw
    assert "NVML: 570 samples" in done.stdout


def test_raw_tune_tirs_trials_and_best_are_read_from_its_json_database(tmp_path):
    """The depth run reads raw tune_tir's work folder after stopping it: a database MetaSchedule itself
    wrote, with one measured record and one failed (MetaSchedule stores a failure as 1e10 s)."""
    import tvm
    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.workloads.catalog import get_workload

    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check

    mod = get_workload("gemm").ir_module({"M": 64, "N": 64, "K": 64}, "float32")
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    workload = database.commit_workload(mod)
    target = tvm.target.Target({"kind": "llvm"})
    args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    for secs in ([0.002, 0.003, 0.004], [1e10]):
        trace = Schedule(mod).trace
        database.commit_tuning_record(ms.database.TuningRecord(trace, workload, secs, target, args))
    assert gpu_check._tune_tir_records(tmp_path) == {"trials": 2, "failed": 1, "best_ms": 3.0}

"""The prepared GPU check (scripts/gpu_check.py) end to end on the CPU path: the same steps the one GPU
run takes (four sessions, the vendor and the roofline in the same run, telemetry, a store and a JSON
summary), so that on the GPU only the GPU differs."""

from __future__ import annotations

import json
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
        [sys.executable, str(SCRIPT), "--cpu", "--out", str(out), "--budget-s", "400"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["path"] == "llvm" and summary["environment"]["tvm"].startswith("0.27")
    cases = {c["case"]: c for c in summary["cases"]}
    assert set(cases) == {"gemm_fp32_template", "gemm_fp32_auto", "gemm_fp16_tensor_cores", "conv2d_resnet"}
    measured = [c for c in cases.values() if c.get("ok")]
    assert len(measured) >= 3, {k: (c.get("status"), c.get("error")) for k, c in cases.items()}
    for c in measured:
        assert c["best_gflops"] > 0 and c["vendor"]["x_of_vendor"] > 0
        assert c["roofline"]["bound_gflops"] > 0 and c["telemetry"]["samples"] > 0
    assert cases["gemm_fp16_tensor_cores"]["dtype"] == "float16:float32"
    # the store it wrote opens, with a session per case
    store = Store(out / "tunelab.sqlite")
    assert {r.name for r in store.sessions()} >= {f"gpu check: {c}" for c in cases}
    store.close()
    assert "x vendor" in done.stdout or "GFLOP/s" in done.stdout


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

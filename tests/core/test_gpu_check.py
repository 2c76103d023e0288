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

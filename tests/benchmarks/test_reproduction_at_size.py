"""The figure an export states holds in a person's own process, at the sizes people tune (issue 15 part 4).

For GEMM 1024^3 and a ResNet conv2d layer (NCHW 1x64x56x56, 64 filters 3x3): a session is tuned and
confirmed while a planted busy neighbour (one busy loop per core, outside our process tree) runs, as
another user's jobs on a shared machine do. Then:

1. the confirmation taken beside the neighbour (one attempt, no time to measure again) is exported:
   the file must say it cannot be trusted and name the neighbour's pid;
2. the confirmation is taken again with time to measure again: the neighbour leaves when tunelab says
   it is measuring again, and the export must be trusted;
3. on the quiet machine each exported library is loaded as a person's application does (a fresh
   Python process, ``tvm.runtime.load_module``, inputs from ``tvm.runtime.tensor``, timed with
   ``time_evaluator`` and the file's measurement options), in five fresh processes. The trusted file's
   figure for plain TVM allocation (``stats.placement.plain_ms``) must hold within 5 % once the
   machine's own drift (a fixed BLAS reference kernel, timed in each process after the kernel) is taken
   out; the untrusted one is printed beside it. On a shared virtual machine the host's other tenants
   move a memory-bound kernel by 10-15 % between processes with no process list showing them (seen
   here: the same GEMM 1024^3 library 87-115 ms across interleaved fresh processes), so a run can miss
   on noise: BENCHMARKS.md keeps each run's figures.

Slow (about 10-20 minutes on 2 cores): run it with
``python -m pytest tests/benchmarks/test_reproduction_at_size.py -q -s``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from neighbours import start_neighbour, stop_neighbours

from tests.core.specs import small_spec
from tunelab.core.export.files import export_trial
from tunelab.core.records import MeasureOptions
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.trust.confirm import confirm_session
from tunelab.core.workloads.catalog import get_workload

PERSON_RUNS = 5
TOLERANCE = 0.05

# What a person's application does with an exported library: nothing of tunelab, plain TVM only.
PERSON = textwrap.dedent(
    """
    import json, statistics, sys, time
    import numpy as np
    import tvm

    job = json.loads(sys.argv[1])
    dev = tvm.cpu(0)
    lib = tvm.runtime.load_module(job["library"])
    arrays = [np.load(p) for p in job["inputs"]] + [np.zeros(job["out_shape"], dtype=job["dtype"])]
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    entry = getattr(lib, "entry_name", None) or "main"
    lib[entry](*args)
    m = job["measure"]
    f = lib.time_evaluator(entry, dev, number=m["number"], repeat=m["repeat"], min_repeat_ms=m["min_repeat_ms"])
    kernel_ms = statistics.median(f(*args).results) * 1e3
    # the machine's own speed, after the kernel (so that it does not change the kernel's heap history)
    a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    for _ in range(3):
        a @ a
    times = []
    for _ in range(9):
        t = time.perf_counter(); n = 0
        while time.perf_counter() - t < 0.01:
            a @ a; n += 1
        times.append((time.perf_counter() - t) * 1e3 / n)
    print(json.dumps({"kernel_ms": kernel_ms, "reference_ms": statistics.median(times)}))
    """
)

CASES = {
    "gemm_1024": ("gemm", {"M": 1024, "N": 1024, "K": 1024}),
    "conv2d_resnet": ("conv2d_nchw", {}),  # the workload's default: a ResNet-50 stage-2 3x3 layer
}


def _neighbours() -> list[int]:
    """One busy loop per core, outside our process tree: enough to slow these multi-threaded kernels."""
    return [start_neighbour() for _ in range(os.cpu_count() or 2)]


def _in_a_persons_process(schedule: Path, library: Path, folder: Path) -> list[dict]:
    doc = json.loads(schedule.read_text())
    workload = get_workload(doc["workload"])
    shape = {k: int(v) for k, v in doc["shape"].items()}
    inputs = workload.make_inputs(shape, doc["dtype"], int(doc.get("seed", 0)))
    paths = []
    for i, x in enumerate(inputs):
        paths.append(str(folder / f"in{i}.npy"))
        np.save(paths[-1], x)
    measure = doc["stats"]["measure"]
    job = {
        "library": str(library),
        "inputs": paths,
        "out_shape": list(workload.output_shape(shape)),
        "dtype": doc["dtype"],
        "measure": {k: int(measure[k]) for k in ("number", "repeat", "min_repeat_ms")},
    }
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    runs = []
    for _ in range(PERSON_RUNS):
        proc = subprocess.run(
            [sys.executable, "-c", PERSON, json.dumps(job)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return runs


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_stated_figure_holds_in_a_persons_process_or_the_file_says_why_not(case, tmp_path):
    workload, shape = CASES[case]
    store = Store(tmp_path / "tunelab.sqlite")
    spec = small_spec(
        workload=workload,
        shape=shape or None,
        space_kind="auto",
        tuner="evolutionary",
        trials=16,
        batch=8,
        measure=MeasureOptions(cooldown_s=0.5, confirm_runs=0),  # confirmed below, by hand
    )
    pids = _neighbours()
    stages: list[str] = []
    try:
        time.sleep(0.5)
        session = create_session(store, spec)
        for _ in session.run():
            pass
        sid = session.session_id
        # 1. confirmed beside the neighbour, with no time to measure again
        confirm_session(store, sid, top_k=3, runs=5, max_s=0, on_stage=stages.append)
        noisy = export_trial(store, sid, out_dir=tmp_path / "noisy", formats=("schedule", "library"))

        # 2. with time to measure again: the neighbour leaves once tunelab says it measures again
        def on_stage(text: str) -> None:
            stages.append(text)
            if "measuring again" in text:
                stop_neighbours(pids)

        confirm_session(store, sid, top_k=3, runs=5, max_s=1200, on_stage=on_stage)
    finally:
        stop_neighbours(pids)
    settled = export_trial(store, sid, out_dir=tmp_path / "settled", formats=("schedule", "library"))
    assert any("measuring again" in s for s in stages), stages

    noisy_doc = json.loads(Path(noisy["schedule"]).read_text())
    assert not noisy_doc["stats"]["trusted"]
    because = noisy_doc["stats"]["untrusted_because"]
    assert because.startswith("confirmed while") and any(f"pid {p}" in because for p in pids), because

    settled_doc = json.loads(Path(settled["schedule"]).read_text())
    stats = settled_doc["stats"]
    # 3. on the quiet machine, in a person's process
    time.sleep(1.0)
    person = _in_a_persons_process(Path(settled["schedule"]), Path(settled["library"]), tmp_path)
    person_noisy = _in_a_persons_process(Path(noisy["schedule"]), Path(noisy["library"]), tmp_path)
    kernel_ms = statistics.median(r["kernel_ms"] for r in person)
    reference_ms = statistics.median(r["reference_ms"] for r in person)
    plain_ms = stats["placement"]["plain_ms"]
    ratio = kernel_ms / plain_ms
    drift = reference_ms / stats["reference_ms"] if stats.get("reference_ms") else 1.0
    noisy_ms = statistics.median(r["kernel_ms"] for r in person_noisy)
    noisy_stated = noisy_doc["stats"]["placement"].get("plain_ms") or noisy_doc["stats"]["median_ms"]
    print(
        f"\n{case}: trusted file states {stats['median_ms']:.3f} ms (staggered), plain {plain_ms:.3f} ms, "
        f"aligned {stats['placement'].get('aligned_ms')}, sensitive {stats['placement_sensitive']}, "
        f"95% interval {stats['ci_ms']}; a person's process: {kernel_ms:.3f} ms "
        f"({[round(r['kernel_ms'], 3) for r in person]}), ratio {ratio:.3f}, machine drift {drift:.3f}, "
        f"corrected {ratio / drift:.3f}.\n  untrusted file states {noisy_doc['stats']['median_ms']:.3f} ms "
        f"(plain {noisy_stated:.3f} ms) because {because}; a person's process: {noisy_ms:.3f} ms "
        f"({noisy_ms / noisy_stated:.3f}x)"
    )
    assert stats["trusted"], stats["untrusted_because"]
    store.close()
    assert abs(ratio / drift - 1) <= TOLERANCE, (ratio, drift, person)

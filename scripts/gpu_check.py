"""The prepared GPU check (issues 12 and 29): prepared runs on a machine with a CUDA GPU are tunelab's GPU benchmark.

    python3 scripts/gpu_check.py --out OUT --run breadth    # every case, 75 s of tuning each (about 9.5 minutes)
    python3 scripts/gpu_check.py --out OUT --run depth      # one case 250 s, then raw tune_tir 250 s
    python3 scripts/gpu_check.py --out OUT --run tuners     # issue 28's auto problems, three tuners each
    python3 scripts/gpu_check.py --out OUT --cpu            # the breadth steps on this CPU (LLVM), small shapes,
                                                            # after the CUDA space checks below
    python3 scripts/gpu_check.py --out OUT --cuda-build-check   # the CUDA space checks alone (no GPU needed)
    python3 scripts/gpu_check.py --render OUT/summary.json  # the summary as BENCHMARKS.md's Markdown table

Each run fits 15 minutes of a GPU machine with its start and the bundle's two installs. Into one folder:

1. the environment: TVM, the GPU TVM sees, NVML, PyTorch and CuPy (what the vendor baseline goes through);
2. *breadth*: five sessions, ``--case-s`` seconds each (75) (stopped then, keeping what they measured): fp32 GEMM
   4096³ with the template space and with the auto space, GEMM 4096³ on tensor cores with float16 and with
   bfloat16 inputs accumulated in float32 (the auto space's MMA rule: mma.sync, ldmatrix, cp.async), and the
   ResNet 3x3 conv2d layer (N=1, C=K=64, 56x56, pad 1); for each, whether it started, its trials a minute
   and its faults by kind;
   *depth*: one case (``--case``) for ``--depth-s`` seconds, then MetaSchedule's own ``tune_tir`` on the
   same compute and GPU for the same wall time (in a child stopped at that time; its JSON database read);
   *tuners*: issue 28's two auto problems (the ResNet conv, GEMM 1024³ fp32), each tuned by the tuners a GPU's
   recommendation is chosen from (evolutionary, rl, ucb), 64 trials or ``--case-s`` seconds (60) each,
   whichever comes first, in an order rotated per problem; each best confirmed, and set against the best
   of the three on its problem (no export re-time: the time goes to the sessions);
3. with the confirmation on (the best schedules timed again in fresh processes), and an independent
   re-time of each session's export: exported with ``tunelab export``, loaded as plain TVM loads a library
   in a fresh process, timed with TVM's ``time_evaluator`` (beside cuBLAS through PyTorch, TF32 off, for a
   GEMM) and checked against NumPy;
4. the vendor library (cuBLAS / cuDNN through PyTorch, TF32 off) and this machine's roofline, each best
   against both; NVML telemetry for every trial and sampled once a second through the whole run;
5. ``OUT/tunelab.sqlite`` (opens in the app) and ``OUT/summary.json`` (``--render`` prints its table).

The CUDA space checks (what runs here without a GPU, and on the CPU path): every GPU case's spec is checked
for an H200 (sm_90) as a session would be (``check_spec``, the schedulability probe included) and a few
sampled schedules are built and compiled to PTX with nvcc; a space the GPU machine would refuse is refused
here.

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


SM90 = {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152,
        "thread_warp_size": 32, "registers_per_block": 65536}  # fmt: skip  # an H200, as the check builds for it
# One command on the GPU machine runs at most 10 minutes, and a task's machine is lent for 15 minutes with
# its start and the bundle's two runs: a breadth case tunes 75 s and then spends about 40 s on its start,
# its confirmation and its re-time (five cases: about 9.5 minutes); the depth run's two halves are 250 s
# each, not the 5 minutes asked for, so that both fit one command.
CASE_S = 75.0
DEPTH_S = 250.0
DEPTH_CASE = "gemm_fp16_tensor_cores"
# The tuners run: the candidates for an auto space's recommendation on a GPU (BENCHMARKS.md, issue 28):
# MetaSchedule's evolutionary search (the recommendation, reasoned), rl (measured best on a CPU) and ucb (the
# CPU's runner-up, whose arms include xgb's model). Six sessions of at most 60 s, each with about 30 s of
# start and confirmation.
TUNER_RACE = ("evolutionary", "rl", "ucb")
TUNERS_CASE_S = 60.0
RESNET_CONV = {
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


def _cases(gpu: bool) -> list[dict[str, Any]]:
    if gpu:
        gemm = {"M": 4096, "N": 4096, "K": 4096}
        conv = RESNET_CONV
        trials = 100_000  # stopped by time: a breadth case is its trials a minute
    else:  # the CPU path: the same steps at sizes two cores finish in a few minutes
        gemm = {"M": 128, "N": 128, "K": 128}
        conv = {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "stride": 1, "pad": 1, "dilation": 1}
        trials = 4
    return [
        {"name": "gemm_fp32_template", "workload": "gemm", "shape": gemm, "dtype": "float32", "space": "template",
         "tuner": "xgb", "trials": trials},
        {"name": "gemm_fp32_auto", "workload": "gemm", "shape": gemm, "dtype": "float32", "space": "auto",
         "tuner": "evolutionary", "trials": trials},
        {"name": "gemm_fp16_tensor_cores", "workload": "gemm", "shape": gemm, "dtype": "float16:float32",
         "space": "auto", "tuner": "evolutionary", "trials": trials},
        {"name": "gemm_bf16_tensor_cores", "workload": "gemm", "shape": gemm, "dtype": "bfloat16:float32",
         "space": "auto", "tuner": "evolutionary", "trials": trials},
        {"name": "conv2d_resnet", "workload": "conv2d_nchw", "shape": conv, "dtype": "float32", "space": "auto",
         "tuner": "evolutionary", "trials": trials},
    ]  # fmt: skip


def _tuner_cases(gpu: bool) -> list[dict[str, Any]]:
    """Issue 28's auto problems, each tuned by every tuner of TUNER_RACE, the order rotated per problem (a
    drift of the GPU's clocks falls on another tuner each problem)."""
    base = {c["name"]: c for c in _cases(gpu)}
    gemm = {"M": 1024, "N": 1024, "K": 1024} if gpu else base["gemm_fp32_auto"]["shape"]
    problems = [
        ("conv2d_resnet", base["conv2d_resnet"]),
        ("gemm_fp32_1024" if gpu else "gemm_fp32_auto", {**base["gemm_fp32_auto"], "shape": gemm}),
    ]
    cases = []
    for i, (name, case) in enumerate(problems):
        order = TUNER_RACE[i:] + TUNER_RACE[:i]
        cases += [
            {**case, "name": f"{name}:{tuner}", "problem": name, "tuner": tuner, "trials": 64 if gpu else 4}
            for tuner in order
        ]
    return cases


def _race(cases: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per problem of a tuners run, each tuner's best over the best any of them found there."""
    race: dict[str, dict[str, float]] = {}
    for c in cases:
        if c.get("problem") and c.get("best_ms"):
            race.setdefault(c["problem"], {})[c["tuner"]] = c["best_ms"]
    return {
        problem: {tuner: ms / min(bests.values()) for tuner, ms in bests.items()}
        for problem, bests in race.items()
    }


def _spec(case: dict[str, Any], target: str, gpu: bool) -> Any:
    """The session spec of a case, with the confirmation on (fresh processes time the best again)."""
    from tunelab.core.records import MeasureOptions, SessionSpec

    measure = MeasureOptions(
        confirm_runs=2 if gpu else 1, confirm_top=1, confirm_max_s=20.0,
        cooldown_s=0.0, timeout_s=60.0,
    )  # fmt: skip
    return SessionSpec(
        workload=case["workload"], shape=case["shape"], dtype=case["dtype"], target=target,
        space_kind=case["space"], tuner=case["tuner"], trials=case["trials"], batch=16 if gpu else 4,
        measure=measure, name=f"gpu check: {case['name']}",
    )  # fmt: skip


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
        import tunelab.core

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
    import tunelab.core  # noqa: F401

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


def run_case(store: Any, case: dict[str, Any], target: str, deadline_s: float, gpu: bool) -> dict[str, Any]:
    """One session, stopped when its time is spent, then confirmed in fresh processes; its trials a
    minute, its faults, its best against the vendor and the roofline."""
    import threading

    from tunelab.core.session.loop import create_session
    from tunelab.core.trust.baselines import baseline_for
    from tunelab.core.trust.roofline import roofline_for

    started = time.time()
    out: dict[str, Any] = {"case": case["name"], "workload": case["workload"], "shape": case["shape"],
                           "dtype": case["dtype"], "space": case["space"], "tuner": case["tuner"]}  # fmt: skip
    try:
        session = create_session(store, _spec(case, target, gpu))
    except Exception as exc:  # noqa: BLE001 - a case that cannot start is a finding, not the end
        out.update(
            started=False, error=f"{type(exc).__name__}: {exc}", wall_s=round(time.time() - started, 1)
        )
        return out
    out["started"] = True
    out["start_s"] = round(time.time() - started, 1)  # the spec's checks, the probe included
    timer = threading.Timer(deadline_s, session.cancel)  # the time is spent: keep what was measured
    timer.start()
    stages: list[str] = []
    session.on_stage.append(stages.append)
    tuning = time.time()
    try:
        trials = list(session.run())
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
        trials = []
    finally:
        timer.cancel()
    tuned_s = time.time() - tuning
    out["confirmation"] = _confirm(store, session.session_id)
    record = store.session(session.session_id)
    ok = [t for t in trials if t.ok]
    out.update(session_id=record.id, status=record.status, trials=len(trials), ok=len(ok),
               tuning_s=round(tuned_s, 1), trials_per_min=round(60.0 * len(trials) / max(tuned_s, 1e-9), 1),
               best_ms=record.best_ms, best_gflops=record.best_gflops, stages=stages[-5:])  # fmt: skip
    out["failures"] = _faults(trials)
    if record.best_ms:
        for what, fn in (("vendor", baseline_for), ("roofline", roofline_for)):
            try:
                value = fn(store, record)
                out[what] = None if value is None else value.to_json()
            except Exception as exc:  # noqa: BLE001
                out[what] = {"error": f"{type(exc).__name__}: {exc}"}
    out["telemetry"] = _session_telemetry(store, record.id)
    out["wall_s"] = round(time.time() - started, 1)
    return out


def _confirm(store: Any, session_id: int) -> str:
    """The session's best timed again in fresh processes (its MeasureOptions say how many), in words."""
    from tunelab.core.trust.confirm import confirm_session, format_confirmations

    try:
        return format_confirmations(confirm_session(store, session_id))
    except Exception as exc:  # noqa: BLE001 - an unconfirmed best is reported, the run goes on
        return f"confirmation failed: {type(exc).__name__}: {exc}"


def _faults(trials: list[Any]) -> dict[str, int]:
    """Failed trials by the first line of their error (a CUDA fault's name, a timeout, a wrong result)."""
    failures: dict[str, int] = {}
    for t in trials:
        if not t.ok:
            key = (t.error or "?").splitlines()[0][:160]
            failures[key] = failures.get(key, 0) + 1
    return failures


def _session_telemetry(store: Any, session_id: int) -> dict[str, Any]:
    samples = store.telemetry(session_id)
    gpu = [s for s in samples if s.has_gpu]
    if not gpu:
        return {"samples": len(samples), "gpu": False}

    def span(name: str) -> list[float] | None:
        values = [v for s in gpu if (v := getattr(s, name)) is not None]
        return [min(values), max(values)] if values else None

    return {"samples": len(gpu), "sm_clock_mhz": span("gpu_sm_clock_mhz"),
            "mem_clock_mhz": span("gpu_mem_clock_mhz"), "temp_c": span("gpu_temp_c"),
            "power_w": span("gpu_power_w"),
            "throttle_reasons": sorted({r for s in gpu for r in s.throttle_reasons})}  # fmt: skip


class NvmlThroughout:
    """NVML read once a second for the whole run (between sessions and during raw tune_tir too)."""

    def __init__(self, period_s: float = 1.0) -> None:
        import threading

        from tunelab.core.telemetry.nvml import NvmlSource

        self.source = NvmlSource()
        self.readings: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(period_s,), daemon=True)
        if self.source.available:
            self._thread.start()

    def _loop(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            reading = self.source.read()
            if reading is not None:
                self.readings.append(reading)

    def summary(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.source.close()
        if not self.readings:
            return {"samples": 0, "status": self.source.name if self.source.available else self.source.status}

        def span(name: str) -> list[float] | None:
            values = [v for r in self.readings if (v := getattr(r, name)) is not None]
            return [min(values), max(values)] if values else None

        masks = sorted({r.throttle_mask for r in self.readings if r.throttle_mask})
        return {"samples": len(self.readings), "sm_clock_mhz": span("sm_clock_mhz"),
                "mem_clock_mhz": span("mem_clock_mhz"), "temp_c": span("temp_c"), "power_w": span("power_w"),
                "util_pct": span("util_pct"), "throttle_masks": masks}  # fmt: skip


# ---- the independent re-time --------------------------------------------------------------------------
def retime(db: Path, session_id: int, folder: Path) -> dict[str, Any]:
    """A session's best, exported through tunelab's CLI, timed in a fresh process (this function runs in
    one: ``--retime``) as plain TVM loads a library: TVM's time_evaluator, the output checked against
    NumPy, and for a GEMM on CUDA cuBLAS through PyTorch (TF32 off) in the same process."""
    import numpy as np
    import tvm

    from tunelab.core.store import Store
    from tunelab.core.workloads.catalog import get_workload

    store = Store(db)
    record = store.session(session_id)
    store.close()
    kind = record.target.get("kind")
    res: dict[str, Any] = {"session": session_id, "workload": record.workload, "dtype": record.dtype}
    out = folder / f"export-{session_id}"
    done = subprocess.run(
        [sys.executable, "-m", "tunelab", "export", str(session_id), "--out", str(out), "--db", str(db), "--force"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        res["export_error"] = ((done.stderr or done.stdout).strip().splitlines() or ["?"])[-1]
        return res
    library = next(out.rglob("*.so"))
    stats = json.loads(next(out.rglob("*.schedule.json")).read_text())["stats"]
    res.update(stated_ms=stats.get("median_ms"), trusted=stats.get("trusted"))
    dev = tvm.cuda(0) if kind == "cuda" else tvm.cpu()
    workload = get_workload(record.workload)
    inputs = workload.make_inputs(record.shape, record.dtype)
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    args.append(tvm.runtime.tensor(workload.make_output(record.shape, record.dtype), dev))
    lib = tvm.runtime.load_module(str(library))
    evaluator = lib.time_evaluator("main", dev, number=20 if kind == "cuda" else 3, repeat=10 if kind == "cuda" else 5,
                                   min_repeat_ms=50 if kind == "cuda" else 20)  # fmt: skip
    res["time_evaluator_ms"] = float(np.median(np.array(evaluator(*args).results) * 1e3))
    if res["stated_ms"]:
        res["retime_over_stated"] = res["time_evaluator_ms"] / res["stated_ms"]
    expected = workload.reference(inputs, record.shape, record.dtype).astype(np.float64)
    got = args[-1].numpy().astype(np.float64)
    res["max_rel_err"] = float(np.abs(got - expected).max() / (np.abs(expected).max() + 1e-30))
    rtol, atol = workload.tolerance(record.dtype, record.shape)
    res["output_ok"] = bool(np.allclose(got, expected, rtol=rtol, atol=atol))
    if kind == "cuda" and record.workload == "gemm":
        res.update(_torch_matmul(inputs, res["time_evaluator_ms"]))
    return res


def _torch_matmul(inputs: list[Any], tvm_ms: float) -> dict[str, Any]:
    """cuBLAS through PyTorch (TF32 off) on the same inputs, in this process, timed with CUDA events."""
    try:
        import torch
    except ImportError as exc:
        return {"torch": f"missing ({exc})"}
    import numpy as np

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a, b = (
        torch.from_numpy(np.asarray(x, dtype=np.float32)).cuda().to(_torch_dtype(torch, x)) for x in inputs
    )
    for _ in range(5):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            torch.matmul(a, b)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 20)
    torch_ms = float(np.median(times))
    return {"torch_ms": torch_ms, "torch_dtype": str(a.dtype), "x_of_torch": torch_ms / tvm_ms}


def _torch_dtype(torch: Any, array: Any) -> Any:
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(str(array.dtype), torch.float32)


def retime_in_child(db: Path, session_id: int, folder: Path) -> dict[str, Any]:
    """:func:`retime` in a fresh process (nothing of this one's TVM state, caches or libraries)."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--retime", str(db), str(session_id), "--out", str(folder)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {
            "session": session_id,
            "error": ((done.stderr or done.stdout).strip().splitlines() or ["?"])[-1],
        }
    return json.loads(lines[-1])


# ---- raw MetaSchedule beside tunelab (the depth run) -------------------------------------------------
def tune_tir_child(case: dict[str, Any], target_json: str, work_dir: Path) -> None:
    """MetaSchedule's own ``tune_tir`` on a case's compute, as it comes (its default rules for the target;
    ``cuda-tensorcore`` for tensor-core dtypes); runs until its parent stops it."""
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.target.info import resolve_target
    from tunelab.core.workloads.catalog import get_workload

    target = resolve_target(json.loads(target_json) if target_json.startswith("{") else target_json)
    mod = get_workload(case["workload"]).ir_module(case["shape"], case["dtype"])
    space: Any = "post-order-apply"
    if ":" in case["dtype"] and target.kind == "cuda":
        space = ms.space_generator.PostOrderApply(
            sch_rules="cuda-tensorcore", postprocs="cuda-tensorcore", mutator_probs="cuda-tensorcore"
        )
    batch = int(
        case.get("tune_tir_batch", 64)
    )  # MetaSchedule's default; smaller only to see records on 2 cores
    ms.tune_tir(
        mod,
        target.tvm_target(),
        str(work_dir),
        max_trials_global=1_000_000,
        num_trials_per_iter=batch,
        space=space,
    )


def raw_tune_tir(case: dict[str, Any], target_json: str, seconds: float, work_dir: Path) -> dict[str, Any]:
    """:func:`tune_tir_child` for ``seconds`` of wall time, then its JSON database read: trials, best."""
    import os
    import signal

    work_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--tune-tir", json.dumps(case), target_json,
               "--out", str(work_dir)]  # fmt: skip
    started = time.time()
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _, err = child.communicate(timeout=seconds)
        ended = (
            f"exited with status {child.returncode}: "
            + (err.decode(errors="replace").strip().splitlines() or [""])[-1]
        )
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # its builders and runners too
        child.communicate()
        ended = "stopped at its time"
    out = {"wall_s": round(time.time() - started, 1), "ended": ended[:300]}
    out.update(_tune_tir_records(work_dir))
    return out


def _tune_tir_records(work_dir: Path) -> dict[str, Any]:
    """Trials and the best median time (ms) in a tune_tir work folder's JSON database."""
    import statistics

    medians: list[float] = []
    failed = 0
    for path in work_dir.glob("*tuning_record*.json"):
        for line in path.read_text().splitlines():
            try:
                secs = json.loads(line)[1][1]
            except (ValueError, IndexError, TypeError):
                continue
            if isinstance(secs, list) and secs and all(isinstance(x, int | float) for x in secs):
                medians.append(statistics.median(secs) * 1e3)
            else:
                failed += 1
    ok = [m for m in medians if m < 1e9]  # MetaSchedule stores a failed run as 1e10 s
    return {
        "trials": len(medians) + failed,
        "failed": failed + len(medians) - len(ok),
        "best_ms": min(ok) if ok else None,
    }


# ---- the CUDA space checks (no GPU needed) -----------------------------------------------------------
TENSOR_CORE_MARKS = ("mma.sync", "ldmatrix", "cp.async", "wmma.mma")


def cuda_build_checks(folder: Path, samples: int = 2) -> list[dict[str, Any]]:
    """Every GPU case checked for an H200 as a session would be (check_spec: the space built, the
    schedulability probe) and ``samples`` sampled schedules built and compiled to PTX with nvcc."""
    import shutil

    from tunelab.core.session.loop import check_spec
    from tunelab.core.target.info import resolve_target
    from tunelab.core.usecases.compile import _compile_one, _schedulable_configs

    target = resolve_target(SM90, elsewhere=True)
    results = []
    for case in _cases(gpu=True):
        started = time.time()
        out: dict[str, Any] = {"case": case["name"], "dtype": case["dtype"], "space": case["space"]}
        try:
            space = check_spec(_spec(case, json.dumps(SM90), gpu=True), target).space
        except Exception as exc:  # noqa: BLE001 - the refusal is the finding
            out.update(
                checked=False, error=f"{type(exc).__name__}: {exc}", wall_s=round(time.time() - started, 1)
            )
            results.append(out)
            continue
        out["checked"] = True
        if shutil.which("nvcc") is None:
            out["built"] = "nvcc is not on PATH: nothing compiled"
            results.append(out)
            continue
        case_dir = folder / case["name"]
        case_dir.mkdir(parents=True, exist_ok=True)
        found, draws, rejected = _schedulable_configs(space, samples, 0, None)
        built = [_compile_one(sch, config, i, target, case_dir) for i, (config, sch) in enumerate(found)]
        ptx = b"".join((case_dir / f"{b.index:02d}.ptx").read_bytes() for b in built if b.ok)
        out.update(draws=draws, built=sum(b.ok for b in built), sampled=len(built),
                   not_built=[b.reason for b in built if not b.ok][:3],
                   ptx={mark: ptx.count(mark.encode()) for mark in TENSOR_CORE_MARKS},
                   wall_s=round(time.time() - started, 1))  # fmt: skip
        results.append(out)
    return results


# ---- the summary as Markdown --------------------------------------------------------------------------
def render(summary: dict[str, Any]) -> str:
    """BENCHMARKS.md's table of a summary.json: one row a case (and raw tune_tir in a depth run)."""
    env = summary.get("environment", {})
    gpu = (env.get("gpu") or {}).get("name", "no GPU")
    lines = [f"{summary.get('run', 'breadth')} run, {summary.get('path')} ({gpu}), {summary.get('started', '?')}, "
             f"{summary.get('wall_s', '?')} s", "",
             "| case | started | trials | trials/min | best ms | GFLOP/s | x vendor | re-time / stated | faults |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for c in summary.get("cases", []):
        vendor = c.get("vendor") if isinstance(c.get("vendor"), dict) else {}
        again = c.get("retime") or {}
        ratio = again.get("retime_over_stated")
        faults = "; ".join(f"{k} ({n})" for k, n in (c.get("failures") or {}).items())
        started = "yes" if c.get("started") else f"no: {c.get('error') or c.get('skipped', '?')}"[:80]
        lines.append(
            f"| {c['case']} | {started} | {c.get('trials', '-')} | {c.get('trials_per_min', '-')} | "
            f"{_num(c.get('best_ms'), 4)} | {_num(c.get('best_gflops'), 1)} | {_num(vendor.get('x_of_vendor'), 2)} | "
            f"{_num(ratio, 3)} | {faults or '-'} |"
        )
    raw = summary.get("tune_tir")
    if raw:
        per_min = 60 * (raw.get("trials") or 0) / max(raw.get("wall_s") or 1, 1)
        lines.append(f"| raw tune_tir ({raw.get('case')}) | yes | {raw.get('trials')} | {_num(per_min, 1)} | "
                     f"{_num(raw.get('best_ms'), 4)} | - | - | - | {raw.get('failed', 0)} failed |")  # fmt: skip
    for problem, ratios in (summary.get("race") or {}).items():
        ranked = ", ".join(
            f"{tuner} {ratio:.3f}" for tuner, ratio in sorted(ratios.items(), key=lambda kv: kv[1])
        )
        lines += ["", f"{problem}: best over the best of the tuners: {ranked}"]
    nvml = summary.get("nvml") or {}
    if nvml.get("samples"):
        lines += ["", f"NVML: {nvml['samples']} samples, SM clock {nvml.get('sm_clock_mhz')} MHz, "
                  f"{nvml.get('temp_c')} °C, {nvml.get('power_w')} W"]  # fmt: skip
    return "\n".join(lines)


def _num(value: Any, digits: int) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.{digits}f}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="the folder for tunelab.sqlite and summary.json")
    parser.add_argument(
        "--run", choices=("breadth", "depth", "tuners"), default="breadth", help="which prepared run"
    )
    parser.add_argument(
        "--case-s", type=float, help=f"a breadth case's time (default {CASE_S:.0f} s on the GPU)"
    )
    parser.add_argument("--case", default=DEPTH_CASE, help=f"the depth run's case (default {DEPTH_CASE})")
    parser.add_argument("--depth-s", type=float, default=DEPTH_S, help="tunelab's and then tune_tir's time")
    parser.add_argument(
        "--budget-s", type=float, default=570.0, help="the whole run's time; cases past it are skipped"
    )
    parser.add_argument(
        "--tune-tir-batch", type=int, default=64, help="raw tune_tir's candidates a round (64, its default)"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="the CPU (LLVM) path, small shapes, even with a GPU"
    )
    parser.add_argument(
        "--cuda-build-check", action="store_true", help="only the CUDA space checks (no GPU needed)"
    )
    parser.add_argument(
        "--no-cuda-build-check", action="store_true", help="the CPU path without the CUDA space checks"
    )
    parser.add_argument(
        "--render", type=Path, metavar="SUMMARY", help="print a summary.json as a Markdown table"
    )
    parser.add_argument("--retime", nargs=2, metavar=("DB", "SESSION"), help=argparse.SUPPRESS)
    parser.add_argument("--tune-tir", nargs=2, metavar=("CASE", "TARGET"), help=argparse.SUPPRESS)
    parser.add_argument("--wheels", type=Path, help="a folder of wheels to install first (the GPU machine)")
    parser.add_argument(
        "--bundle", type=Path,
        help="a folder holding every run's files of scripts/gpu_bundle.py: TVM and the rest installed first",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return 0
    if args.out is None:
        print("gpu_check: --out FOLDER is needed", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.retime:  # the child of retime_in_child
        import_checkout()
        print(json.dumps(retime(Path(args.retime[0]), int(args.retime[1]), args.out), default=str))
        return 0
    if args.tune_tir:  # the child of raw_tune_tir
        import_checkout()
        tune_tir_child(json.loads(args.tune_tir[0]), args.tune_tir[1], args.out)
        return 0
    started = time.time()
    summary: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started)) + " UTC",
                               "run": "cuda-build-check" if args.cuda_build_check else args.run}  # fmt: skip
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
    gpu = bool(env.get("cuda_in_tvm")) and not args.cpu and not args.cuda_build_check
    summary["path"] = "cuda" if gpu else "llvm"
    if not gpu and not (args.cpu or args.cuda_build_check):
        summary["note"] = "TVM sees no CUDA GPU here: the CPU path ran instead"
    if args.cuda_build_check or (not gpu and not args.no_cuda_build_check):
        print("[gpu-check] the CUDA space checks for sm_90", file=sys.stderr, flush=True)
        summary["cuda_build_check"] = cuda_build_checks(args.out / "cuda-build-check")
        _write(args.out, summary)
        if args.cuda_build_check:
            return _finish(args.out, summary, started, _cuda_checks_passed(summary["cuda_build_check"]))
    nvml = NvmlThroughout()
    try:
        if args.run == "depth":
            _depth(args, summary, gpu, started)
        elif args.run == "tuners":
            _tuners(args, summary, gpu, started)
        else:
            _breadth(args, summary, gpu, started)
    finally:
        summary["nvml"] = nvml.summary()
    for c in summary["cases"]:
        vendor = (c.get("vendor") or {}).get("x_of_vendor") if isinstance(c.get("vendor"), dict) else None
        print(
            f"{c['case']:24s} {c.get('status', c.get('skipped', c.get('error', '?')))!s:10.10s} "
            f"best {c.get('best_gflops') or 0:8.1f} GFLOP/s" + (f"  {vendor:.2f}x vendor" if vendor else "")
        )
    return _finish(args.out, summary, started, any(c.get("ok") for c in summary["cases"]))


def _breadth(args: argparse.Namespace, summary: dict[str, Any], gpu: bool, started: float) -> None:
    """Every case for ``--case-s`` seconds (on the CPU path, a share of the budget), each re-timed."""
    cases = _cases(gpu)
    case_s = args.case_s or (CASE_S if gpu else max(20.0, 0.6 * args.budget_s / len(cases)))
    _run_cases(args, summary, gpu, started, cases, case_s)


def _tuners(args: argparse.Namespace, summary: dict[str, Any], gpu: bool, started: float) -> None:
    """Each auto problem tuned by each tuner of TUNER_RACE, and each best over the problem's best."""
    cases = _tuner_cases(gpu)
    case_s = args.case_s or (TUNERS_CASE_S if gpu else max(20.0, 0.6 * args.budget_s / len(cases)))
    _run_cases(args, summary, gpu, started, cases, case_s, retime=False)
    summary["race"] = _race(summary["cases"])
    _write(args.out, summary)


def _depth(args: argparse.Namespace, summary: dict[str, Any], gpu: bool, started: float) -> None:
    """One case for ``--depth-s`` seconds, then raw tune_tir on its compute for the same wall time."""
    case = next((c for c in _cases(gpu) if c["name"] == args.case), None)
    if case is None:
        raise SystemExit(f"gpu_check: no case {args.case!r}; cases are {[c['name'] for c in _cases(gpu)]}")
    _run_cases(args, summary, gpu, started, [case], args.depth_s)
    print(f"[gpu-check] raw tune_tir on {case['name']}: {args.depth_s:.0f} s", file=sys.stderr, flush=True)
    target = "cuda" if gpu else "llvm"
    summary["tune_tir"] = {
        "case": case["name"],
        **raw_tune_tir(
            {**case, "tune_tir_batch": args.tune_tir_batch}, target, args.depth_s, args.out / "tune_tir"
        ),
    }
    ours, theirs = summary["cases"][0].get("best_ms"), summary["tune_tir"].get("best_ms")
    if ours and theirs:
        summary["tune_tir"]["tunelab_x_of_tune_tir"] = theirs / ours
    _write(args.out, summary)


def _run_cases(args: argparse.Namespace, summary: dict[str, Any], gpu: bool, started: float,
               cases: list[dict[str, Any]], case_s: float, retime: bool = True) -> None:  # fmt: skip
    from tunelab.core.store import Store

    db = args.out / "tunelab.sqlite"
    summary["database"] = str(db)
    summary["cases"] = []
    store = Store(db)
    try:
        for case in cases:
            left = args.budget_s - (time.time() - started)
            if left < 30:
                summary["cases"].append({"case": case["name"], "skipped": f"{left:.0f} s left of the budget"})
                continue
            print(f"[gpu-check] {case['name']}: {case_s:.0f} s", file=sys.stderr, flush=True)
            try:
                result = run_case(store, case, "cuda" if gpu else "llvm", min(case_s, left - 20), gpu)
            except Exception:  # noqa: BLE001 - one broken case must not lose the others' results
                result = {"case": case["name"], "error": traceback.format_exc(limit=3)}
            result["problem"] = case.get("problem")  # a tuners run's problem (the case names its tuner)
            if retime and result.get("best_ms"):
                result["retime"] = retime_in_child(db, result["session_id"], args.out / "exports")
            summary["cases"].append(result)
            _write(args.out, summary)
    finally:
        store.close()


def _cuda_checks_passed(checks: list[dict[str, Any]]) -> bool:
    return all(c.get("checked") and (not isinstance(c.get("built"), int) or c["built"] >= 1) for c in checks)


def _write(out: Path, summary: dict[str, Any]) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))


def _finish(out: Path, summary: dict[str, Any], started: float, ok: bool) -> int:
    summary["wall_s"] = round(time.time() - started, 1)
    _write(out, summary)
    print(f"[gpu-check] {summary['wall_s']:.0f} s; {out / 'summary.json'}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""One tuning run in its own process: tunelab's session or plain ``tune_tir``, timed, with its best kernels.

``python tune_job.py JOB.json OUT.json``. The job names the tool, the problem, the budget, the seed, the
batch, the measurement options and the checkpoints; the result holds the wall time split into building,
running and the rest, every trial's latency in order, and for each checkpoint the best trial among the
first N: its latency as the tool measured it, its trace, a description and a built library (``.so``) for
the side-by-side re-measurement. Each run has a process of its own, so neither tool inherits the other's
imports, warm caches or worker pools.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the suite is importable from its parent folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suite.describe import describe_schedule, replayed


def _plain_trace(sch: Any) -> Any:
    # as_json still holds IntImm values: plain numbers for json
    return json.loads(json.dumps(sch.trace.as_json(remove_postproc=False), default=lambda o: o.value))


def _problem(job: dict[str, Any]) -> tuple[Any, dict[str, int], Any, Any]:
    import tvm

    from tunelab.core.target.info import llvm_target
    from tunelab.core.workloads.catalog import get_workload

    workload = get_workload(job["workload"])
    shape = workload.parse_shape(job["shape"] or None, complete=True)
    mod = tvm.IRModule({"main": workload.prim_func(shape, "float32")})
    return workload, shape, mod, llvm_target()


def run_tunelab(job: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A tunelab session (auto space, evolutionary tuner: MetaSchedule's own search, driven by tunelab)."""
    from tunelab.core.records import MeasureOptions, SessionSpec
    from tunelab.core.search.space.auto import default_auto_space
    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store

    workload, shape, mod, target = _problem(job)
    store = Store(folder / "tunelab.sqlite")
    space = default_auto_space(target.kind)
    for rule in space["rules"]:  # a variant's switches, as the space editor sets them
        rule["params"].update(job.get("space_params", {}).get(rule["name"], {}))
    spec = SessionSpec(
        workload=workload.name,
        shape=shape,
        target=json.dumps(target.json),
        space_kind="auto",
        space=space,
        tuner="evolutionary",
        tuner_options=job.get("tuner_options", {}),
        trials=job["budget"],
        batch=job["batch"],
        seed=job["seed"],
        measure=MeasureOptions(**job["measure"]),
    )
    started = time.perf_counter()
    started_epoch = time.time()
    session = create_session(store, spec)
    for _ in session.run():
        pass
    wall_s = time.perf_counter() - started
    sid = session.session_id
    trials = store.trials(sid)
    # when each trial's result was in hand, counted from the start like wall_s: the equal-wall-time row
    elapsed_s = [t.finished_at - started_epoch for t in trials]
    # A batch's build time is shared out over its trials (tunelab.core.measure.runner): their sum is
    # the time the batch spent building.
    build_s = sum(t.build_s or 0.0 for t in trials)
    run_s = sum(t.run_s or 0.0 for t in trials)
    space = session.space
    checkpoints = {}
    for n in job["checkpoints"]:
        ok = [t for t in trials[:n] if t.ok and t.latency_ms is not None]
        if not ok:
            continue
        best = min(ok, key=lambda t: t.latency_ms or float("inf"))
        sch = space.schedule(best.config)
        checkpoints[str(n)] = _kernel(sch, mod, target, folder / f"tunelab_{n}.so", best.latency_ms)
        checkpoints[str(n)]["trial_index"] = best.index
    store.close()
    return {
        "wall_s": wall_s,
        "build_s": build_s,
        "run_s": run_s,
        "measuring_source": "the trials' build_s and run_s in the store",
        "n_trials": len(trials),
        "n_ok": sum(1 for t in trials if t.ok),
        "latencies_ms": [t.latency_ms for t in trials],
        "elapsed_s": elapsed_s,
        "checkpoints": checkpoints,
    }


def run_tune_tir(job: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Plain ``tune_tir`` with the same target, budget, batch, seed and timing options.

    Its builder runs MetaSchedule's own build function with tunelab's ``fast_build``: the default one
    imports the tensor intrinsics in every fresh build worker (about 11 s), and on 2 cores most GEMM
    1024^3 builds then hit the 30 s build timeout. The runner is MetaSchedule's LocalRunner with random
    inputs and no correctness check, as tune_tir has it.

    With ``equal_wall_s`` (the tunelab session's wall time for the same seed) the run also reports its
    best kernel among the trials it had measured by then (checkpoint ``"wall"``): what ``tune_tir``
    finds in the time tunelab took, or in its own, whichever is shorter."""
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.measure.runner import fast_build

    workload, shape, mod, target = _problem(job)
    m = job["measure"]
    work_dir = folder / "tune_tir"
    work_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    stamps = _Stamps(started)
    with ms.Profiler() as profiler:
        database = ms.tune_tir(
            mod,
            target.tvm_target(),
            str(work_dir),
            job["budget"],
            num_trials_per_iter=job["batch"],
            builder=ms.builder.LocalBuilder(f_build=fast_build, timeout_sec=m["timeout_s"]),
            runner=ms.runner.LocalRunner(
                timeout_sec=m["timeout_s"],
                evaluator_config=ms.runner.EvaluatorConfig(
                    number=m["number"], repeat=m["repeat"], min_repeat_ms=m["min_repeat_ms"]
                ),
            ),
            seed=job["seed"],
            # MetaSchedule's own callbacks, then the clock: AddToDatabase has committed the batch's
            # records (one line each, in candidate order) by the time the stamp is taken
            measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), stamps.callback()],
        )
    wall_s = time.perf_counter() - started
    profile = {str(k): float(v) for k, v in profiler.get().items()}
    # The runner is synchronous (it measures inside SendToRunner); JoinRunnerFutures only collects.
    build_s = profile.get("SendToBuilder", 0.0)
    run_s = profile.get("SendToRunner", 0.0) + profile.get("JoinRunnerFutures", 0.0)
    records = _records_in_order(work_dir)
    latencies = [_mean_ms(r) for r in records]
    checkpoints = {}
    for n in job["checkpoints"]:
        ok = [(ms_, r) for ms_, r in zip(latencies[:n], records[:n], strict=True) if ms_ is not None]
        if not ok:
            continue
        latency, best = min(ok, key=lambda pair: pair[0])
        sch = replayed(mod, best[0])
        checkpoints[str(n)] = _kernel(sch, mod, target, folder / f"tune_tir_{n}.so", latency, best[0])
        checkpoints[str(n)]["trial_index"] = records.index(best)
    elapsed_s = stamps.elapsed_s[: len(records)]
    equal_wall = None
    if job.get("equal_wall_s") is not None and len(elapsed_s) == len(records):
        within_s = min(float(job["equal_wall_s"]), wall_s)
        done = sum(1 for e in elapsed_s if e <= within_s)
        ok = [(ms_, r) for ms_, r in zip(latencies[:done], records[:done], strict=True) if ms_ is not None]
        equal_wall = {"seconds": within_s, "trials": done}
        if ok:
            latency, best = min(ok, key=lambda pair: pair[0])
            sch = replayed(mod, best[0])
            checkpoints["wall"] = _kernel(sch, mod, target, folder / "tune_tir_wall.so", latency, best[0])
            checkpoints["wall"]["trial_index"] = records.index(best)
    del database
    return {
        "wall_s": wall_s,
        "build_s": build_s,
        "run_s": run_s,
        "measuring_source": "MetaSchedule's Profiler: SendToBuilder, SendToRunner, JoinRunnerFutures",
        "profile_s": profile,
        "n_trials": len(records),
        "n_ok": sum(1 for x in latencies if x is not None),
        "latencies_ms": latencies,
        "elapsed_s": elapsed_s,
        "equal_wall": equal_wall,
        "checkpoints": checkpoints,
    }


class _Stamps:
    """When each of ``tune_tir``'s trials was in hand, in seconds from its start, through a measure callback."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.elapsed_s: list[float] = []

    def callback(self) -> Any:
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        stamps = self

        @derived_object
        class StampBatch(PyMeasureCallback):
            def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):  # type: ignore[no-untyped-def]
                now = time.perf_counter() - stamps.started
                stamps.elapsed_s.extend(now for _ in runner_results)

        return StampBatch()


def _records_in_order(work_dir: Path) -> list[Any]:
    """The tuning records of the JSON database in the order they were committed (one line each)."""
    lines = (work_dir / "database_tuning_record.json").read_text().splitlines()
    return [json.loads(line)[1] for line in lines if line.strip()]


def _mean_ms(record: list[Any]) -> float | None:
    """A record's latency as MetaSchedule ranks it (the mean of its run_secs); None for a failed run."""
    secs = record[1]
    if not secs or any(s >= 1e9 for s in secs):  # MetaSchedule records 1e10 s for a failed run
        return None
    return 1e3 * sum(secs) / len(secs)


def build_library(sch: Any, target: Any, path: Path) -> None:
    """The schedule built for ``target`` (tunelab's ``fast_build``) and exported as a library at ``path``."""
    from tunelab.core.measure.runner import fast_build

    fast_build(sch.mod, target.tvm_target(), None).export_library(str(path))


def _kernel(
    sch: Any, mod: Any, target: Any, path: Path, latency_ms: float, trace: Any = None
) -> dict[str, Any]:
    trace = trace if trace is not None else _plain_trace(sch)
    build_library(sch, target, path)
    facts = describe_schedule(mod, trace)
    return {
        "latency_ms": latency_ms,
        "library": str(path),
        "trace": trace,
        "schedule": facts.to_json(),
        "description": facts.words(),
    }


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text())
    folder = Path(job["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    result = run_tunelab(job, folder) if job["tool"].startswith("tunelab") else run_tune_tir(job, folder)
    Path(argv[2]).write_text(json.dumps({"job": job, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

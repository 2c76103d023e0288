"""Build and run candidates in worker processes with MetaSchedule's LocalBuilder and LocalRunner (or,
with an RPC tracker in the options, its RPCRunner: ``tunelab.core.measure.remote``).

- The builder runs MetaSchedule's build worker function with `fast_build`, which skips the ~11 s
  tensor-intrinsic import of the default build (TVM_NOTES 1.3), on a pool kept across batches.
- The runner's plug-ins (``tunelab.core.measure.evaluate``) allocate the workload's deterministic
  inputs, warm up, check the output against the NumPy reference and time it; every raw sample is
  returned. The inputs and the reference are computed once, here, and handed to the runner's
  workers as `.npy` files: a custom workload's code never runs in a worker.
- A build error, a crash, a wrong result or a timeout becomes a failed result with its message;
  nothing here raises for a bad kernel.
- Build folders are removed as soon as their candidate has run (or the batch has stopped).
- A stop (the session's cancel flag) ends a batch early; what it cut short is dropped, not failed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.measure.evaluate import AllocArguments, Evaluate
from tunelab.core.records import MeasureOptions
from tunelab.core.target.info import TargetInfo, cpu_core_count

BUILD_POOL_BATCHES = 25
# How often a candidate whose RPC server disappeared under it is sent to another server.
RELAUNCHES = 3


@dataclass(frozen=True)
class MeasureResult:
    status: str  # "ok" | "build_error" | "run_error" | "timeout" | "wrong_result"
    error: str | None
    samples_ms: tuple[float, ...]
    build_s: float | None
    run_s: float | None
    started_at: float
    finished_at: float
    device: str | None = None  # the RPC server that measured it; None: this machine


def fast_build(mod: Any, target: Any, _params: Any) -> Any:
    """MetaSchedule's default build without importing tensor intrinsics (none are used here)."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    from tunelab.core.target.build import build_scope

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    with build_scope(mod, target):  # tensor-core kernels need a pass turned off in 0.27
        return tvm.tirx.build(mod, target=target)  # must be a runtime.Module (export_library)


def _classify(message: str) -> str:
    if "Timeout" in message or "timeout" in message.lower().split("\n")[0]:
        return "timeout"
    if "wrong result" in message:
        return "wrong_result"
    return "run_error"


def _run_error_text(message: str, timeout_s: float) -> str:
    """MetaSchedule's runner message in words: how the kernel failed, without the runner's preamble."""
    text = message.strip()
    if text.startswith(("LocalRunner: Timeout", "RPCRunner: Timeout")):
        return f"hang: no result within {timeout_s:g} s (the worker was killed)"
    for runner in ("LocalRunner", "RPCRunner"):
        text = text.removeprefix(f"{runner}: An exception occurred").strip()
    last = text.splitlines()[-1] if text else ""
    if "WrongResult: " in last:  # tunelab's own check: its sentence, not the traceback that carried it
        return last.partition("WrongResult: ")[2]
    if text in ("Subprocess terminated", ""):  # without tunelab.core.faults' patch: the status is unknown
        return "the worker running the kernel died (exit status unknown)"
    return text


def _short(message: str, limit: int = 2000) -> str:
    text = message.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


class Measurer:
    """Builds and runs schedules for one problem (workload, shape, dtype) on one target.

    ``custom_source`` is accepted for callers that pass it; the workload object already holds it, and
    its inputs and reference are computed here, once (the workers only load them)."""

    def __init__(
        self,
        workload: Any,
        shape: dict[str, int],
        dtype: str,
        target: TargetInfo,
        options: MeasureOptions,
        *,
        seed: int = 0,
        custom_source: str | None = None,
    ) -> None:
        from tvm.s_tir import meta_schedule as ms

        from tunelab.core.faults import keep_worker_exit_status, stop_on_sigint_like_sigterm

        keep_worker_exit_status()  # a kernel that kills its worker is named by its signal
        self.target = target
        self.options = options
        self._folder = tempfile.mkdtemp(prefix="tunelab-measure-")
        try:
            self.problem = _write_problem(
                self._folder, workload, shape, dtype, seed, options.check_correctness
            )
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        self._tvm_target = target.tvm_target()
        self._build_pool: Any = None
        self._build_pool_uses = 0
        self.lost_servers: list[str] = []  # RPC servers lost while they ran a candidate (re-sent elsewhere)
        config = ms.runner.EvaluatorConfig(
            number=options.number,
            repeat=options.repeat,
            min_repeat_ms=options.min_repeat_ms,
            enable_cpu_cache_flush=options.cache_flush,
        )
        evaluate_args = (
            self.problem,
            options.warmup,
            options.check_correctness,
            workload.tolerance(dtype, shape),
            options.target_cv,
            max(options.max_repeat, options.repeat),
            options.leader_band,
            options.l2_flush,
            workload.bytes_moved(shape, dtype),
        )
        self.tracker: Any = None
        if options.remote:
            from tunelab.core.measure import remote

            self.tracker = remote.TrackerAddress.parse(options.rpc_tracker)
            self.runner = remote.make_rpc_runner(
                self.tracker,
                options.rpc_key,
                options.rpc_workers,
                options.timeout_s,
                config,
                remote.RemoteAllocArguments(self.problem),
                remote.RemoteEvaluate(*evaluate_args),
            )
        else:
            self.runner = ms.runner.LocalRunner(
                timeout_sec=options.timeout_s,
                evaluator_config=config,
                f_alloc_argument=AllocArguments(self.problem),
                f_run_evaluator=Evaluate(*evaluate_args),
                initializer=stop_on_sigint_like_sigterm,
            )

    def measure(
        self,
        schedules: list[Any],
        stop: Callable[[], bool] | None = None,
        *,
        best_ms: float | None = None,
    ) -> list[MeasureResult]:
        """Build all schedules (in parallel workers), then run each in the runner's worker.

        ``best_ms``: the task's best latency before this batch; with the batch's own results it tells
        the runner which candidates lead, so that precision is spent on them (``leader_band``).

        ``stop`` (a cancel flag) is asked before the batch, after the builds and after each run. Once
        it says True the rest is not measured, and what was in flight when it came is dropped: a stop
        by SIGTERM or Ctrl-C reaches the workers too (the whole process group gets it), so a build or
        run it cut short failed because of the stop, not because of its schedule. The results are
        then those of the first schedules only, fewer than asked for."""
        from tvm.s_tir import meta_schedule as ms

        stopped = stop if stop is not None else (lambda: False)
        if not schedules or stopped():
            return []
        started = time.time()
        built = self._build([s.mod for s in schedules])
        evaluate = self.runner.f_run_evaluator
        best_s = best_ms / 1e3 if best_ms else None
        build_s = (time.time() - started) / len(schedules)  # the pool builds them together
        if self.tracker is not None:
            return self._measure_remote(schedules, built, stopped, best_s, build_s, started)
        results: list[MeasureResult] = []
        try:
            if stopped():
                return []
            for sch, b in zip(schedules, built, strict=True):
                if stopped():
                    break
                t0 = time.time()
                if b.error_msg is not None:
                    results.append(
                        MeasureResult(
                            "build_error", _short(b.error_msg), (), build_s, None, started, time.time()
                        )
                    )
                    continue
                args_info = ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"])
                evaluate.best_s = best_s
                try:
                    future = self.runner.run(
                        [ms.runner.RunnerInput(b.artifact_path, self.target.device_type, args_info)]
                    )[0]
                    res = future.result()
                finally:
                    shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
                t1 = time.time()
                if stopped():
                    break  # it ran while the stop came (its worker may have died of it): not a measurement
                if res.error_msg is not None:
                    error = _short(_run_error_text(res.error_msg, self.options.timeout_s))
                    results.append(
                        MeasureResult(_classify(res.error_msg), error, (), build_s, t1 - t0, started, t1)
                    )
                else:
                    samples = tuple(float(x) * 1e3 for x in res.run_secs)
                    results.append(MeasureResult("ok", None, samples, build_s, t1 - t0, started, t1))
                    median_s = float(np.median(samples)) / 1e3
                    best_s = median_s if best_s is None else min(best_s, median_s)
        finally:
            for b in built:  # those a stop left unrun
                if b.artifact_path is not None:
                    shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
        return results

    def _measure_remote(
        self,
        schedules: list[Any],
        built: list[Any],
        stopped: Callable[[], bool],
        best_s: float | None,
        build_s: float,
        started: float,
    ) -> list[MeasureResult]:
        """The batch on the tracker's servers, ``rpc_workers`` candidates at once (RPCRunner's pool).

        A candidate whose server was lost while it ran (no longer registered with the tracker) is sent
        again, to whichever server the tracker hands out next, up to :data:`RELAUNCHES` times: losing a
        server costs time, not trials. One whose server is still there failed by itself (a crash, a
        wrong result, a hang) and is stored as such, naming the server."""
        from tvm.s_tir import meta_schedule as ms

        from tunelab.core.measure import remote

        evaluate = self.runner.f_run_evaluator
        evaluate.best_s = best_s  # pickled with each submission: the batch's candidates share it
        results: list[MeasureResult | None] = [None] * len(schedules)
        lost: list[str] = []
        try:
            if stopped():
                return []
            pending = []
            for i, b in enumerate(built):
                if b.error_msg is not None:
                    results[i] = MeasureResult(
                        "build_error", _short(b.error_msg), (), build_s, None, started, time.time()
                    )
                else:
                    pending.append(i)
            for attempt in range(RELAUNCHES + 1):
                if not pending or stopped():
                    break
                t0 = time.time()
                # The servers before the attempt: one that vanished from the tracker during it was lost
                # (also when a candidate broke before it could note where it ran).
                serving = {
                    s.address for s in remote.tracker_summary(self.tracker).servers_for(self.options.rpc_key)
                }
                inputs = [
                    ms.runner.RunnerInput(
                        built[i].artifact_path,
                        self.target.device_type,
                        ms.arg_info.ArgInfo.from_prim_func(schedules[i].mod["main"]),
                    )
                    for i in pending
                ]
                futures = self.runner.run(inputs)
                again = []
                for i, future in zip(pending, futures, strict=True):
                    res = future.result()
                    t1 = time.time()
                    server = remote.served_by(built[i].artifact_path)
                    if res.error_msg is None:
                        samples = tuple(float(x) * 1e3 for x in res.run_secs)
                        results[i] = MeasureResult("ok", None, samples, build_s, t1 - t0, started, t1, server)
                        continue
                    gone = remote.servers_lost(self.tracker, serving, server)
                    if attempt < RELAUNCHES and gone:
                        lost.extend(a for a in gone if a not in lost)
                        again.append(i)
                        continue
                    error = _short(_run_error_text(res.error_msg, self.options.timeout_s))
                    if server is not None:
                        error = f"on {server}: {error}"
                    results[i] = MeasureResult(
                        _classify(res.error_msg), error, (), build_s, t1 - t0, started, t1, server
                    )
                pending = again
        finally:
            for b in built:
                if b.artifact_path is not None:
                    shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
        if stopped():  # what was in flight when the stop came is dropped, as locally
            done = []
            for r in results:
                if r is None:
                    break
                done.append(r)
            return done
        self.lost_servers.extend(lost)
        # A candidate still unmeasured after every relaunch: the servers kept disappearing.
        return [
            r
            if r is not None
            else MeasureResult(
                "run_error",
                f"no server under key {self.options.rpc_key!r} kept running it: lost {', '.join(lost)}",
                (),
                build_s,
                None,
                started,
                time.time(),
            )
            for r in results
        ]

    def _build(self, mods: list[Any]) -> list[Any]:
        """LocalBuilder's work on a worker pool kept across batches.

        LocalBuilder starts a fresh pool for every batch (its workers leak memory over many uses),
        which costs each batch a TVM import per worker (~2 s on 2 cores). A pool recycled every
        BUILD_POOL_BATCHES batches keeps the leak bounded and the time on building."""
        from tvm.s_tir.meta_schedule.builder import BuilderResult
        from tvm.s_tir.meta_schedule.builder.local_builder import _worker_func
        from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

        from tunelab.core.faults import stop_on_sigint_like_sigterm

        if self._build_pool is None or self._build_pool_uses >= BUILD_POOL_BATCHES:
            if self._build_pool is not None:
                self._build_pool.shutdown()
            self._build_pool = PopenPoolExecutor(
                max_workers=cpu_core_count(),
                timeout=self.options.timeout_s,
                initializer=stop_on_sigint_like_sigterm,
            )
            self._build_pool_uses = 0
        self._build_pool_uses += 1
        results = []
        jobs = [(fast_build, None, mod, self._tvm_target, None) for mod in mods]
        for item in self._build_pool.map_with_error_catching(lambda x: _worker_func(*x), jobs):
            if item.status == StatusKind.COMPLETE:
                results.append(BuilderResult(item.value, None))
            elif item.status == StatusKind.TIMEOUT:
                results.append(BuilderResult(None, f"build timeout: killed after {self.options.timeout_s} s"))
            else:
                results.append(BuilderResult(None, f"build error: {item.value}"))
        return results

    def close(self) -> None:
        if self._build_pool is not None:
            self._build_pool.shutdown()
            self._build_pool = None
        pool = getattr(self.runner, "pool", None)
        if pool is not None:
            pool.shutdown()
        shutil.rmtree(self._folder, ignore_errors=True)


def _write_problem(
    folder: str, workload: Any, shape: dict[str, int], dtype: str, seed: int, check: bool
) -> tuple[tuple[str, ...], str | None]:
    """The deterministic inputs (and, when checked, the NumPy reference) as .npy files in ``folder``."""
    inputs = workload.make_inputs(shape, dtype, seed)
    paths = []
    for j, x in enumerate(inputs):
        paths.append(os.path.join(folder, f"input{j}.npy"))
        np.save(paths[-1], x)
    expected = None
    if check:
        expected = os.path.join(folder, "expected.npy")
        np.save(expected, workload.reference(inputs, shape, dtype))
    return tuple(paths), expected

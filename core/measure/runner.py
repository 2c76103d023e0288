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
- A full disk under the temporary folder (a build or link that says "No space left on device") is the
  machine's fault, not the config's: the batch ends before that candidate, which is not returned, and
  ``disk_full`` says which folder filled; the session stops on it (OutOfSpace) and a resume
  measures the candidate again.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.faults import cuda_fault
from tunelab.core.measure.build_pool import BuildPool, fast_build, remove_builds  # noqa: F401
from tunelab.core.measure.evaluate import AllocArguments, Evaluate
from tunelab.core.measure.outcome import MeasureResult, _run_error_text, _short
from tunelab.core.measure.temp_space import _disk_full_line, _temp_folder_full, problem_folder
from tunelab.core.records import MeasureOptions
from tunelab.core.target.info import TargetInfo

# The per-call wall limit, as a share of the run's timeout (``timeout_s``, which covers loading, warm-up,
# check and timing): a kernel whose one call takes longer could not be warmed up, checked and timed within
# the timeout anyway, and would end as a hang at four times the cost. It is stopped at its first call and
# stored as too slow.
CALL_LIMIT_SHARE = 0.25
# How often a candidate whose RPC server disappeared under it is sent to another server.
RELAUNCHES = 3


def _restart_worker(runner: Any) -> None:
    """End the runner's worker process; the next candidate starts a fresh one.

    After a fault found while a kernel ran (an illegal address, a misaligned access) the worker's CUDA
    context is broken for good, and every later kernel in it would fail with the same error: the fault
    would be charged to configs that never had it. A launch the driver refused leaves the context
    intact, but a fresh worker costs about a TVM import, far less than a misnamed trial."""
    pool = getattr(runner, "pool", None)
    for worker in list(getattr(pool, "_worker_map", {}).values()):  # PopenPoolExecutor's workers
        worker.kill()


@dataclass(frozen=True)
class _Batch:
    """One batch being measured: its schedules and their builds, the stop flag, the task's best time so far
    (seconds) as the batch began, each candidate's share of the build time, and when the batch began."""

    schedules: list[Any]
    built: list[Any]
    stopped: Callable[[], bool]
    best_s: float | None
    build_s: float
    started: float


@dataclass(frozen=True)
class Problem:
    """What a Measurer measures: a workload at a shape and dtype, built for a target (a custom workload's
    object holds its source)."""

    workload: Any
    shape: dict[str, int]
    dtype: str
    target: TargetInfo


class Measurer:
    """Builds and runs schedules for one problem (workload, shape, dtype) on one target.

    The problem's inputs and reference are computed here, once (the workers only load them).

    ``vendor_ms``: the vendor library's time for the problem where it is known. It stands in for the best
    so far until the task has one, so that a hopeless candidate costs one call from the first one on
    (``Evaluate``). ``call_limit_s``: the per-call wall limit of a local run (default: a
    :data:`CALL_LIMIT_SHARE` of ``timeout_s``; 0 turns it off)."""

    def __init__(
        self,
        problem: Problem,
        options: MeasureOptions,
        *,
        seed: int = 0,
        vendor_ms: float | None = None,
        call_limit_s: float | None = None,
    ) -> None:
        from tunelab.core.faults import keep_worker_exit_status

        keep_worker_exit_status()  # a kernel that kills its worker is named by its signal
        if not options.remote:
            from tunelab.core.measure.threads import use_every_core

            # LocalRunner's workers inherit this process's environment: kernels on every core for a
            # caller of the Python API too, as `tunelab` sets it for itself (a person's setting stays)
            use_every_core()
        self.target = target = problem.target
        self.options = options
        self.vendor_s = vendor_ms / 1e3 if vendor_ms and vendor_ms > 0 else None
        self.call_limit_s = (
            options.timeout_s * CALL_LIMIT_SHARE if call_limit_s is None else max(0.0, call_limit_s)
        )
        self._folder, self._problem_files = problem_folder(
            problem.workload, problem.shape, problem.dtype, seed, options.check_correctness
        )
        self._builder = BuildPool(target.tvm_target(), options.timeout_s)
        self.lost_servers: list[str] = []  # RPC servers lost while they ran a candidate (re-sent elsewhere)
        # set when a batch ended at a candidate whose build or run found the disk full (one line)
        self.disk_full: str | None = None
        self.tracker: Any = None
        self.runner = self._make_runner(problem)

    def _make_runner(self, problem: Problem) -> Any:
        """MetaSchedule's LocalRunner with tunelab's plug-ins or, with an RPC tracker in the options, its
        RPCRunner on the tracker's servers (``tracker`` set then)."""
        from tvm.s_tir import meta_schedule as ms

        from tunelab.core.faults import stop_on_sigint_like_sigterm

        options = self.options
        config = ms.runner.EvaluatorConfig(
            number=options.number,
            repeat=options.repeat,
            min_repeat_ms=options.min_repeat_ms,
            enable_cpu_cache_flush=options.cache_flush,
        )
        evaluate_args = (
            self._problem_files,
            options.warmup,
            options.check_correctness,
            problem.workload.tolerance(problem.dtype, problem.shape),
            options.target_cv,
            max(options.max_repeat, options.repeat),
            options.leader_band,
            options.l2_flush,
            problem.workload.bytes_moved(problem.shape, problem.dtype),
        )
        if options.remote:
            from tunelab.core.measure import remote

            self.tracker = remote.TrackerAddress.parse(options.rpc_tracker)
            return remote.make_rpc_runner(
                self.tracker,
                options.rpc_key,
                options.rpc_workers,
                options.timeout_s,
                config,
                remote.RemoteAllocArguments(self._problem_files),
                remote.RemoteEvaluate(*evaluate_args),
            )
        return ms.runner.LocalRunner(
            timeout_sec=options.timeout_s,
            evaluator_config=config,
            f_alloc_argument=AllocArguments(self._problem_files),
            f_run_evaluator=Evaluate(*evaluate_args, call_limit_s=self.call_limit_s),
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
        the runner which candidates lead, so that precision is spent on them (``leader_band``), and
        which are hopeless, timed once. Before the task has a best, the vendor's time (``vendor_ms``)
        stands in for it.

        ``stop`` (a cancel flag) is asked before the batch, after the builds and after each run. Once
        it says True the rest is not measured, and what was in flight when it came is dropped: a stop
        by SIGTERM or Ctrl-C reaches the workers too (the whole process group gets it), so a build or
        run it cut short failed because of the stop, not because of its schedule. The results are
        then those of the first schedules only, fewer than asked for."""
        stopped = stop if stop is not None else (lambda: False)
        self.disk_full = None
        if not schedules or stopped():
            return []
        started = time.time()
        built = self._build([s.mod for s in schedules])
        build_s = (time.time() - started) / len(schedules)  # the pool builds them together
        schedules, built = self._until_disk_full(schedules, built)
        if not schedules:
            return []
        best_s = best_ms / 1e3 if best_ms else self.vendor_s
        batch = _Batch(schedules, built, stopped, best_s, build_s, started)
        if self.tracker is not None:
            return self._measure_remote(batch)
        try:
            if stopped():
                return []
            return self._measure_local(batch)
        finally:
            remove_builds(built)  # those a stop left unrun

    def _measure_local(self, batch: _Batch) -> list[MeasureResult]:
        """The batch in the LocalRunner's worker, one candidate after another, each ok one's time telling
        the next which candidates lead."""
        build_s, started, best_s = batch.build_s, batch.started, batch.best_s
        results: list[MeasureResult] = []
        for sch, b in zip(batch.schedules, batch.built, strict=True):
            if batch.stopped():
                break
            t0 = time.time()
            if b.error_msg is not None:  # (a full disk's build error ended the batch above)
                results.append(MeasureResult.build_error(b, build_s, started))
                continue
            res = self._run_local(sch, b, best_s)
            t1 = time.time()
            if batch.stopped():
                break  # it ran while the stop came (its worker may have died of it): not a measurement
            if res.error_msg is not None and _temp_folder_full(res.error_msg):
                self.disk_full = _disk_full_line("loading a built kernel", res.error_msg)
                break  # the machine's fault: not stored as the config's, measured again on resume
            if res.error_msg is not None:
                error = _short(_run_error_text(res.error_msg, self.options.timeout_s, self.call_limit_s))
                results.append(MeasureResult.failed(res.error_msg, error, build_s, t0, t1, started))
                if cuda_fault(res.error_msg) is not None:
                    _restart_worker(self.runner)
            else:
                results.append(MeasureResult.measured(res.run_secs, build_s, t0, t1, started))
                median_s = float(np.median(results[-1].samples_ms)) / 1e3
                best_s = median_s if best_s is None else min(best_s, median_s)
        return results

    def _run_local(self, sch: Any, b: Any, best_s: float | None) -> Any:
        """One built candidate run in the LocalRunner's worker (its RunnerResult); its build folder removed."""
        from tvm.s_tir import meta_schedule as ms

        args_info = ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"])
        self.runner.f_run_evaluator.best_s = best_s
        try:
            future = self.runner.run(
                [ms.runner.RunnerInput(b.artifact_path, self.target.device_type, args_info)]
            )[0]
            return future.result()
        finally:
            shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)

    def _until_disk_full(self, schedules: list[Any], built: list[Any]) -> tuple[list[Any], list[Any]]:
        """The batch up to the first candidate whose build found the disk full (``disk_full`` set then);
        the build folders of those dropped are removed."""
        for i, b in enumerate(built):
            if b.error_msg is not None and _temp_folder_full(b.error_msg):
                self.disk_full = _disk_full_line("a build", b.error_msg)
                remove_builds(built[i:])
                return schedules[:i], built[:i]
        return schedules, built

    def _measure_remote(self, batch: _Batch) -> list[MeasureResult]:
        """The batch on the tracker's servers, ``rpc_workers`` candidates at once (RPCRunner's pool).

        A candidate whose server was lost while it ran (no longer registered with the tracker) is sent
        again, to whichever server the tracker hands out next, up to :data:`RELAUNCHES` times: losing a
        server costs time, not trials. One whose server is still there failed by itself (a crash, a
        wrong result, a hang) and is stored as such, naming the server."""
        self.runner.f_run_evaluator.best_s = batch.best_s  # pickled with each submission: the batch shares it
        results: list[MeasureResult | None] = [None] * len(batch.schedules)
        lost: list[str] = []
        try:
            if batch.stopped():
                return []
            pending = []
            for i, b in enumerate(batch.built):
                if b.error_msg is not None:
                    results[i] = MeasureResult.build_error(b, batch.build_s, batch.started)
                else:
                    pending.append(i)
            for attempt in range(RELAUNCHES + 1):
                if not pending or batch.stopped():
                    break
                pending = self._remote_attempt(batch, pending, results, lost, attempt < RELAUNCHES)
        finally:
            remove_builds(batch.built)
        if batch.stopped():  # what was in flight when the stop came is dropped, as locally
            done = []
            for r in results:
                if r is None:
                    break
                done.append(r)
            return done
        self.lost_servers.extend(lost)
        # A candidate still unmeasured after every relaunch: the servers kept disappearing.
        return [r if r is not None else self._never_kept(lost, batch.build_s, batch.started) for r in results]

    def _remote_attempt(
        self,
        batch: _Batch,
        pending: list[int],
        results: list[MeasureResult | None],
        lost: list[str],
        may_relaunch: bool,
    ) -> list[int]:
        """The ``pending`` candidates sent to the servers once, their ``results`` filled in; those whose server
        was lost while they ran (added to ``lost``) are returned to be sent again where ``may_relaunch``."""
        from tvm.s_tir import meta_schedule as ms

        from tunelab.core.measure import remote

        schedules, built, build_s, started = batch.schedules, batch.built, batch.build_s, batch.started
        t0 = time.time()
        # The servers before the attempt: one that vanished from the tracker during it was lost
        # (also when a candidate broke before it could note where it ran).
        serving = {s.address for s in remote.tracker_summary(self.tracker).servers_for(self.options.rpc_key)}
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
                results[i] = MeasureResult.measured(res.run_secs, build_s, t0, t1, started, server)
                continue
            gone = remote.servers_lost(self.tracker, serving, server)
            if may_relaunch and gone:
                lost.extend(a for a in gone if a not in lost)
                again.append(i)
                continue
            error = _short(_run_error_text(res.error_msg, self.options.timeout_s))
            if server is not None:
                error = f"on {server}: {error}"
            results[i] = MeasureResult.failed(res.error_msg, error, build_s, t0, t1, started, server)
        return again

    def _never_kept(self, lost: list[str], build_s: float, started: float) -> MeasureResult:
        """A candidate no server kept running through every relaunch."""
        return MeasureResult(
            "run_error",
            f"no server under key {self.options.rpc_key!r} kept running it: lost {', '.join(lost)}",
            (),
            build_s,
            None,
            started,
            time.time(),
        )

    def _build(self, mods: list[Any]) -> list[Any]:
        """The batch's builds on the pool kept across batches (:class:`BuildPool`)."""
        return self._builder.build(mods)

    def close(self) -> None:
        self._builder.shutdown()
        pool = getattr(self.runner, "pool", None)
        if pool is not None:
            pool.shutdown()
        shutil.rmtree(self._folder, ignore_errors=True)


def stored_vendor_ms(
    store: Any, workload: str, shape: dict[str, int], dtype: str, target_kind: str
) -> float | None:
    """The vendor library's time for a problem on this machine, where the store holds a correct one
    (tunelab.core.trust.baselines measures them); None otherwise. What a Measurer's ``vendor_ms`` takes."""
    entry = store.baseline(workload, shape, dtype, target_kind)
    return float(entry.median_ms) if entry is not None and entry.correct and entry.median_ms > 0 else None

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

import errno
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.errors import StoreFailure
from tunelab.core.faults import TOO_SLOW, OutOfSpace, cuda_fault, out_of_space
from tunelab.core.measure.evaluate import AllocArguments, Evaluate
from tunelab.core.records import MeasureOptions
from tunelab.core.target.info import TargetInfo, cpu_core_count

BUILD_POOL_BATCHES = 25
# The per-call wall limit, as a share of the run's timeout (``timeout_s``, which covers loading, warm-up,
# check and timing): a kernel whose one call takes longer could not be warmed up, checked and timed within
# the timeout anyway, and would end as a hang at four times the cost. It is stopped at its first call and
# stored as too slow.
CALL_LIMIT_SHARE = 0.25
# How often a candidate whose RPC server disappeared under it is sent to another server.
RELAUNCHES = 3
# A build or run that fails while the temporary folder has less than this left failed for want of space
# (a build's objects and library are tens of KB to a few MB), not because of its config.
TEMP_FREE_FLOOR = 1 << 20


@dataclass(frozen=True)
class MeasureResult:
    # "ok" | "build_error" | "run_error" | "timeout" (a hang, or "too slow: ..." when the per-call wall
    # limit stopped it) | "wrong_result"
    status: str
    error: str | None  # one line
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
    if "SIGALRM" in message:  # stopped at the per-call wall limit (Evaluate's watchdog)
        return "timeout"
    if "wrong result" in message:
        return "wrong_result"
    return "run_error"


def _exception_text(text: str) -> str:
    """The exception a worker's traceback ends with, without the frames: 'MemoryError',
    'tvm.error.InternalError: CUDALaunch Error: ...' (its own lines kept); the text itself when it is
    not a traceback."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return text
    # Frames are indented; the exception starts at the first line that is not (its own further lines
    # may be indented, as TVM's " grid=(...)" is).
    after = lines[starts[-1] + 1 :]
    first = next((i for i, line in enumerate(after) if line and not line[0].isspace()), None)
    return "\n".join(after[first:]).strip() if first is not None else text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _run_error_text(message: str, timeout_s: float, call_limit_s: float | None = None) -> str:
    """MetaSchedule's runner message in one line of words: how the kernel failed, without the runner's
    preamble or the worker's traceback. A CUDA fault is named with its launch shape and likely cause
    (tunelab.core.faults.cuda_fault), as a CPU crash is by its signal."""
    text = message.strip()
    if text.startswith(("LocalRunner: Timeout", "RPCRunner: Timeout")):
        return f"hang: no result within {timeout_s:g} s (the worker was killed)"
    for runner in ("LocalRunner", "RPCRunner"):
        text = text.removeprefix(f"{runner}: An exception occurred").strip()
    if "SIGALRM" in text:  # Evaluate's watchdog stopped the call
        limit = f" of {call_limit_s:g} s" if call_limit_s else ""
        return f"{TOO_SLOW}: one call ran past the per-call wall limit{limit} and was stopped"
    text = _exception_text(text)
    if "WrongResult: " in text:  # tunelab's own check: its sentence, not the exception's name
        return _one_line(text.partition("WrongResult: ")[2])
    if text in ("Subprocess terminated", ""):  # without tunelab.core.faults' patch: the status is unknown
        return "the worker running the kernel died (exit status unknown)"
    fault = cuda_fault(text)
    if fault is not None:
        return fault.line()
    return _one_line(text)


def _restart_worker(runner: Any) -> None:
    """End the runner's worker process; the next candidate starts a fresh one.

    After a fault found while a kernel ran (an illegal address, a misaligned access) the worker's CUDA
    context is broken for good, and every later kernel in it would fail with the same error: the fault
    would be charged to configs that never had it. A launch the driver refused leaves the context
    intact, but a fresh worker costs about a TVM import, far less than a misnamed trial."""
    pool = getattr(runner, "pool", None)
    for worker in list(getattr(pool, "_worker_map", {}).values()):  # PopenPoolExecutor's workers
        worker.kill()


def _short(message: str, limit: int = 2000) -> str:
    text = message.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


class Measurer:
    """Builds and runs schedules for one problem (workload, shape, dtype) on one target.

    ``custom_source`` is accepted for callers that pass it; the workload object already holds it, and
    its inputs and reference are computed here, once (the workers only load them).

    ``vendor_ms``: the vendor library's time for the problem where it is known. It stands in for the best
    so far until the task has one, so that a hopeless candidate costs one call from the first one on
    (``Evaluate``). ``call_limit_s``: the per-call wall limit of a local run (default: a
    :data:`CALL_LIMIT_SHARE` of ``timeout_s``; 0 turns it off)."""

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
        vendor_ms: float | None = None,
        call_limit_s: float | None = None,
    ) -> None:
        from tvm.s_tir import meta_schedule as ms

        from tunelab.core.faults import keep_worker_exit_status, stop_on_sigint_like_sigterm

        keep_worker_exit_status()  # a kernel that kills its worker is named by its signal
        self.target = target
        self.options = options
        self.vendor_s = vendor_ms / 1e3 if vendor_ms and vendor_ms > 0 else None
        self.call_limit_s = (
            options.timeout_s * CALL_LIMIT_SHARE if call_limit_s is None else max(0.0, call_limit_s)
        )
        try:
            self._folder = tempfile.mkdtemp(prefix="tunelab-measure-")
        except OSError as exc:
            raise StoreFailure(
                f"cannot make a folder in the temporary folder {tempfile.gettempdir()}: {exc.strerror or exc}"
            ) from None
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
        # set when a batch ended at a candidate whose build or run found the disk full (one line)
        self.disk_full: str | None = None
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
        from tvm.s_tir import meta_schedule as ms

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
        evaluate = self.runner.f_run_evaluator
        best_s = best_ms / 1e3 if best_ms else self.vendor_s
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
                if b.error_msg is not None:  # (a full disk's build error ended the batch above)
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
                if res.error_msg is not None and _temp_folder_full(res.error_msg):
                    self.disk_full = _disk_full_line("loading a built kernel", res.error_msg)
                    break  # the machine's fault: not stored as the config's, measured again on resume
                if res.error_msg is not None:
                    error = _short(_run_error_text(res.error_msg, self.options.timeout_s, self.call_limit_s))
                    results.append(
                        MeasureResult(_classify(res.error_msg), error, (), build_s, t1 - t0, started, t1)
                    )
                    if cuda_fault(res.error_msg) is not None:
                        _restart_worker(self.runner)
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

    def _until_disk_full(self, schedules: list[Any], built: list[Any]) -> tuple[list[Any], list[Any]]:
        """The batch up to the first candidate whose build found the disk full (``disk_full`` set then);
        the build folders of those dropped are removed."""
        for i, b in enumerate(built):
            if b.error_msg is not None and _temp_folder_full(b.error_msg):
                self.disk_full = _disk_full_line("a build", b.error_msg)
                for dropped in built[i:]:
                    if dropped.artifact_path is not None:
                        shutil.rmtree(os.path.dirname(dropped.artifact_path), ignore_errors=True)
                return schedules[:i], built[:i]
        return schedules, built

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


def stored_vendor_ms(
    store: Any, workload: str, shape: dict[str, int], dtype: str, target_kind: str
) -> float | None:
    """The vendor library's time for a problem on this machine, where the store holds a correct one
    (tunelab.core.trust.baselines measures them); None otherwise. What a Measurer's ``vendor_ms`` takes."""
    entry = store.baseline(workload, shape, dtype, target_kind)
    return float(entry.median_ms) if entry is not None and entry.correct and entry.median_ms > 0 else None


def _temp_free_bytes() -> int | None:
    try:
        return shutil.disk_usage(tempfile.gettempdir()).free
    except OSError:
        return None


def _temp_folder_full(message: str) -> bool:
    """Whether a build's or run's failure is the temporary folder's: its words say so, or it has less than
    :data:`TEMP_FREE_FLOOR` left. A worker that LLVM ends on a full disk ("LLVM ERROR: IO failure on
    output stream") says only that it exited with status 1, on its own stderr."""
    if out_of_space(message):
        return True
    free = _temp_free_bytes()
    return free is not None and free < TEMP_FREE_FLOOR


def _disk_full_line(what: str, message: str) -> str:
    """One line naming the full folder and the words that said so ('ld: final link failed: No space ...')."""
    said = next((line.strip() for line in message.splitlines() if out_of_space(line)), _one_line(message))
    free = _temp_free_bytes()
    left = "" if free is None else f", {free:,} bytes free"
    return (
        f"the temporary folder {tempfile.gettempdir()} is full{left}: {what} failed "
        f"({said[:200]}); free space there or point TMPDIR at a larger folder."
    )


def _write_problem(
    folder: str, workload: Any, shape: dict[str, int], dtype: str, seed: int, check: bool
) -> tuple[tuple[str, ...], str | None]:
    """The deterministic inputs (and, when checked, the NumPy reference) as .npy files in ``folder``; a
    folder that cannot hold them (a full disk: NumPy's "4096 requested and 992 written") is a StoreFailure
    naming it."""
    inputs = workload.make_inputs(shape, dtype, seed)
    paths = []
    try:
        for j, x in enumerate(inputs):
            paths.append(os.path.join(folder, f"input{j}.npy"))
            np.save(paths[-1], x)
        expected = None
        if check:
            expected = os.path.join(folder, "expected.npy")
            np.save(expected, workload.reference(inputs, shape, dtype))
    except OSError as exc:
        if out_of_space(str(exc)) or exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OutOfSpace(_disk_full_line("writing the problem's inputs", str(exc))) from None
        raise StoreFailure(
            f"cannot write the problem's inputs into the temporary folder {folder}: {exc.strerror or exc}"
        ) from None
    return tuple(paths), expected

"""Build and run candidates in worker processes with MetaSchedule's LocalBuilder and LocalRunner.

- The builder runs MetaSchedule's build worker function with `fast_build`, which skips the ~11 s
  tensor-intrinsic import of the default build (TVM_NOTES 1.3), on a pool kept across batches.
- The runner allocates the workload's deterministic inputs (not random fill), runs `warmup`
  untimed calls, checks the output against the NumPy reference, then times with
  `time_evaluator` (`tunelab.core.measure.timing.kernel_timer`). Every raw sample is returned. The
  inputs and the reference are computed once, in this process, and handed to the runner's workers as
  `.npy` files: a custom workload's code never runs in a worker.
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

from tunelab.core.records import MeasureOptions
from tunelab.core.stats import coefficient_of_variation
from tunelab.core.target.info import TargetInfo, cpu_core_count

BUILD_POOL_BATCHES = 25
# A candidate whose warm-up call and both samples of a probe took this many times the best so far is
# clearly slow: it cannot be the leader, so the probe is its figure. Noise only adds time, so the
# fastest of the probe's samples is the fair one to judge by (one sample alone was seen 6x off here).
CLEARLY_SLOW = 2.0
PROBE_SAMPLES = 2


@dataclass(frozen=True)
class MeasureResult:
    status: str  # "ok" | "build_error" | "run_error" | "timeout" | "wrong_result"
    error: str | None
    samples_ms: tuple[float, ...]
    build_s: float | None
    run_s: float | None
    started_at: float
    finished_at: float


def fast_build(mod: Any, target: Any, _params: Any) -> Any:
    """MetaSchedule's default build without importing tensor intrinsics (none are used here)."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm.tirx.build(mod, target=target)  # must be a runtime.Module (export_library)


_REFERENCE_CACHE: dict[tuple, tuple[list[np.ndarray], np.ndarray | None]] = {}


def _inputs_and_reference(problem: tuple) -> tuple[list[np.ndarray], np.ndarray | None]:
    """The inputs and the expected output (None when unchecked), loaded once per worker process.

    ``problem`` is (input .npy paths, expected .npy path or None), written by the Measurer."""
    if problem not in _REFERENCE_CACHE:
        input_paths, expected_path = problem
        inputs = [np.load(path) for path in input_paths]
        _REFERENCE_CACHE.clear()  # one problem per session: keep memory flat
        _REFERENCE_CACHE[problem] = (inputs, None if expected_path is None else np.load(expected_path))
    return _REFERENCE_CACHE[problem]


class AllocArguments:
    """LocalRunner's f_alloc_argument: the workload's inputs plus zeroed outputs, on the device."""

    def __init__(self, problem: tuple) -> None:
        self.problem = problem

    def __call__(self, device: Any, args_info: Any, alloc_repeat: int) -> list[list[Any]]:
        from tunelab.core.measure.placement import placed_tensors

        inputs, expected = _inputs_and_reference(self.problem)
        outputs = [np.zeros(shape, dtype=dtype) for _, dtype, shape in args_info[len(inputs) :]]
        # Buffers placed on purpose, not wherever this worker's heap history puts them: the figure
        # must not depend on the process that measured it (tunelab.core.measure.placement).
        return [placed_tensors([*inputs, *outputs], device) for _ in range(alloc_repeat)]


class WrongResult(RuntimeError):
    pass


class Evaluate:
    """LocalRunner's f_run_evaluator: warm up, check the output, then time every repeat."""

    def __init__(
        self,
        problem: tuple,
        warmup: int,
        check: bool,
        tolerance: tuple[float, float],
        target_cv: float = 0.0,
        max_repeat: int = 0,
        leader_band: float = 0.0,
    ) -> None:
        self.problem = problem
        self.warmup = warmup
        self.check = check
        self.tolerance = tolerance
        self.target_cv = target_cv
        self.max_repeat = max_repeat
        self.leader_band = leader_band
        # The task's fastest per-call time so far (seconds), set by the Measurer before each run: the
        # runner pickles this object for every candidate it sends to its worker, so it travels along.
        self.best_s: float | None = None

    def __call__(
        self, rt_mod: Any, device: Any, evaluator_config: Any, repeated_args: list[list[Any]]
    ) -> list[float]:
        from tunelab.core.faults import plant
        from tunelab.core.measure.timing import kernel_timer

        fault = plant("run")  # a test hook: nothing happens unless TUNELAB_PLANT_FAULT names "run"
        args = repeated_args[0]
        func = rt_mod[rt_mod.entry_name]
        n_warm = max(self.warmup, 1 if self.check else 0)
        warm_started = time.perf_counter()
        for _ in range(n_warm):
            func(*args)
        device.sync()
        warm_s = (time.perf_counter() - warm_started) / n_warm if n_warm else None
        if fault == "wrong":  # the kernel "computed" garbage
            args[-1].copyfrom(np.full(tuple(args[-1].shape), 7.0, dtype=str(args[-1].dtype)))
        expected = _inputs_and_reference(self.problem)[1] if self.check else None  # None: unchecked
        if expected is not None:
            got = args[-1].numpy()
            rtol, atol = self.tolerance
            if got.shape != expected.shape or not np.allclose(
                got, expected, rtol=rtol, atol=atol, equal_nan=False
            ):
                err = (
                    float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
                    if got.shape == expected.shape
                    else float("nan")
                )
                raise WrongResult(
                    f"wrong result: max abs error {err:.3g} exceeds atol {atol:g} + rtol {rtol:g}"
                )
        focus = self.leader_band > 0 and self.best_s is not None and self.best_s > 0
        if focus and warm_s is not None and warm_s > CLEARLY_SLOW * (self.best_s or 0.0):
            # The warm-up call includes first-run costs, so it only raises the suspicion; a short probe
            # of the timer (number grown to min_repeat_ms, as for any sample) decides.
            probe = kernel_timer(
                rt_mod,
                device,
                number=1,
                repeat=PROBE_SAMPLES,
                min_repeat_ms=evaluator_config.min_repeat_ms,
                cache_flush=evaluator_config.enable_cpu_cache_flush,
            )(*args)
            if min(probe) > CLEARLY_SLOW * (self.best_s or 0.0):
                return probe
        timer = kernel_timer(
            rt_mod,
            device,
            number=evaluator_config.number,
            repeat=evaluator_config.repeat,
            min_repeat_ms=evaluator_config.min_repeat_ms,
            cache_flush=evaluator_config.enable_cpu_cache_flush,
        )

        def one_round() -> list[float]:
            """``repeat`` samples (seconds) on each allocated argument set."""
            return [sample for args in repeated_args for sample in timer(*args)]

        samples = one_round()
        if focus and min(samples) > self.leader_band * (self.best_s or 0.0):
            # Even its least disturbed sample is outside the leaders' band: more samples cannot make
            # it the fastest.
            return samples
        # Stop as soon as the spread is small; otherwise sample on, up to the cap.
        while len(samples) < self.max_repeat and _spread(samples) > self.target_cv:
            samples.extend(one_round())
        return samples[: max(self.max_repeat, len(repeated_args) * evaluator_config.repeat)]


def _spread(samples: list[float]) -> float:
    """The samples' coefficient of variation; infinite where it is undefined (fewer than two samples, a
    mean not above 0), so sampling goes on."""
    cv = coefficient_of_variation(samples)
    return float("inf") if cv is None else cv


def _classify(message: str) -> str:
    if "Timeout" in message or "timeout" in message.lower().split("\n")[0]:
        return "timeout"
    if "wrong result" in message:
        return "wrong_result"
    return "run_error"


def _run_error_text(message: str, timeout_s: float) -> str:
    """MetaSchedule's runner message in words: how the kernel failed, without the runner's preamble."""
    text = message.strip()
    if text.startswith("LocalRunner: Timeout"):
        return f"hang: no result within {timeout_s:g} s (the worker was killed)"
    text = text.removeprefix("LocalRunner: An exception occurred").strip()
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

        from tunelab.core.faults import keep_worker_exit_status

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
        config = ms.runner.EvaluatorConfig(
            number=options.number,
            repeat=options.repeat,
            min_repeat_ms=options.min_repeat_ms,
            enable_cpu_cache_flush=options.cache_flush,
        )
        self.runner = ms.runner.LocalRunner(
            timeout_sec=options.timeout_s,
            evaluator_config=config,
            f_alloc_argument=AllocArguments(self.problem),
            f_run_evaluator=Evaluate(
                self.problem,
                options.warmup,
                options.check_correctness,
                workload.tolerance(dtype, shape),
                options.target_cv,
                max(options.max_repeat, options.repeat),
                options.leader_band,
            ),
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

    def _build(self, mods: list[Any]) -> list[Any]:
        """LocalBuilder's work on a worker pool kept across batches.

        LocalBuilder starts a fresh pool for every batch (its workers leak memory over many uses),
        which costs each batch a TVM import per worker (~2 s on 2 cores). A pool recycled every
        BUILD_POOL_BATCHES batches keeps the leak bounded and the time on building."""
        from tvm.s_tir.meta_schedule.builder import BuilderResult
        from tvm.s_tir.meta_schedule.builder.local_builder import _worker_func
        from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

        if self._build_pool is None or self._build_pool_uses >= BUILD_POOL_BATCHES:
            if self._build_pool is not None:
                self._build_pool.shutdown()
            self._build_pool = PopenPoolExecutor(max_workers=cpu_core_count(), timeout=self.options.timeout_s)
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
        np.save(expected, workload.reference(inputs, shape))
    return tuple(paths), expected

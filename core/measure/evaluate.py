"""The runner's plug-ins that time one candidate in a worker process, for MetaSchedule's LocalRunner
(and, wrapped by ``tunelab.core.measure.remote``, its RPCRunner).

- :class:`AllocArguments` gives the kernel the workload's deterministic inputs (not random fill) and
  zeroed outputs, its buffers placed on purpose (``tunelab.core.measure.placement``).
- :class:`Evaluate` runs ``warmup`` untimed calls, checks the output against the NumPy reference,
  then times with ``time_evaluator`` (``tunelab.core.measure.timing.kernel_timer``; on a GPU its CUDA
  events, after an L2 flush where ``l2_flush`` asks for one), sampling on until the spread is small,
  with precision spent on the leaders only: a hopeless candidate is timed once. A warm-up call that runs
  past the per-call wall limit is stopped there (the worker ends itself by SIGALRM).

The inputs and the reference are computed once, by the Measurer, and handed to the workers as
``.npy`` files (:func:`_inputs_and_reference` loads them once per worker): a custom workload's code
never runs in a worker.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tunelab.core.stats import coefficient_of_variation

# A candidate whose warm-up call and then one timed sample both took this many times the best so far is
# hopeless: it cannot be the leader, so that one sample is its figure and it is never repeated. Noise
# only adds time, and one sample alone was seen 6x off on a busy 2-core machine: two observations that
# both say "slow" decide it, not one.
CLEARLY_SLOW = 2.0
PROBE_SAMPLES = 1
# A warm-up call at least this long is itself the hopeless candidate's one sample, and decides alone: the
# first call's own costs (loading the module onto the GPU, starting the CPU thread pool) are milliseconds,
# lost in it, and a second call of a kernel this slow would cost as much again (0.75-2.2 s a call on an
# H200 in round 0, where GPU timings spread by about 1 %). The price: on a CPU busy enough to double one
# call, a candidate that would have led can be judged hopeless by that call.
ONE_CALL_S = 0.1


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
        l2_flush: str = "off",
        data_bytes: float = 0.0,
        *,
        call_limit_s: float = 0.0,
    ) -> None:
        self.problem = problem
        self.l2_flush = l2_flush  # GPU only (tunelab.core.measure.l2_flush)
        self.data_bytes = float(data_bytes)
        self.warmup = warmup
        self.check = check
        self.tolerance = tolerance
        self.target_cv = target_cv
        self.max_repeat = max_repeat
        self.leader_band = leader_band
        # A warm-up call longer than this (seconds) is stopped: the worker ends by SIGALRM, which the
        # runner names "too slow". 0: no limit (the runner's timeout still applies).
        self.call_limit_s = call_limit_s
        # The task's fastest per-call time so far (seconds), set by the Measurer before each run: the
        # runner pickles this object for every candidate it sends to its worker, so it travels along.
        self.best_s: float | None = None

    def __call__(
        self, rt_mod: Any, device: Any, evaluator_config: Any, repeated_args: list[list[Any]]
    ) -> list[float]:
        from tunelab.core.faults import plant

        fault = plant("run")  # a test hook: nothing happens unless TUNELAB_PLANT_FAULT names "run"
        args = repeated_args[0]
        func = rt_mod[rt_mod.entry_name]
        n_warm = max(self.warmup, 1 if self.check else 0)
        # The fastest warm-up call: noise and first-run costs only add to it.
        warm_s = min(
            (_watched_call(func, args, device, self.call_limit_s) for _ in range(n_warm)), default=None
        )
        if fault == "wrong":  # the kernel "computed" garbage
            args[-1].copyfrom(np.full(tuple(args[-1].shape), 7.0, dtype=str(args[-1].dtype)))
        self._check_output(args[-1])
        focus = self.leader_band > 0 and self.best_s is not None and self.best_s > 0
        if focus and warm_s is not None and warm_s > CLEARLY_SLOW * (self.best_s or 0.0):
            one = self._hopeless_figure(rt_mod, device, evaluator_config, args, warm_s)
            if one is not None:
                return one
        timer = self._timer(rt_mod, device, evaluator_config)

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

    def _check_output(self, output: Any) -> None:
        """The kernel's output against the NumPy reference (when checked): a WrongResult when it is off."""
        expected = _inputs_and_reference(self.problem)[1] if self.check else None  # None: unchecked
        if expected is None:
            return
        got = output.numpy()
        rtol, atol = self.tolerance
        if got.shape != expected.shape or not np.allclose(
            got, expected, rtol=rtol, atol=atol, equal_nan=False
        ):
            err = (
                float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
                if got.shape == expected.shape
                else float("nan")
            )
            raise WrongResult(f"wrong result: max abs error {err:.3g} exceeds atol {atol:g} + rtol {rtol:g}")

    def _hopeless_figure(
        self, rt_mod: Any, device: Any, evaluator_config: Any, args: list[Any], warm_s: float
    ) -> list[float] | None:
        """The one figure of a candidate whose warm-up call was clearly slower than the best, timed once;
        None when that one timed sample says it is not hopeless after all.

        A warm-up call this long is its own figure; a shorter one (its first-run costs may be most of it)
        is decided by one timed sample, ``number`` grown to min_repeat_ms as for any sample."""
        if warm_s >= ONE_CALL_S:
            return [warm_s]
        one = _config_timer(rt_mod, device, evaluator_config, number=1, repeat=PROBE_SAMPLES)(*args)
        return one if min(one) > CLEARLY_SLOW * (self.best_s or 0.0) else None

    def _timer(self, rt_mod: Any, device: Any, evaluator_config: Any) -> Any:
        """The timer of the candidate's samples: after an L2 flush each where ``l2_flush`` asks for one."""
        from tunelab.core.measure.l2_flush import install_flush, wants_flush
        from tunelab.core.measure.timing import kernel_timer

        if wants_flush(self.l2_flush, device, self.data_bytes):
            # One launch per sample, each after the flush (which the CUDA-event timer does not count):
            # the data arrives from memory as it does inside a model, not from the previous run's L2.
            return kernel_timer(
                rt_mod,
                device,
                number=1,
                repeat=evaluator_config.repeat * max(evaluator_config.number, 1),
                min_repeat_ms=0,
                preproc=install_flush(device),
            )
        return _config_timer(
            rt_mod, device, evaluator_config, number=evaluator_config.number, repeat=evaluator_config.repeat
        )


def _config_timer(rt_mod: Any, device: Any, evaluator_config: Any, *, number: int, repeat: int) -> Any:
    """A kernel timer of ``repeat`` samples of ``number`` calls, ``number`` grown to the config's
    min_repeat_ms, with the CPU cache flush the config asks for."""
    from tunelab.core.measure.timing import kernel_timer

    return kernel_timer(
        rt_mod,
        device,
        number=number,
        repeat=repeat,
        min_repeat_ms=evaluator_config.min_repeat_ms,
        cache_flush=evaluator_config.enable_cpu_cache_flush,
    )


def _watched_call(func: Any, args: list[Any], device: Any, limit_s: float) -> float:
    """One call of the kernel, waited for on the device; its wall time in seconds.

    With ``limit_s`` > 0 a call still running after that long ends this process by SIGALRM's default
    action: a kernel cannot be interrupted from Python (a CUDA synchronisation or a CPU kernel holds the
    thread), and the signal needs no Python code to run. The runner reads the signal from the exit status
    and stores the candidate as too slow."""
    import signal
    import threading

    watched = limit_s > 0 and threading.current_thread() is threading.main_thread()
    if watched:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, limit_s)
    started = time.perf_counter()
    try:
        func(*args)
        device.sync()
    finally:
        if watched:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return time.perf_counter() - started


def _spread(samples: list[float]) -> float:
    """The samples' coefficient of variation; infinite where it is undefined (fewer than two samples, a
    mean not above 0), so sampling goes on."""
    cv = coefficient_of_variation(samples)
    return float("inf") if cv is None else cv

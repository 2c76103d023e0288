"""Timing loops: one for a Python callable, one for a built TVM kernel, both sampling as ``time_evaluator``.

A sample is the mean time of ``number`` back-to-back calls; ``number`` grows until one sample lasts at
least ``min_repeat_ms``, and ``repeat`` samples are taken. :func:`time_callable` does this in Python
for the vendor baselines and the roofline probes (samples in ms); :func:`kernel_timer` hands it to
TVM's own ``time_evaluator`` for a kernel the runner built (samples in seconds, as MetaSchedule's
runner results are).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

GOLDEN = 1.618  # the least factor ``number`` grows by between two tries of a sample, as in time_evaluator
# The pause before a timing that follows another library's parallel work. OpenBLAS's and OpenMP's worker
# threads busy-wait for a while after each call, so code timed right after them shares the cores with
# spinning threads. Measured on 2 cores: oneDNN's ResNet 3x3 convolution timed right after the NumPy
# reference took 1.60-1.77 ms, and 0.71-0.72 ms after a 0.5 s pause. TVM's own pool spins far less
# (tunelab.core.measure.threads).
SPIN_SETTLE_S = 0.5


def time_callable(
    fn: Callable[[], Any],
    *,
    number: int = 3,
    repeat: int = 3,
    min_repeat_ms: float = 20.0,
    warmup: int = 1,
    sync: Callable[[], Any] | None = None,
    deadline: float | None = None,
) -> list[float]:
    """Samples in ms, as TVM's ``time_evaluator`` takes them: ``warmup`` untimed calls, then ``repeat``
    samples, each the mean of ``number`` calls, with ``number`` grown (x1.618 at least) until one sample
    lasts ``min_repeat_ms``.

    ``sync`` (waiting for a device) runs after the warm-up and inside every timed sample, after its
    calls. With ``deadline`` (a ``time.perf_counter()`` value) sampling stops at the first sample that
    ends past it: at least one sample is always taken, so fewer than ``repeat`` may come back.
    """
    for _ in range(warmup):
        fn()
    if sync is not None:
        sync()
    samples = []
    number = max(1, int(number))
    for _ in range(max(1, int(repeat))):
        elapsed_ms = 0.0
        while True:
            if elapsed_ms > 0:
                number = max(int(min_repeat_ms / (elapsed_ms / number)) + 1, int(number * GOLDEN))
            t = time.perf_counter()
            for _ in range(number):
                fn()
            if sync is not None:
                sync()
            elapsed_ms = (time.perf_counter() - t) * 1e3
            if elapsed_ms >= min_repeat_ms:
                break
        samples.append(elapsed_ms / number)
        if deadline is not None and time.perf_counter() >= deadline:
            break
    return samples


def kernel_timer(
    module: Any,
    device: Any,
    *,
    number: int,
    repeat: int,
    min_repeat_ms: int,
    cache_flush: bool = False,
    entry: str | None = None,
    preproc: str = "",
) -> Callable[..., list[float]]:
    """A timer for one built kernel (a ``tvm.runtime.Module``, its function ``entry``, by default its
    entry function) on ``device``: called with the kernel's arguments, it waits for the device, then
    returns ``repeat`` samples in seconds, each the mean of ``number`` calls, ``number`` grown by TVM's
    ``time_evaluator`` until one sample lasts ``min_repeat_ms``.

    ``cache_flush`` flushes the CPU caches of every argument but the first before each sample (TVM's
    ``cache_flush_cpu_non_first_arg``), so a sample does not start with its inputs in cache;
    ``preproc`` names another registered function to run before each sample instead (a GPU's L2 flush,
    tunelab.core.measure.l2_flush).
    """
    evaluator = module.time_evaluator(
        func_name=entry or module.entry_name,
        dev=device,
        number=int(number),
        repeat=int(repeat),
        min_repeat_ms=int(min_repeat_ms),
        f_preproc=preproc or ("cache_flush_cpu_non_first_arg" if cache_flush else ""),
    )

    def samples_s(*args: Any) -> list[float]:
        device.sync()  # nothing queued before the timer starts counts against the kernel
        return [float(x) for x in evaluator(*args).results]

    return samples_s

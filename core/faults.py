"""How a child process died, in words a person can act on; and the test hook that plants a fault.

A kernel that executes an instruction the CPU lacks does not raise: its process dies of SIGILL.
Whoever runs kernels in a child (the self-check, the runner, validation workers) names the
signal and what it usually means instead of "Subprocess terminated".

Planted faults: with ``TUNELAB_PLANT_FAULT=<kind>[@<where>]`` in the environment, a child that
calls :func:`plant` at ``where`` (``selfcheck``, ``run``) commits that fault itself: ``sigill``,
``sigsegv``, ``sigbus``, ``sigfpe``, ``hang``, ``oom``, ``wrong``, or a CUDA error's name
(``cuda_error_illegal_address``: raised with the text TVM raises it with, :func:`planted_cuda_error`);
``kind@where/N`` on every N-th call.
``slowlayout@<layout>`` (e.g. ``slowlayout@aligned``) makes a validation worker time that buffer
layout's kernel with the kernel run four times per timed call, so the layout measures about 4x: a planted
placement-sensitive kernel (:func:`slow_layout`).
Tests use it so that a fault is planted on purpose on any machine, not found by luck on one.

A CUDA fault is named from its error text in tunelab.core.cuda_faults (importable from here too).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterable

# The CUDA faults are named in their own module; their names stay importable from here.
from tunelab.core.cuda_faults import (  # noqa: F401
    CUDA_ERRORS,
    CudaError,
    CudaFault,
    cuda_fault,
    planted_cuda_error,
)
from tunelab.core.errors import StoreFailure

PLANT_ENV = "TUNELAB_PLANT_FAULT"
COUNTER_ENV = "TUNELAB_PLANT_COUNTER"

SIGNAL_MEANINGS: dict[int, str] = {
    signal.SIGILL: "an instruction this CPU lacks: the target's mcpu or mattr implies an instruction set "
    "the host cannot execute",
    signal.SIGSEGV: "a bad memory access (out-of-bounds index or a buffer too small for the kernel)",
    signal.SIGBUS: "a bad memory access (misaligned or unmapped memory)",
    signal.SIGKILL: "killed from outside: usually out of memory (the kernel OOM killer) or a timeout",
    signal.SIGFPE: "an arithmetic fault (integer division by zero or overflow)",
    signal.SIGABRT: "the process aborted itself (a failed check inside TVM or the C runtime)",
    signal.SIGTERM: "asked to stop (SIGTERM from outside)",
    # The runner's own watchdog (tunelab.core.measure.evaluate): a kernel call that ran past the per-call
    # wall limit is stopped by the timer signal's default action, which no kernel can hold off.
    signal.SIGALRM: "stopped: one call of the kernel ran past the per-call wall limit (too slow)",
}


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def describe_signal(signum: int) -> str:
    """'SIGILL (an instruction this CPU lacks ...)' for a signal number."""
    meaning = SIGNAL_MEANINGS.get(signum)
    return f"{signal_name(signum)} ({meaning})" if meaning else signal_name(signum)


def describe_exit(returncode: int) -> str:
    """A subprocess return code in words: 'died of SIGSEGV (...)' or 'exited with status 3'."""
    if returncode < 0:
        return f"died of {describe_signal(-returncode)}"
    if returncode > 128 and returncode - 128 in SIGNAL_MEANINGS:  # a shell reporting a signal
        return f"died of {describe_signal(returncode - 128)}"
    return f"exited with status {returncode}"


def planted(where: str) -> str | None:
    """The fault planted for ``where`` by the environment, or None."""
    value = os.environ.get(PLANT_ENV, "").strip().lower()
    if not value:
        return None
    kind, _, at = value.partition("@")
    at = at.partition("/")[0]
    return kind if not at or at == where else None


def slow_layout() -> str | None:
    """The buffer layout (:mod:`tunelab.core.measure.placement`) planted as slow by
    ``TUNELAB_PLANT_FAULT=slowlayout@<layout>``, or None. A validation worker times that layout's kernel
    run four times per call (:mod:`tunelab.core.trust.remeasure.worker`), so it measures about 4x: far
    enough above the noise of a busy 2-core machine (at 2x, its within-process ratios spread by half there)."""
    value = os.environ.get(PLANT_ENV, "").strip().lower()
    kind, _, at = value.partition("@")
    layout = at.partition("/")[0].strip()
    return (layout or None) if kind == "slowlayout" else None


def _counted(every: int) -> bool:
    """True on every ``every``-th call, counted across processes in the file TUNELAB_PLANT_COUNTER."""
    import fcntl

    path = os.environ.get(COUNTER_ENV)
    if not path or every <= 1:
        return True
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        count = int(fh.read().strip() or 0) + 1
        fh.seek(0)
        fh.truncate()
        fh.write(str(count))
    return count % every == 0


def plant(where: str) -> str | None:
    """Commit the fault planted for ``where`` (most never return); 'wrong' is returned to the caller.

    ``kind@where/N`` plants it on every N-th call only (counted in the file TUNELAB_PLANT_COUNTER),
    so a session meets faulty and healthy kernels side by side."""
    value = os.environ.get(PLANT_ENV, "").strip().lower()
    at = value.partition("@")[2]
    every = int(at.partition("/")[2] or 1) if at.partition("/")[2].isdigit() else 1
    kind = planted(where)
    if kind is None or not _counted(every):
        return None
    if kind.startswith("cuda_error_"):  # as TVM raises it from a CUDA kernel (launch or run)
        raise planted_cuda_error(kind.upper())
    if kind in ("sigill", "sigsegv", "sigbus", "sigfpe", "sigabrt"):
        signum = getattr(signal, kind.upper())
        signal.signal(signum, signal.SIG_DFL)  # Python's faulthandler must not turn it into a traceback
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the signal is delivered before this returns
    if kind == "hang":
        while True:
            time.sleep(1)
    if kind == "oom":
        import resource

        # A memory limit of its own (1 GiB more than it has), so that the planted allocation fails
        # here and never presses on the machine.
        with open("/proc/self/statm") as fh:
            have = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        before = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (have + (1 << 30), before[1]))
        hog = []
        try:
            while True:  # MemoryError ends this
                hog.append(bytearray(256 << 20))
        finally:
            hog.clear()
            resource.setrlimit(resource.RLIMIT_AS, before)
    return kind


# ---- failure classes of trials ------------------------------------------------------------------------

FAILURE_CLASSES = (
    "SIGILL",
    "SIGSEGV",
    "SIGBUS",
    "SIGKILL",
    "SIGFPE",
    "SIGABRT",
    "out of memory",
    "hang",
    "too slow",
    "wrong result",
    "build error",
    "invalid schedule",
    "run error",
)  # and a CUDA fault's own name ("CUDA_ERROR_ILLEGAL_ADDRESS"): see CUDA_ERRORS

# The start of a trial's error when the runner stopped a kernel at the per-call wall limit
# (tunelab.core.measure.runner): a kernel too slow to be worth its time, not a crash of its config.
TOO_SLOW = "too slow"


def failure_class(status: str, error: str | None) -> str:
    """The class a failed trial belongs to, for grouping and fail-fast ('SIGILL', 'hang', ...). A CUDA
    fault is its error's name ('CUDA_ERROR_INVALID_VALUE'), as a CPU crash is its signal's."""
    text = error or ""
    if text.startswith(TOO_SLOW) or "SIGALRM" in text:
        return "too slow"
    for name in ("SIGILL", "SIGSEGV", "SIGBUS", "SIGKILL", "SIGFPE", "SIGABRT"):
        if name in text:
            return name
    fault = cuda_fault(text)
    if fault is not None:
        return fault.name
    if "MemoryError" in text or "out of memory" in text.lower():
        return "out of memory"
    if status == "timeout":
        return "hang"
    if status == "wrong_result":
        return "wrong result"
    if status == "build_error":
        return "build error"
    if status == "invalid":
        return "invalid schedule"
    return "run error"


# A full disk in the words a build, a link or a write says it with: the compiler's and ld's
# "No space left on device", Python's "[Errno 28]", NumPy's short write ("4096 requested and 992
# written") and a quota's "Disk quota exceeded".
_OUT_OF_SPACE = re.compile(
    r"No space left on device|\bENOSPC\b|\[Errno 28\]|Disk quota exceeded|\bEDQUOT\b"
    r"|\d+ requested and \d+ written"
)


class OutOfSpace(StoreFailure):
    """A disk or the temporary folder filled while tunelab wrote to it: the machine's fault, not the input's
    (exit 3, as a store failure); its message names the folder."""


def out_of_space(text: str | None) -> bool:
    """Whether a failure's text says a disk (or the temporary folder) was full: the machine's fault, never
    the config's, so a build or run that says it must not be stored as the config's error."""
    return text is not None and _OUT_OF_SPACE.search(text) is not None


def out_of_space_error(exc: BaseException) -> bool:
    """Whether an exception says a disk was full: an OSError of ENOSPC or EDQUOT, or a full disk's words."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return out_of_space(str(exc))


def describe_failures(classes: Iterable[str], total: int) -> str:
    """'21 of 32 failed: 19 SIGILL, 2 build error' (the most common class first); '' when none failed.
    ``classes``: the :func:`failure_class` of each failed trial."""
    counts = Counter(classes)
    n = sum(counts.values())
    if not n:
        return ""
    parts = ", ".join(f"{k} {name}" for name, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{n} of {total} failed: {parts}"


def stop_on_sigint_like_sigterm() -> None:
    """A worker pool's initializer: Ctrl-C ends the worker the way SIGTERM does, at once and silently.

    A stop sent to the process group (Ctrl-C in a terminal) reaches the build and run workers too.
    Python's own SIGINT handler would raise KeyboardInterrupt wherever the worker happens to be, for
    instance inside TVM's ``TempDirectory.__init__``, whose ``__del__`` then prints a traceback into the
    tune's stderr. The parent drops whatever the stop cut short either way (Measurer.measure), so the
    worker only has to end; the operating system's default action does that without running Python."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def keep_worker_exit_status() -> None:
    """Make TVM's worker pools say how a worker died instead of "Subprocess terminated".

    `tvm.support.popen_pool.PopenWorker` kills a dead worker and reports only
    ``ChildProcessError("Subprocess terminated")``: the exit status, which says SIGILL or SIGSEGV,
    is thrown away. Both MetaSchedule's LocalRunner and the build pool go through it, so the
    status is read here, before the kill, once per process.
    """
    import subprocess

    from tvm.support import popen_pool

    worker = popen_pool.PopenWorker
    if getattr(worker, "_tunelab_exit_status", False):
        return

    def _child_process_error(self):  # TVM's signature
        code = None
        proc = getattr(self, "_proc", None)
        if proc is not None:
            try:
                code = proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:  # alive but its pipe broke: TVM kills it next
                code = None
        self.kill()
        if code is None:
            return ChildProcessError("worker stopped answering (killed)")
        return ChildProcessError(f"the worker running the kernel {describe_exit(code)}")

    worker._child_process_error = _child_process_error
    worker._tunelab_exit_status = True

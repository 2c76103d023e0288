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
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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


# ---- CUDA faults ------------------------------------------------------------------------------------
# A CUDA kernel that goes wrong does not kill its process: TVM raises, and the runner's worker reports a
# Python traceback. These name the fault the way a CPU crash is named by its signal: the CUDA error, the
# launch shape where TVM says it, and what usually causes it.


@dataclass(frozen=True)
class CudaError:
    """One CUDA error: the driver API's name (``CUDA_ERROR_...``, the class of a trial that failed with
    it), the runtime API's name and number, the runtime's own words, and the likely cause."""

    name: str
    runtime: str
    code: int
    words: str
    cause: str
    # Found when the kernel ran (at the next synchronisation), not when it was launched: the CUDA context
    # is broken from then on ("sticky"), so the process that ran it cannot run another kernel.
    while_running: bool = False


CUDA_ERRORS: tuple[CudaError, ...] = (
    CudaError(
        "CUDA_ERROR_INVALID_VALUE",
        "cudaErrorInvalidValue",
        1,
        "invalid argument",
        "a launch shape this GPU refuses: too many threads or too much dynamic shared memory per block, "
        "or a grid or block dimension over its limit",
    ),
    CudaError(
        "CUDA_ERROR_OUT_OF_MEMORY",
        "cudaErrorMemoryAllocation",
        2,
        "out of memory",
        "the GPU's memory is full: the buffers or the kernel's workspace did not fit",
    ),
    CudaError(
        "cudaErrorInvalidConfiguration",  # the runtime's only: the driver says CUDA_ERROR_INVALID_VALUE
        "cudaErrorInvalidConfiguration",
        9,
        "invalid configuration argument",
        "a launch shape this GPU refuses: too many threads or too much shared memory per block",
    ),
    CudaError(
        "CUDA_ERROR_INVALID_IMAGE",
        "cudaErrorInvalidKernelImage",
        200,
        "device kernel image is invalid",
        "the kernel's binary is not valid for this GPU",
    ),
    CudaError(
        "CUDA_ERROR_NO_BINARY_FOR_GPU",
        "cudaErrorNoKernelImageForDevice",
        209,
        "no kernel image is available for execution on the device",
        "the kernel was built for another GPU architecture: the target's arch is not this GPU's",
    ),
    CudaError(
        "CUDA_ERROR_INVALID_PTX",
        "cudaErrorInvalidPtx",
        218,
        "a PTX JIT compilation failed",
        "the driver could not compile the kernel's PTX, made for a newer architecture or toolkit",
    ),
    CudaError(
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        "cudaErrorUnsupportedPtxVersion",
        222,
        "the provided PTX was compiled with an unsupported toolchain.",
        "the kernel's PTX is newer than this driver understands",
    ),
    CudaError(
        "CUDA_ERROR_NOT_FOUND",
        "cudaErrorSymbolNotFound",
        500,
        "named symbol not found",
        "the kernel function is missing from its module",
    ),
    CudaError(
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "cudaErrorIllegalAddress",
        700,
        "an illegal memory access was encountered",
        "an out-of-bounds memory access: an index past a buffer's end",
        True,
    ),
    CudaError(
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        "cudaErrorLaunchOutOfResources",
        701,
        "too many resources requested for launch",
        "one block needs more registers or shared memory than an SM has: too many threads, registers "
        "(per thread) or shared memory per block",
    ),
    CudaError(
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "cudaErrorLaunchTimeout",
        702,
        "the launch timed out and was terminated",
        "the kernel ran past the driver's watchdog, which stops long kernels on a GPU that drives a display",
        True,
    ),
    CudaError(
        "CUDA_ERROR_ASSERT",
        "cudaErrorAssert",
        710,
        "device-side assert triggered",
        "an assertion inside the kernel failed",
        True,
    ),
    CudaError(
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "cudaErrorHardwareStackError",
        714,
        "hardware stack error",
        "the kernel's call stack overflowed: too much local memory per thread",
        True,
    ),
    CudaError(
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "cudaErrorIllegalInstruction",
        715,
        "an illegal instruction was encountered",
        "an instruction this GPU cannot execute: code for another architecture or a malformed "
        "tensor-core instruction",
        True,
    ),
    CudaError(
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "cudaErrorMisalignedAddress",
        716,
        "misaligned address",
        "a memory access not aligned to its width: a vector load or store such as float4, ldmatrix or "
        "cp.async at an address that is not a multiple of its size",
        True,
    ),
    CudaError(
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "cudaErrorInvalidAddressSpace",
        717,
        "operation not supported on global/shared address space",
        "an instruction used on the wrong memory space, such as a shared-memory one on a global address",
        True,
    ),
    CudaError(
        "CUDA_ERROR_INVALID_PC",
        "cudaErrorInvalidPc",
        718,
        "invalid program counter",
        "the kernel jumped to an invalid instruction address",
        True,
    ),
    CudaError(
        "CUDA_ERROR_LAUNCH_FAILED",
        "cudaErrorLaunchFailure",
        719,
        "unspecified launch failure",
        "the kernel faulted while it ran, usually a bad memory access the GPU could not name",
        True,
    ),
    CudaError(
        "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
        "cudaErrorCooperativeLaunchTooLarge",
        720,
        "too many blocks in cooperative launch",
        "a grid-synchronising launch has more blocks than can run at once",
    ),
)
_BY_NAME = {e.name: e for e in CUDA_ERRORS} | {e.runtime: e for e in CUDA_ERRORS}
_BY_WORDS = {e.words: e for e in CUDA_ERRORS}

# The texts TVM 0.27 raises them with (cuda_module.cc, cuda_common.h, tvm-ffi's cuda/base.h):
# "CUDALaunch Error: CUDA_ERROR_INVALID_VALUE\n grid=(2,1,1),  block=(32,1,1)" (cuLaunchKernel refused);
# "CUDA Runtime Error: cudaErrorIllegalAddress (700): an illegal memory access was encountered" (a
# runtime call, usually the synchronisation after the kernel); "cuModuleLoadData(...) failed with error:
# CUDA_ERROR_INVALID_PTX" (a driver call); "CUDA: an illegal memory access was encountered" (older
# runtime checks); "Failed to set the allowed dynamic shared memory size to 65536" (before a launch).
_LAUNCH = re.compile(
    r"CUDALaunch Error:\s*(\w+)(?:\s*grid=\((\d+),\s*(\d+),\s*(\d+)\),\s*block=\((\d+),\s*(\d+),\s*(\d+)\))?"
)
_RUNTIME = re.compile(r"CUDA Runtime Error:\s*(\w+)")
_DRIVER_CALL = re.compile(r"\b(cu[A-Z]\w*)\(.*\) failed with error:\s*(\w+)")
_OLD_RUNTIME = re.compile(r"CUDA: ([^\n]+)")
# (the second: the line cuda_fault makes of it, so that a stored trial is classed again the same way)
_DYNAMIC_SMEM = re.compile(
    r"(?:Failed to set the allowed dynamic shared memory size to|CUDA dynamic shared memory refused) (\d+)"
)
_ANY_NAME = re.compile(r"\b(CUDA_ERROR_[A-Z_]+|cudaError[A-Za-z]+)\b")


@dataclass(frozen=True)
class CudaFault:
    """A CUDA fault found in an error text: its class name, where it happened, the launch shape when
    TVM said it, and the likely cause (empty for a name tunelab does not know)."""

    name: str
    where: str  # "at launch", "while the kernel ran", "in cuModuleLoadData", or ""
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    cause: str = ""
    while_running: bool = False

    def line(self) -> str:
        """One line: 'CUDA_ERROR_INVALID_VALUE at launch, grid=(2,1,1) block=(32,1,1) (likely ...)'."""
        text = " ".join(p for p in (self.name, self.where) if p)
        if self.grid is not None and self.block is not None:
            text += f", grid=({','.join(map(str, self.grid))}) block=({','.join(map(str, self.block))})"
        return f"{text} (likely {self.cause})" if self.cause else text


def _known(name: str, where: str, **shape: Any) -> CudaFault:
    error = _BY_NAME.get(name)
    if error is None:
        return CudaFault(name, where, **shape)
    where = where or ("while the kernel ran" if error.while_running else "")
    return CudaFault(error.name, where, cause=error.cause, while_running=error.while_running, **shape)


def cuda_fault(text: str) -> CudaFault | None:
    """The CUDA fault an error text (a runner's message, a traceback) reports, or None."""
    if not text or not any(w in text for w in ("CUDA", "cuda", "shared memory")):
        return None
    if m := _LAUNCH.search(text):
        shape: dict[str, Any] = {}
        if m.group(2) is not None:
            dims = [int(g) for g in m.groups()[1:]]
            shape = {"grid": tuple(dims[:3]), "block": tuple(dims[3:])}
        return _known(m.group(1), "at launch", **shape)
    if m := _RUNTIME.search(text):
        return _known(m.group(1), "")
    if m := _DRIVER_CALL.search(text):
        return _known(m.group(2), f"in {m.group(1)}")
    if m := _DYNAMIC_SMEM.search(text):
        return CudaFault(
            "CUDA dynamic shared memory",
            f"refused {m.group(1)} bytes per block before launch",
            cause="more dynamic shared memory per block than this GPU allows",
        )
    if (m := _OLD_RUNTIME.search(text)) and m.group(1).strip() in _BY_WORDS:
        return _known(_BY_WORDS[m.group(1).strip()].name, "")
    if m := _ANY_NAME.search(text):
        return _known(m.group(1), "")
    return None


def planted_cuda_error(name: str) -> Exception:
    """A CUDA error as TVM 0.27 raises it, for a planted fault: cuLaunchKernel's refusal with its launch
    shape (``tvm.error.InternalError``), or the runtime's report of a fault found while the kernel ran
    (``RuntimeError``)."""
    from tvm.error import InternalError

    error = _BY_NAME.get(name)
    if error is None:
        raise ValueError(f"no planted CUDA fault {name!r}; one of {', '.join(e.name for e in CUDA_ERRORS)}")
    if error.while_running:
        return RuntimeError(f"CUDA Runtime Error: {error.runtime} ({error.code}): {error.words}")
    return InternalError(f"CUDALaunch Error: {error.name}\n grid=(2,1,1),  block=(32,1,1)\n")

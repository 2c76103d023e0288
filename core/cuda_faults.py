"""CUDA faults named from an error text: the CUDA error, where it happened, its launch shape and likely cause.

A CUDA kernel that goes wrong does not kill its process: TVM raises, and the runner's worker reports a
Python traceback. These name the fault the way a CPU crash is named by its signal (tunelab.core.faults):
the CUDA error, the launch shape where TVM says it, and what usually causes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


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

"""How many threads TVM's runtime gives a parallel kernel, and giving it every core this process may use.

TVM sizes its thread pool from ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else
``std::thread::hardware_concurrency()`` — halved on x86 to "ignore hyper-threading"
(``MaxConcurrency`` in TVM's ``src/runtime/threading_backend.cc``), whatever the topology says. On a
VM with two vCPUs and one thread per core, every parallel kernel then runs on one core while NumPy's
BLAS uses both: GEMM 1024³ read 0.5x BLAS with a schedule that reaches 1.0x on two threads. So each
process that runs kernels (the command line, the app, the test run, the benchmark jobs) sets
``TVM_NUM_THREADS`` to the cores it may use before TVM starts its pool; a value a person set stays.

The pool is created at the first parallel launch and reads the variable then, and the processes that
measure (MetaSchedule's runner workers, re-measurement workers, RPC servers started from here) inherit
it, so setting it at start-up is enough.
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from dataclasses import dataclass

from tunelab.core.target.info import cpu_core_count

THREADS_VARIABLES = ("TVM_NUM_THREADS", "OMP_NUM_THREADS")  # in the order TVM reads them


@dataclass(frozen=True)
class KernelThreads:
    threads: int  # what TVM's pool uses in this process and the ones it starts
    source: str  # "TVM_NUM_THREADS" / "OMP_NUM_THREADS" (a person's setting) or "tunelab"
    tvm_default: int  # what TVM would have used with neither variable set

    def describe(self) -> str:
        if self.source != "tunelab":
            return f"kernels run on {self.threads} threads ({self.source} is set)"
        if self.tvm_default != self.threads:
            return (
                f"kernels run on {self.threads} threads, one per core "
                f"(TVM's own default here would be {self.tvm_default}: it halves the CPU count on x86)"
            )
        return f"kernels run on {self.threads} threads, one per core"


def tvm_default_threads(cpu_count: int | None = None, machine: str | None = None) -> int:
    """The pool size TVM picks when neither variable is set (threading_backend.cc's MaxConcurrency)."""
    count = (os.cpu_count() or 1) if cpu_count is None else cpu_count
    arch = (machine or platform.machine()).lower()
    if arch in ("x86_64", "amd64"):
        count //= 2
    return max(count, 1)


def use_every_core(
    environ: MutableMapping[str, str] | None = None, cores: int | None = None
) -> KernelThreads:
    """Set TVM_NUM_THREADS to the usable cores unless a person set TVM's thread count already."""
    env = os.environ if environ is None else environ
    default = tvm_default_threads()
    for name in THREADS_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            try:
                threads = max(int(value), 1)
            except ValueError:  # TVM's atoi reads garbage as 0, then uses 1
                threads = 1
            return KernelThreads(threads, name, default)
    threads = cores if cores is not None else cpu_core_count()
    env["TVM_NUM_THREADS"] = str(threads)
    return KernelThreads(threads, "tunelab", default)

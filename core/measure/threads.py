"""How many threads TVM's runtime gives a parallel kernel, and giving it every core this process may use.

TVM sizes its thread pool from ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else
``std::thread::hardware_concurrency()`` — halved on x86 to "ignore hyper-threading"
(``MaxConcurrency`` in TVM's ``src/runtime/threading_backend.cc``), whatever the topology says. On a
VM with two vCPUs and one thread per core, every parallel kernel then runs on one core while NumPy's
BLAS uses both: GEMM 1024³ read 0.5x BLAS with a schedule that reaches 1.0x on two threads. So each
process that runs kernels (the command line, the app, the test run, the benchmark jobs) sets
``TVM_NUM_THREADS`` to the cores it may use before TVM starts its pool; a value a person set stays.

The same start-up bounds how long an idle pool thread spins before it sleeps
(``TVM_THREAD_POOL_SPIN_COUNT``, 300000 by default in ``src/runtime/thread_pool.cc``). On a quiet
machine spinning only saves a wake-up between back-to-back launches, and 1000 spins keep that (a
0.022 ms GEMM 128³ measured 0.0224 ms against 0.0220 ms). On a shared machine the default is ruinous
once every core runs a kernel thread: beside four busy loops on two cores, a two-thread kernel's
threads spun out each other's time slices and a confirmation that takes 2 s on a quiet machine was
killed at its 90 s timeout; with 1000 spins it finished in 8 s (10000: 49 s) and named the neighbours.

The pool is created at the first parallel launch and reads the variables then, and the processes that
measure (MetaSchedule's runner workers, re-measurement workers, RPC servers started from here) inherit
them, so setting them at start-up is enough.
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from dataclasses import dataclass

from tunelab.core.target.info import cpu_core_count

THREADS_VARIABLES = ("TVM_NUM_THREADS", "OMP_NUM_THREADS")  # in the order TVM reads them
SPIN_VARIABLE = "TVM_THREAD_POOL_SPIN_COUNT"
MEASURE_SPIN_COUNT = 1000  # spins before an idle pool thread sleeps; TVM's default is 300000


@dataclass(frozen=True)
class KernelThreads:
    threads: int  # what TVM's pool uses in this process and the ones it starts
    source: str  # "TVM_NUM_THREADS" / "OMP_NUM_THREADS" (a person's setting) or "tunelab"
    tvm_default: int  # what TVM would have used with neither variable set
    spin_count: int = MEASURE_SPIN_COUNT  # TVM_THREAD_POOL_SPIN_COUNT in this process and its children

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
    """Set TVM_NUM_THREADS to the usable cores and TVM_THREAD_POOL_SPIN_COUNT to
    :data:`MEASURE_SPIN_COUNT`, each unless a person set it already."""
    env = os.environ if environ is None else environ
    default = tvm_default_threads()
    spin_text = env.get(SPIN_VARIABLE, "").strip()
    if not spin_text:
        spin_text = env[SPIN_VARIABLE] = str(MEASURE_SPIN_COUNT)
    spin_count = _atoi(spin_text)
    for name in THREADS_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return KernelThreads(max(_atoi(value), 1), name, default, spin_count)
    threads = cores if cores is not None else cpu_core_count()
    env["TVM_NUM_THREADS"] = str(threads)
    return KernelThreads(threads, "tunelab", default, spin_count)


def _atoi(text: str) -> int:
    """What C's atoi, which TVM reads both variables with, makes of a value: garbage reads as 0."""
    try:
        return max(int(text), 0)
    except ValueError:
        return 0

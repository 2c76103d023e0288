"""How a child process died, in words a person can act on; and the test hook that plants a fault.

A kernel that executes an instruction the CPU lacks does not raise: its process dies of SIGILL.
Whoever runs kernels in a child (the self-check, the runner, validation workers) names the
signal and what it usually means instead of "Subprocess terminated".

Planted faults: with ``TUNELAB_PLANT_FAULT=<kind>[@<where>]`` in the environment, a child that
calls :func:`plant` at ``where`` (``selfcheck``, ``run``) commits that fault itself: ``sigill``,
``sigsegv``, ``sigbus``, ``sigfpe``, ``hang``, ``oom``, ``wrong``. Tests use it so that a fault is
planted on purpose on any machine, not found by luck on one.
"""

from __future__ import annotations

import os
import signal
import time

PLANT_ENV = "TUNELAB_PLANT_FAULT"

SIGNAL_MEANINGS = {
    signal.SIGILL: "an instruction this CPU lacks: the target's mcpu or mattr implies an instruction set "
                   "the host cannot execute",
    signal.SIGSEGV: "a bad memory access (out-of-bounds index or a buffer too small for the kernel)",
    signal.SIGBUS: "a bad memory access (misaligned or unmapped memory)",
    signal.SIGKILL: "killed from outside: usually out of memory (the kernel OOM killer) or a timeout",
    signal.SIGFPE: "an arithmetic fault (integer division by zero or overflow)",
    signal.SIGABRT: "the process aborted itself (a failed check inside TVM or the C runtime)",
    signal.SIGTERM: "asked to stop (SIGTERM from outside)",
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
    return kind if not at or at == where else None


def plant(where: str) -> str | None:
    """Commit the fault planted for ``where`` (most never return); 'wrong' is returned to the caller."""
    kind = planted(where)
    if kind is None:
        return None
    if kind in ("sigill", "sigsegv", "sigbus", "sigfpe", "sigabrt"):
        signum = getattr(signal, kind.upper())
        signal.signal(signum, signal.SIG_DFL)  # Python's faulthandler must not turn it into a traceback
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the signal is delivered before this returns
    if kind == "hang":
        while True:
            time.sleep(1)
    if kind == "oom":
        hog = []
        while True:  # a memory limit (RLIMIT_AS, a cgroup) stops this; nothing else should be asked to
            hog.append(bytearray(256 << 20))
    return kind

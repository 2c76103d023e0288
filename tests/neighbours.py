"""Planted busy neighbours: CPU-bound processes outside the test's process tree, as another user's
jobs on a shared machine are (each started by a shell that exits at once, so it is re-parented), each in
a session of its own as another user's job is: where the kernel groups CPU time by session (Linux's
autogroup), a loop left in the test's session shares the test's slice, and on a machine busy with other
sessions got under 20 % of a core, too little for the telemetry to call it busy (issue 26)."""

from __future__ import annotations

import os
import signal
import subprocess


def start_neighbour() -> int:
    """One busy loop that is not our descendant; returns its pid."""
    out = subprocess.run(
        ["sh", "-c", "(while :; do :; done) >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        start_new_session=True,
    )
    return int(out.stdout.strip())


def start_neighbours() -> list[int]:
    """Two busy loops per core: the machine is oversubscribed. One per core is not enough to slow every
    kernel: the scheduler can pair the loops on one core and leave a single-threaded kernel a core of
    its own (seen here: a 1.4 ms GEMM ran as fast beside two loops on two cores as on a quiet machine)."""
    return [start_neighbour() for _ in range(2 * (os.cpu_count() or 2))]


def stop_neighbours(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

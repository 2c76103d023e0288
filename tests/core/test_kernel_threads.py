"""Kernels run on every core this process may use, not on the half TVM's default gives an x86 host."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tunelab.core.measure.threads import (
    MEASURE_SPIN_COUNT,
    SPIN_VARIABLE,
    tvm_default_threads,
    use_every_core,
)
from tunelab.core.target.info import cpu_core_count


def _pool_size(code: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport tvm\nprint(tvm.get_global_func('runtime.NumThreads')())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout.split()[-1])


def test_tvm_alone_uses_half_the_cpus_on_x86() -> None:
    """The reading of TVM's MaxConcurrency that the fix rests on, checked against the real runtime."""
    assert _pool_size("") == tvm_default_threads()


def test_a_tunelab_process_runs_kernels_on_every_usable_core() -> None:
    code = "from tunelab.core.measure.threads import use_every_core\nuse_every_core()"
    assert _pool_size(code) == cpu_core_count()


def test_the_command_line_sets_it_for_the_processes_it_starts() -> None:
    code = (
        "import os\nfrom tunelab.core.cli.main import main\nmain(['workloads'])\n"
        "print(os.environ['TVM_NUM_THREADS'])"
    )
    assert _pool_size(code) == cpu_core_count()


def test_validation_workers_run_kernels_on_every_core_for_a_python_caller() -> None:
    """validate_session called from Python, not through `tunelab` (which sets the variable for itself):
    its fresh processes re-measured every kernel on half the cores, about 2x slower than the session
    (found re-measuring 90 session bests from a benchmark script: median 2.1x)."""
    code = (
        "import os\nfrom tunelab.core.trust.remeasure.pool import _worker_env\n"
        "env = _worker_env()\nos.environ.clear()\nos.environ.update(env)"
    )
    assert _pool_size(code) == cpu_core_count()
    assert _pool_size("import os\nos.environ['OMP_NUM_THREADS'] = '1'\n" + code) == 1  # a person's stays


def test_a_measurers_workers_run_kernels_on_every_core_for_a_python_caller() -> None:
    """MetaSchedule's LocalRunner workers inherit the environment of the process that made the Measurer."""
    code = (
        "from tunelab.core.measure.runner import Measurer, Problem\n"
        "from tunelab.core.records import MeasureOptions\n"
        "from tunelab.core.target.info import llvm_target\n"
        "from tunelab.core.workloads.catalog import get_workload\n"
        "shape = {'M': 16, 'N': 16, 'K': 16}\n"
        "Measurer(Problem(get_workload('gemm'), shape, 'float32', llvm_target()), MeasureOptions())"
    )
    assert _pool_size(code) == cpu_core_count()


@pytest.mark.parametrize(
    ("count", "machine", "expected"),
    [(2, "x86_64", 1), (16, "x86_64", 8), (1, "x86_64", 1), (2, "aarch64", 2), (8, "AMD64", 4)],
)
def test_tvm_default(count: int, machine: str, expected: int) -> None:
    assert tvm_default_threads(count, machine) == expected


def test_a_persons_setting_stays() -> None:
    env = {"OMP_NUM_THREADS": "3"}
    chosen = use_every_core(env, cores=2)
    assert (chosen.threads, chosen.source) == (3, "OMP_NUM_THREADS")
    assert env == {"OMP_NUM_THREADS": "3", SPIN_VARIABLE: str(MEASURE_SPIN_COUNT)}
    env = {"TVM_NUM_THREADS": "5", "OMP_NUM_THREADS": "3"}
    assert use_every_core(env, cores=2).threads == 5  # TVM reads its own variable first


def test_unset_means_every_core_and_says_why() -> None:
    env: dict[str, str] = {}
    chosen = use_every_core(env, cores=4)
    assert env == {"TVM_NUM_THREADS": "4", SPIN_VARIABLE: str(MEASURE_SPIN_COUNT)}
    assert chosen.source == "tunelab"
    assert "4 threads" in chosen.describe()


def test_an_idle_pool_thread_spins_briefly_unless_a_person_chose() -> None:
    """TVM's 300000 spins starve a shared machine's kernel threads (see threads.py); a set value stays."""
    env = {SPIN_VARIABLE: "50000"}
    assert use_every_core(env, cores=2).spin_count == 50000 and env[SPIN_VARIABLE] == "50000"
    env = {SPIN_VARIABLE: "x"}
    assert use_every_core(env, cores=2).spin_count == 0  # as TVM's atoi reads it

"""CUDA faults named like CPU signals: the CUDA error, the launch shape, the likely cause, in one line.

The texts are TVM 0.27's own: the first is the error a real H200 run stored for a candidate (a raw
traceback, as the runner's worker reports it), the others are in the formats TVM raises them with
(``cuda_module.cc``: "CUDALaunch Error: <name>\\n grid=(..),  block=(..)"; tvm-ffi's CUDA check:
"CUDA Runtime Error: <name> (<code>): <words>"; a driver call: "<call>(...) failed with error: <name>").
They go through the function the runner uses on every failed run. On the CPU, planted faults raise the
same texts inside the real runner's worker (tunelab.core.faults' hook), so a session stores and counts
them as it would on a GPU.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from schedules import valid_schedules
from specs import FAST_MEASURE, small_spec
from stores import plant

from tunelab.core.faults import (
    CUDA_ERRORS,
    cuda_fault,
    failure_class,
)
from tunelab.core.measure.runner import _run_error_text

# The error of trial #9 of the fp32 GEMM 4096^3 auto session on an H200, as it was stored.
H200_INVALID_VALUE = (
    "LocalRunner: An exception occurred\n"
    "Traceback (most recent call last):\n"
    '  File "site-packages/tvm/exec/popen_worker.py", line 106, in main\n'
    "    result = fn(*args, **kwargs)\n"
    "             ^^^^^^^^^^^^^^^^^^^\n"
    '  File "site-packages/tvm/s_tir/meta_schedule/runner/local_runner.py", line 159, in _worker_func\n'
    "    costs: list[float] = f_run_evaluator(\n"
    "                         ^^^^^^^^^^^^^^^^\n"
    '  File "tunelab/core/measure/evaluate.py", line 107, in __call__\n'
    "    func(*args)\n"
    '  File "python/tvm_ffi/cython/function.pxi", line 1038, in tvm_ffi.core.Function.__call__\n'
    '  File "/__w/tvm/tvm/src/backend/cuda/runtime/cuda_module.cc", line 371, in void '
    "tvm::runtime::CUDAWrappedFunc::operator()(tvm::ffi::PackedArgs, tvm::ffi::Any*, void**) const\n"
    "tvm.error.InternalError: CUDALaunch Error: CUDA_ERROR_INVALID_VALUE\n"
    " grid=(2,1,1),  block=(32,1,1)"
)


def _worker_traceback(exception_line: str) -> str:
    """A runner message as LocalRunner reports an exception its worker raised."""
    return (
        "LocalRunner: An exception occurred\n"
        "Traceback (most recent call last):\n"
        '  File "site-packages/tvm/exec/popen_worker.py", line 106, in main\n'
        "    result = fn(*args, **kwargs)\n"
        '  File "tunelab/core/measure/evaluate.py", line 118, in __call__\n'
        "    device.sync()\n" + exception_line
    )


def test_the_h200_launch_error_is_one_line_with_its_shape_and_cause():
    line = _run_error_text(H200_INVALID_VALUE, 60.0)
    assert "\n" not in line and "Traceback" not in line and "File " not in line
    assert line.startswith("CUDA_ERROR_INVALID_VALUE at launch, grid=(2,1,1) block=(32,1,1) (likely ")
    assert "threads" in line and "shared memory per block" in line
    assert failure_class("run_error", line) == "CUDA_ERROR_INVALID_VALUE"
    # The raw text too is classed by its CUDA error (a store written before the runner said it so).
    assert failure_class("run_error", H200_INVALID_VALUE) == "CUDA_ERROR_INVALID_VALUE"


@pytest.mark.parametrize(
    ("exception_line", "name", "where", "cause_words"),
    [
        (
            "tvm.error.InternalError: CUDALaunch Error: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES\n"
            " grid=(128,128,1),  block=(1024,1,1)\n",
            "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            "at launch, grid=(128,128,1) block=(1024,1,1)",
            "too many threads, registers",
        ),
        (
            "RuntimeError: CUDA Runtime Error: cudaErrorIllegalAddress (700): an illegal memory access "
            "was encountered\n",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "while the kernel ran",
            "out-of-bounds",
        ),
        (
            "RuntimeError: CUDA Runtime Error: cudaErrorMisalignedAddress (716): misaligned address\n",
            "CUDA_ERROR_MISALIGNED_ADDRESS",
            "while the kernel ran",
            "not aligned",
        ),
        (
            "RuntimeError: CUDA Runtime Error: cudaErrorLaunchTimeout (702): the launch timed out and was "
            "terminated\n",
            "CUDA_ERROR_LAUNCH_TIMEOUT",
            "while the kernel ran",
            "watchdog",
        ),
        (
            "RuntimeError: CUDA Runtime Error: cudaErrorLaunchFailure (719): unspecified launch failure\n",
            "CUDA_ERROR_LAUNCH_FAILED",
            "while the kernel ran",
            "bad memory access",
        ),
        (
            "tvm.error.CUDAError: cuModuleLoadData(&(module_[device_id]), code_.data()) failed with "
            "error: CUDA_ERROR_NO_BINARY_FOR_GPU\n",
            "CUDA_ERROR_NO_BINARY_FOR_GPU",
            "in cuModuleLoadData",
            "another GPU architecture",
        ),
        (
            "tvm.error.InternalError: Check failed: (e == cudaSuccess) is false: CUDA: an illegal memory "
            "access was encountered\n",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "while the kernel ran",
            "out-of-bounds",
        ),
        (
            "tvm.error.InternalError: Failed to set the allowed dynamic shared memory size to 262144\n",
            "CUDA dynamic shared memory",
            "refused 262144 bytes per block before launch",
            "dynamic shared memory",
        ),
    ],
)
def test_cuda_faults_are_named_in_one_line(exception_line, name, where, cause_words):
    line = _run_error_text(_worker_traceback(exception_line), 30.0)
    assert "\n" not in line and "Traceback" not in line, line
    assert line.startswith(f"{name} {where} (likely "), line
    assert cause_words in line
    assert failure_class("run_error", line) == name


def test_an_unknown_cuda_error_is_still_named_and_other_errors_lose_their_traceback():
    line = _run_error_text(
        _worker_traceback("RuntimeError: CUDA Runtime Error: cudaErrorNewThing (999)\n"), 30
    )
    assert line == "cudaErrorNewThing"  # named, no cause made up
    assert failure_class("run_error", line) == "cudaErrorNewThing"
    # Not a CUDA fault: the exception, in one line, without the frames.
    line = _run_error_text(_worker_traceback("ValueError: the buffer\n  has no shape\n"), 30)
    assert line == "ValueError: the buffer has no shape"
    assert cuda_fault(line) is None and failure_class("run_error", line) == "run error"


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["cuda_error_invalid_value", "cuda_error_illegal_address"])
def test_a_planted_cuda_fault_is_a_failed_trial_stored_in_one_line(monkeypatch, tmp_path, store, fault):
    from tunelab.core.session.loop import create_session

    plant(monkeypatch, tmp_path, f"{fault}@run/2")  # every second kernel run
    session = create_session(store, small_spec(trials=6, batch=3, measure=replace(FAST_MEASURE, fail_fast=0)))
    trials = list(session.run())
    assert store.session(session.session_id).status == "finished" and len(trials) == 6
    failed = [store.trial(t.id) for t in trials if not t.ok]  # as stored
    assert len(failed) == 3 and sum(t.ok for t in trials) == 3  # the worker after a fault runs kernels
    name = fault.upper()
    for t in failed:
        assert t.status == "run_error" and "\n" not in t.error and "Traceback" not in t.error, t.error
        assert t.error.startswith(f"{name} ") and "(likely " in t.error
        assert failure_class(t.status, t.error) == name
    if name == "CUDA_ERROR_INVALID_VALUE":  # a launch error says the launch shape
        assert all("at launch, grid=(2,1,1) block=(32,1,1)" in t.error for t in failed)


@pytest.mark.slow
def test_fail_fast_counts_cuda_faults_as_it_counts_signals(monkeypatch, tmp_path, store):
    from tunelab.core.session.loop import create_session

    plant(monkeypatch, tmp_path, "cuda_error_illegal_address@run")
    session = create_session(
        store, small_spec(trials=24, batch=4, measure=replace(FAST_MEASURE, fail_fast=8))
    )
    trials = list(session.run())
    record = store.session(session.session_id)
    assert len(trials) == 8 and record.status == "failed"
    assert record.error.startswith(
        "the first 8 trials all failed with CUDA_ERROR_ILLEGAL_ADDRESS: CUDA_ERROR_ILLEGAL_ADDRESS while "
        "the kernel ran (likely an out-of-bounds memory access"
    )


@pytest.mark.slow
def test_the_worker_is_replaced_after_a_cuda_fault_and_kept_after_a_wrong_result(monkeypatch, tmp_path):
    """A fault found while a kernel ran leaves the worker's CUDA context broken: the next candidate must
    not run in it. A wrong result says nothing about the process, which is kept."""

    from tunelab.core.measure.runner import Measurer, Problem
    from tunelab.core.search.space.template import TemplateSpace
    from tunelab.core.target.info import llvm_target
    from tunelab.core.workloads.catalog import get_workload

    workload, target, shape = get_workload("gemm"), llvm_target(), {"M": 32, "N": 32, "K": 32}
    space = TemplateSpace(workload, shape, "float32", target)
    schedules = valid_schedules(space, 3)

    def worker_pid(measurer):
        workers = [w for w in measurer.runner.pool._worker_map.values() if w._proc is not None]
        return workers[0]._proc.pid if workers else None

    for fault in ("cuda_error_misaligned_address", "wrong"):
        plant(monkeypatch, tmp_path, f"{fault}@run/2")  # the second of three candidates
        (tmp_path / "plant-counter").unlink(missing_ok=True)
        measurer = Measurer(Problem(workload, shape, "float32", target), FAST_MEASURE)
        results, pids = [], []
        try:
            for schedule in schedules:
                results.append(measurer.measure([schedule])[0])
                pids.append(worker_pid(measurer))
        finally:
            measurer.close()
        assert [r.status for r in results] == [
            "ok",
            "wrong_result" if fault == "wrong" else "run_error",
            "ok",
        ]
        if fault == "wrong":
            assert pids[0] == pids[1] == pids[2] is not None
        else:  # ended after the fault; the next candidate ran in a fresh one
            assert pids[1] is None and pids[2] not in (None, pids[0])


def test_every_named_cuda_error_can_be_planted_and_is_found_again():
    from tunelab.core.faults import planted_cuda_error

    for error in CUDA_ERRORS:
        if not error.name.startswith("CUDA_ERROR_"):
            continue
        exc = planted_cuda_error(error.name)
        fault = cuda_fault(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
        assert fault is not None and fault.name == error.name and fault.cause == error.cause

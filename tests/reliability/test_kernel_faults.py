"""A kernel's death, named: planted faults in the real runner's worker, fail-fast, and a real SIGILL.

Faults are planted through tunelab.core.faults' test hook inside MetaSchedule's real LocalRunner worker
(TUNELAB_PLANT_FAULT=kind@run/N: on every N-th kernel run), so each class is met on any machine.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
from cli_runs import run_tunelab, tune_gemm
from schedules import valid_schedules
from specs import FAST_MEASURE, FAST_MEASURE_ARGS, small_spec
from stores import plant

from tunelab.core.faults import PLANT_ENV, failure_class
from tunelab.core.session.loop import create_session

pytestmark = pytest.mark.slow


def run_session(store, **measure):
    spec = small_spec(trials=6, batch=3, measure=replace(FAST_MEASURE, fail_fast=0, **measure))
    session = create_session(store, spec)
    trials = list(session.run())
    return store.session(session.session_id), trials


@pytest.mark.parametrize(
    ("fault", "status", "cls", "words"),
    [
        ("sigsegv", "run_error", "SIGSEGV", "died of SIGSEGV (a bad memory access"),
        ("sigill", "run_error", "SIGILL", "died of SIGILL (an instruction this CPU lacks"),
        ("sigbus", "run_error", "SIGBUS", "died of SIGBUS"),
        ("sigfpe", "run_error", "SIGFPE", "died of SIGFPE (an arithmetic fault"),
        ("wrong", "wrong_result", "wrong result", "wrong result: max abs error"),
        ("oom", "run_error", "out of memory", "MemoryError"),
    ],
)
def test_a_planted_fault_is_a_failed_trial_with_its_reason_and_the_session_goes_on(
    monkeypatch, tmp_path, store, fault, status, cls, words
):
    plant(monkeypatch, tmp_path, f"{fault}@run/2")  # every second kernel run
    record, trials = run_session(store)
    assert record.status == "finished" and len(trials) == 6
    failed = [t for t in trials if not t.ok]
    assert len(failed) == 3 and sum(t.ok for t in trials) == 3
    for t in failed:
        assert t.status == status and words in t.error, t.error
        assert "Subprocess terminated" not in t.error and "LocalRunner" not in t.error
        assert failure_class(t.status, t.error) == cls


def test_a_hang_is_killed_at_the_timeout_and_named(monkeypatch, tmp_path, store):
    plant(monkeypatch, tmp_path, "hang@run/3")
    record, trials = run_session(store, timeout_s=4.0)
    assert record.status == "finished"
    hung = [t for t in trials if not t.ok]
    assert len(hung) == 2
    assert all(t.status == "timeout" and t.error.startswith("hang: no result within 4 s") for t in hung)
    assert all(failure_class(t.status, t.error) == "hang" for t in hung)


def test_fail_fast_stops_a_session_whose_first_trials_all_die_alike(monkeypatch, tmp_path, store):
    plant(monkeypatch, tmp_path, "sigill@run")
    spec = small_spec(trials=24, batch=4, measure=replace(FAST_MEASURE, fail_fast=8))
    session = create_session(store, spec)
    trials = list(session.run())
    record = store.session(session.session_id)
    assert len(trials) == 8  # two batches, not the budget of 24
    assert record.status == "failed"
    assert record.error.startswith(
        "the first 8 trials all failed with SIGILL: the worker running the kernel died"
    )


def test_fail_fast_does_not_stop_mixed_failures(monkeypatch, tmp_path, store):
    plant(monkeypatch, tmp_path, "sigsegv@run/2")
    spec = small_spec(trials=8, batch=4, measure=replace(FAST_MEASURE, fail_fast=4))
    session = create_session(store, spec)
    assert len(list(session.run())) == 8
    assert store.session(session.session_id).status == "finished"


def test_cli_fail_fast_exits_1_with_one_line(tmp_path):
    db = tmp_path / "t.sqlite"
    env = dict(os.environ, **{PLANT_ENV: "sigill@run"})
    proc = run_tunelab(
        *tune_gemm("--fail-fast", "4", *FAST_MEASURE_ARGS, "--json", "--db", str(db), trials=12, batch=4),
        env=env,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "session 1 failed: the first 4 trials all failed with SIGILL" in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "failed" and doc["trials"] == 4


def test_a_real_illegal_instruction_in_the_runner_is_named(store):
    """Not planted: a kernel built for an AVX-512 CPU on a host without it (as an unchecked target did)."""
    from tunelab.core.measure.runner import Measurer, Problem
    from tunelab.core.search.space.template import TemplateSpace
    from tunelab.core.target.host_cpu import host_cpu
    from tunelab.core.target.info import llvm_target
    from tunelab.core.workloads.catalog import get_workload

    host = host_cpu()
    if host.arch != "x86_64" or "avx512f" in host.flags:
        pytest.skip("needs an x86 host without AVX-512")
    target = replace(llvm_target(), json={"kind": "llvm", "mcpu": "znver4", "num-cores": 2})
    workload = get_workload("gemm")
    shape = {"M": 64, "N": 64, "K": 64}
    space = TemplateSpace(workload, shape, "float32", target)
    schedules = valid_schedules(space, 3)
    measurer = Measurer(Problem(workload, shape, "float32", target), FAST_MEASURE)
    try:
        results = measurer.measure(schedules)
    finally:
        measurer.close()
    died = [r for r in results if r.status == "run_error"]
    assert died, [r.error for r in results]
    assert all("died of SIGILL" in r.error for r in died)

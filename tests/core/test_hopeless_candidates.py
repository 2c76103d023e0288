"""Hopeless candidates cost one call; a kernel over the per-call wall limit is stopped as too slow.

Real kernels through MetaSchedule's LocalRunner. The slow candidate is slow on purpose: the GEMM as its
compute is written, without a schedule (a naive triple loop, B read along its columns), against a tiled
template kernel of the same problem, which is tens of times faster on any CPU (measured here: 0.8 s a
call at 512^3 against milliseconds). What is asserted is what was planted: how many samples each got
and what each trial says, not how fast this machine is.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from schedules import valid_schedules

from tunelab.core.faults import failure_class
from tunelab.core.measure.evaluate import CLEARLY_SLOW, ONE_CALL_S
from tunelab.core.measure.runner import Measurer, Problem
from tunelab.core.records import MeasureOptions
from tunelab.core.search.space.template import TemplateSpace
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow

# target_cv 0: wherever adaptive repeats are allowed at all, sampling goes on up to max_repeat.
OPTIONS = MeasureOptions(
    number=1, repeat=3, min_repeat_ms=1, target_cv=0.0, max_repeat=9, cooldown_s=0, timeout_s=120
)


@pytest.fixture(autouse=True)
def one_kernel_thread(monkeypatch):
    """Every kernel on one thread (the runner's workers read this when they start): a multi-threaded kernel
    beside a busy neighbour waits at its barrier for a descheduled thread, 0.3 ms turning into 4-8 ms here,
    and the leader's figure would then be the neighbour's, not the kernel's. The naive kernel has no
    parallel loop and is on one thread either way."""
    monkeypatch.setenv("TVM_NUM_THREADS", "1")


def _naive(workload, shape):
    """The compute without a schedule: a kernel made slow on purpose."""
    import tvm
    from tvm import s_tir

    return s_tir.Schedule(tvm.IRModule({"main": workload.prim_func(shape, "float32")}))


def _tiled(workload, shape, target):
    space = TemplateSpace(workload, shape, "float32", target)
    return valid_schedules(space, 1)[0]


def _measure(shape, schedules, **kwargs):
    workload = get_workload("gemm")
    measurer = Measurer(
        Problem(workload, shape, "float32", llvm_target()), kwargs.pop("options", OPTIONS), **kwargs
    )
    try:
        return measurer.measure(schedules, best_ms=kwargs.get("best_ms")), measurer
    finally:
        measurer.close()


def test_a_slow_candidate_after_a_fast_one_is_timed_once():
    shape = {"M": 512, "N": 512, "K": 512}
    workload, target = get_workload("gemm"), llvm_target()
    fast, slow = _tiled(workload, shape, target), _naive(workload, shape)
    measurer = Measurer(Problem(workload, shape, "float32", target), OPTIONS)
    try:
        # One batch: the fast kernel becomes the best so far, the slow one after it is hopeless.
        leader, hopeless = measurer.measure([fast, slow])
    finally:
        measurer.close()
    assert leader.status == "ok" and hopeless.status == "ok", (leader.error, hopeless.error)
    assert len(leader.samples_ms) == 9  # the leader: every adaptive repeat (target_cv 0)
    best = float(np.median(leader.samples_ms))
    assert len(hopeless.samples_ms) == 1  # timed once, never repeated
    (figure,) = hopeless.samples_ms
    assert figure > CLEARLY_SLOW * best
    # Its call is long enough to be its own figure: the warm-up call was the only call.
    assert figure >= ONE_CALL_S * 1e3
    # One call and the worker's own overhead, not the 11 calls of a full timing.
    assert hopeless.run_s < 11 * figure / 1e3


def test_the_vendor_time_stands_in_for_the_best_before_there_is_one():
    """The session's first candidate: no best so far, but the vendor's time is known, as a stored baseline
    gives it. The vendor figure is planted: a twentieth of the slow kernel's own fastest sample.

    Not a fast kernel's measured time: a multi-threaded kernel beside busy neighbours waits on its thread
    barrier for a descheduled thread, and a tiled 0.3 ms GEMM was measured at 8 ms here beside two busy
    loops (CI saw the same), level with the single-threaded naive kernel's 15 ms. Noise only adds time,
    so the naive kernel timed again is at least that fastest sample, ten times the CLEARLY_SLOW bar."""
    shape = {"M": 256, "N": 256, "K": 256}
    slow = _naive(get_workload("gemm"), shape)
    # Without a vendor time the first candidate leads and is timed fully.
    (unknown,), _ = _measure(shape, [slow])
    assert unknown.status == "ok" and len(unknown.samples_ms) == 9, unknown.error
    vendor_ms = min(unknown.samples_ms) / (10 * CLEARLY_SLOW)
    (first,), _ = _measure(shape, [slow], vendor_ms=vendor_ms)
    assert first.status == "ok" and len(first.samples_ms) == 1, (first.error, first.samples_ms)
    assert min(first.samples_ms) > CLEARLY_SLOW * vendor_ms


def test_a_kernel_over_the_per_call_wall_limit_is_stopped_and_stored_as_too_slow(tmp_path):
    # Naive GEMM 2048^3: a minute or more a call on a CPU (8.7 s at 1024^3 here), stopped at 0.5 s.
    shape = {"M": 2048, "N": 2048, "K": 2048}
    workload = get_workload("gemm")
    started = time.monotonic()
    (result,), _ = _measure(shape, [_naive(workload, shape)], call_limit_s=0.5)
    assert result.status == "timeout"
    assert result.error == "too slow: one call ran past the per-call wall limit of 0.5 s and was stopped"
    assert failure_class(result.status, result.error) == "too slow"  # not a hang, not a crash
    assert result.samples_ms == ()
    # Stopped at the limit, not waited for (nor killed at the run's 120 s timeout).
    assert result.run_s < 20 and time.monotonic() - started < 60
    # Stored as the session stores a trial: its status and its one line, no latency.
    trial = _stored(tmp_path, result)
    assert (trial.status, trial.error, trial.latency_ms) == ("timeout", result.error, None)
    assert failure_class(trial.status, trial.error) == "too slow"


def test_the_default_per_call_limit_is_a_share_of_the_run_timeout():
    from tunelab.core.measure.runner import CALL_LIMIT_SHARE

    shape = {"M": 16, "N": 16, "K": 16}
    measurer = Measurer(Problem(get_workload("gemm"), shape, "float32", llvm_target()), OPTIONS)
    try:
        assert measurer.call_limit_s == OPTIONS.timeout_s * CALL_LIMIT_SHARE
        assert measurer.runner.f_run_evaluator.call_limit_s == measurer.call_limit_s
    finally:
        measurer.close()


def _stored(tmp_path, result):
    """``result`` stored as a trial of a real session, as its loop stores one (no prediction), read back."""
    import sys
    from pathlib import Path

    from tunelab.core.session.loop import create_session
    from tunelab.core.session.recording import new_trial
    from tunelab.core.store import Store

    sys.path.insert(0, str(Path(__file__).parent))
    from specs import small_spec

    store = Store(tmp_path / "t.sqlite")
    try:
        session = create_session(store, small_spec())
        new = new_trial(0, {"planted": 1}, result, 0, None, {})
        added = store.add_trial(session.session_id, new, "planted")
        return store.trial(added.id)
    finally:
        store.close()


def test_a_session_takes_the_vendor_time_from_the_store_before_its_first_trial(tmp_path):
    """The loop hands the Measurer the stored vendor baseline of its problem on this machine. Planted: a
    vendor time of a nanosecond, which no kernel call comes near, so the session's first candidate is
    hopeless before anything of its own was measured; without a baseline it leads and is timed fully."""
    import sys
    import time as clock
    from dataclasses import replace
    from pathlib import Path

    from tunelab.core.records import VendorBaseline
    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store

    sys.path.insert(0, str(Path(__file__).parent))
    from specs import FAST_MEASURE, small_spec

    spec = small_spec(trials=1, batch=1, measure=replace(FAST_MEASURE, target_cv=0.0, max_repeat=6))
    first_samples = {}
    for planted in (False, True):
        store = Store(tmp_path / f"vendor-{planted}.sqlite")
        try:
            if planted:
                store.put_baseline(
                    VendorBaseline(
                        workload=spec.workload,
                        shape=dict(spec.shape),
                        dtype=spec.dtype,
                        target_kind="llvm",
                        library="planted",
                        method="planted",
                        median_ms=1e-6,
                        samples_ms=(1e-6,),
                        gflops=None,
                        correct=True,
                        max_abs_err=0.0,
                        measure={"settle_s": 0.5},
                        measured_at=clock.time(),
                        blas=None,
                    )
                )
            session = create_session(store, spec)
            (trial,) = list(session.run())
            assert trial.ok, trial.error
            first_samples[planted] = len(store.samples(trial.id))
        finally:
            store.close()
    assert first_samples == {False: 6, True: 1}

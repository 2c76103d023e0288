"""On a GPU the vendor is timed before round 0, so the measurer times a candidate far slower than the
vendor once from the first batch (issue 29: round 0 of the fp32 auto session on the H200 spent up to 9 s a
trial on random kernels with full adaptive repeats). CUDA is not runnable here: the use case is run on
an LLVM session with the CPU's kind allowed, which takes the same path to a real NumPy vendor figure and
a real measurer."""

from __future__ import annotations

from dataclasses import replace

from specs import small_spec

from tunelab.core.records import MeasureOptions
from tunelab.core.session.loop import create_session
from tunelab.core.usecases.tuning import vendor_before_round_zero


def test_a_cpu_session_does_not_time_the_vendor_first(store):
    session = create_session(store, small_spec(trials=2, batch=2))
    assert vendor_before_round_zero(session) == 0
    record = store.session(session.session_id)
    assert store.baseline(record.workload, record.shape, record.dtype, "llvm") is None


def test_the_vendor_known_before_round_zero_makes_far_slower_candidates_cost_one_call(store):
    measure = MeasureOptions(
        number=1, repeat=5, min_repeat_ms=1, cooldown_s=0, confirm_runs=0, target_cv=0.001
    )
    session = create_session(store, small_spec(trials=4, batch=4, measure=measure))
    stages: list[str] = []
    session.on_stage.append(stages.append)
    assert vendor_before_round_zero(session, kinds=("llvm",)) == 1
    assert stages[0] == "timing the vendor library on shape 1 before round 0"
    record = store.session(session.session_id)
    vendor = store.baseline(record.workload, record.shape, record.dtype, "llvm")
    assert vendor is not None and vendor.correct
    # the vendor planted a thousand times faster than it ran: every round-0 candidate is far slower
    store.put_baseline(replace(vendor, median_ms=vendor.median_ms / 1000))
    trials = list(session.run())
    assert len(trials) == 4 and all(t.ok for t in trials)
    assert all(len(store.samples(t.id)) == 1 for t in trials)  # timed once, never adaptively repeated

"""tunelab.core.measure.timing: the Python-callable loop and the TVM-kernel timer, on real calls."""

from __future__ import annotations

import time

import numpy as np

from tunelab.core.measure.timing import kernel_timer, time_callable


def test_sync_runs_after_the_warmup_and_inside_every_sample():
    events: list[str] = []
    samples = time_callable(
        lambda: events.append("call"),
        number=2,
        repeat=3,
        min_repeat_ms=0.0,
        warmup=1,
        sync=lambda: events.append("sync"),
    )
    assert len(samples) == 3 and all(s >= 0 for s in samples)
    # one warm-up call and its sync, then each sample: its two calls, then the sync it waits for
    assert events == ["call", "sync"] + ["call", "call", "sync"] * 3


def test_deadline_ends_sampling_after_the_sample_that_crosses_it():
    calls = []
    start = time.perf_counter()
    samples = time_callable(
        lambda: (calls.append(1), time.sleep(0.005)),
        number=1,
        repeat=1000,
        min_repeat_ms=0.0,
        warmup=1,
        deadline=start + 0.05,
    )
    assert 1 <= len(samples) < 1000 and len(calls) == len(samples) + 1  # one call a sample, plus warm-up
    assert all(s >= 4.0 for s in samples)  # ms: each sample is one sleeping call
    # a deadline already past still gives one sample
    assert len(time_callable(lambda: None, number=1, repeat=5, min_repeat_ms=0, deadline=start)) == 1


def test_kernel_timer_gives_repeat_samples_in_seconds_of_a_built_kernel():
    import tvm

    from tunelab.core.measure.runner import fast_build
    from tunelab.core.target.info import resolve_target
    from tunelab.core.workloads.catalog import get_workload

    gemm = get_workload("gemm")
    shape = {"M": 64, "N": 64, "K": 64}
    lib = fast_build(gemm.ir_module(shape, "float32"), resolve_target("llvm").tvm_target(), None)
    dev = tvm.cpu(0)
    arrays = [*gemm.make_inputs(shape, "float32", 0), np.zeros(gemm.output_shape(shape), dtype="float32")]
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    for cache_flush in (False, True):
        timer = kernel_timer(lib, dev, number=2, repeat=4, min_repeat_ms=5, cache_flush=cache_flush)
        samples = timer(*args)
        assert len(samples) == 4 and all(isinstance(s, float) for s in samples)
        # seconds, not ms: a 64^3 product takes microseconds, far under a second and over a nanosecond
        assert all(1e-9 < s < 0.1 for s in samples)
    np.testing.assert_allclose(args[-1].numpy(), gemm.reference(arrays[:-1], shape), rtol=1e-4, atol=1e-4)

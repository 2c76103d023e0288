"""The validation worker's windows, with a real exported kernel and the real reference: it times the
reference BLAS kernel right before and right after each schedule's window (a machine slowed in episodes of
seconds shows in a reference timed within the same seconds), and the schedule again after its other
layouts (a kernel that changed speed within its process: tunelab.core.trust.jitter_machine)."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest
from confirming import finished_in_file
from specs import small_spec

from tunelab.core.export.files import export_trial
from tunelab.core.measure.placement import DEFAULT_LAYOUT
from tunelab.core.records import MeasureOptions
from tunelab.core.store import Store
from tunelab.core.trust.remeasure import worker
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow

SPEC = small_spec(
    shape={"M": 64, "N": 64, "K": 64},
    measure=MeasureOptions(number=2, repeat=3, min_repeat_ms=5, cooldown_s=0, confirm_runs=0),
)


def test_the_reference_beside_the_window_and_the_kernel_again_after_the_layouts(tmp_path, monkeypatch):
    import tvm

    db = tmp_path / "tunelab.sqlite"
    session_id = finished_in_file(db, SPEC)
    with Store(db) as store:
        (lib,) = export_trial(store, session_id, out_dir=tmp_path / "out", formats=("library",)).values()
    workload = get_workload(SPEC.workload)
    inputs = workload.make_inputs(SPEC.shape, SPEC.dtype, 0)
    expected = workload.reference(inputs, SPEC.shape, SPEC.dtype)
    rtol, atol = workload.tolerance(SPEC.dtype, SPEC.shape)
    job = dict(
        device="cpu", rtol=rtol, atol=atol, check=True, number=2, repeat=3, min_repeat_ms=5, warmup=1,
        cache_flush=False, layouts=[DEFAULT_LAYOUT, "aligned"],
    )  # fmt: skip
    item = {"label": "best", "lib": lib, "outputs": [[[64, 64], "float32"]]}
    timings: list[tuple[float, float, list[float]]] = []  # (start, end, samples) of each reference timing
    real = worker.reference_samples_ms

    def spied(*args, **kwargs):  # the real reference, its start and end noted
        start = time.time()
        samples = real(*args, **kwargs)
        timings.append((start, time.time(), samples))
        return samples

    monkeypatch.setattr(worker, "reference_samples_ms", spied)
    result = worker._worker_measure(tvm, tvm.cpu(0), job, item, inputs, expected)
    assert result["ok"], result
    (before_start, before_end, before), (after_start, after_end, after) = timings
    assert before_end <= result["t0"] <= result["t1"] <= after_start  # nothing timed between them
    assert len(before) == len(after) == worker.REFERENCE_SAMPLES
    assert result["reference_ms"] == pytest.approx(statistics.median(before + after))
    assert np.isfinite(result["reference_ms"]) and result["reference_ms"] > 0
    # the recorded layout timed again, after the other layout, in the same process
    assert set(result["layout_ms"]) == {DEFAULT_LAYOUT, "aligned"}
    assert result["again_t0"] >= after_end and result["again_ms"] > 0

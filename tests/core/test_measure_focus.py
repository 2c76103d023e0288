"""Precision where it changes a decision: the runner spends its repeats on the leaders.

Real kernels through MetaSchedule's LocalRunner. The same GEMM schedule is measured against a best so far
that makes it clearly slow, slower than the leaders' band, or a leader, so that each path is taken by a
real measurement and its sample count says which it took.
"""

from __future__ import annotations

import pytest
from schedules import valid_schedules

from tunelab.core.measure.evaluate import CLEARLY_SLOW, PROBE_SAMPLES
from tunelab.core.measure.runner import Measurer, Problem
from tunelab.core.records import MeasureOptions
from tunelab.core.search.space.template import TemplateSpace
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = [pytest.mark.slow, pytest.mark.serial]

SHAPE = {"M": 64, "N": 64, "K": 128}
# target_cv 0 keeps sampling up to max_repeat wherever adaptive repeats are allowed at all.
OPTIONS = MeasureOptions(number=1, repeat=3, min_repeat_ms=1, target_cv=0.0, max_repeat=9, cooldown_s=0)


@pytest.fixture(autouse=True)
def one_kernel_thread(monkeypatch):
    """The kernel on one thread (its runner's workers read this when they start). On 2 threads a busy
    neighbour on either core stalls one of them and the kernel's time doubles from one call to the next
    (0.0057 against 0.0128 ms in one run); one thread keeps to a free core, and the paths below are
    decided by the standings planted, not by a neighbour."""
    monkeypatch.setenv("TVM_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def kernel():
    workload = get_workload("gemm")
    target = llvm_target()
    space = TemplateSpace(workload, SHAPE, "float32", target)
    return workload, target, valid_schedules(space, 1)[0]


def _measure(kernel, options: MeasureOptions, best_ms: float | None, n: int = 1):
    workload, target, schedule = kernel
    measurer = Measurer(Problem(workload, SHAPE, "float32", target), options)
    try:
        results = measurer.measure([schedule] * n, best_ms=best_ms)
    finally:
        measurer.close()
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    return results


def test_each_candidate_gets_the_precision_its_standing_needs(kernel):
    """The bests planted below are fractions of the kernel's noise floor, its fastest sample: noise only adds
    time, so every later sample is at or above that floor whatever else the machine runs, and each path is
    decided by the standing planted, not by how quiet the machine was when the floor was measured (a median
    taken beside a busy neighbour is inflated, and a best planted from it lands inside the band)."""
    (full,) = _measure(kernel, OPTIONS, None)  # no best yet: the first candidate leads
    assert len(full.samples_ms) == 9
    floor = min(full.samples_ms)
    # A best ten times faster: the warm-up and a probe say "clearly slow", and the probe is the figure.
    (slow,) = _measure(kernel, OPTIONS, floor / 10)
    assert len(slow.samples_ms) == PROBE_SAMPLES
    assert min(slow.samples_ms) > 2 * floor / 10
    # Outside the band (1.25x the best) by its fastest sample: one round of `repeat`, no adaptive
    # repeats. No warm-up (and so no check), so that the probe is not taken. The band ends at half the
    # floor: a sample below it would be twice as fast as the fastest of nine.
    unwarmed = MeasureOptions(**{**OPTIONS.to_json(), "warmup": 0, "check_correctness": False})
    (outside,) = _measure(kernel, unwarmed, floor / 2.5)
    assert len(outside.samples_ms) == OPTIONS.repeat
    # The band switched off: every candidate is timed fully, whatever the best.
    (everything,) = _measure(kernel, MeasureOptions(**{**OPTIONS.to_json(), "leader_band": 0}), floor / 10)
    assert len(everything.samples_ms) == 9


# Two schedules of the same GEMM far apart: a tiled, vectorised one and a scalar one with every loop
# split to 1: 0.009 against 0.335 ms on one thread of an AMD EPYC (znver4), 36x apart.
FAST = {"tile_i": [32], "tile_j": [16], "tile_k": [8], "order": "ro,si,ri", "unroll": 16, "vectorize": True,
        "parallel": False}  # fmt: skip
SLOW = {"tile_i": [1], "tile_j": [1], "tile_k": [1], "order": "si,ro,ri", "unroll": 0, "vectorize": False,
        "parallel": False}  # fmt: skip


def test_a_batch_leader_sets_the_band_for_the_rest_of_its_batch(kernel):
    """A fast candidate and a far slower one in one batch, after a planted best slower than both: the fast
    one leads (timed fully), and its figure, not the planted best, judges the slow one, which gets one
    probe sample only.

    Without the leader's figure the slow candidate would be inside the band of the planted best and timed
    fully. Noise only adds time, so the slow one is at least as slow as it is; the leader's median would
    have to be inflated by the ratio of the two kernels over CLEARLY_SLOW (18x here) for the slow one
    to look level with it, where two equal kernels timed against each other were seen 1.7x apart beside
    busy neighbours and failed a band of 4x."""
    workload, target, _ = kernel
    space = TemplateSpace(workload, SHAPE, "float32", target)
    fast, slow = space.schedule(FAST), space.schedule(SLOW)
    measurer = Measurer(Problem(workload, SHAPE, "float32", target), OPTIONS)
    try:
        lead, behind = measurer.measure([fast, slow], best_ms=1e6)
    finally:
        measurer.close()
    assert lead.status == behind.status == "ok", (lead.error, behind.error)
    assert len(lead.samples_ms) == 9
    assert len(behind.samples_ms) == PROBE_SAMPLES
    # The probe's figure is the slow kernel's: far above the leader's fastest sample.
    assert min(behind.samples_ms) > CLEARLY_SLOW * min(lead.samples_ms)

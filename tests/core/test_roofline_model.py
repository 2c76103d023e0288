"""The analytical cost models on real TVM schedules: the roofline's bound where the bound is known (a copy
is memory-bound, a vectorized parallel GEMM compute-bound), what it says limits a schedule, and the
hybrid that learns the roofline's error."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import te

from tunelab.core.search.models import make_cost_model
from tunelab.core.search.roofline_model import RooflineMachine, estimate
from tunelab.core.search.space.factory import make_space
from tunelab.core.search.space.tvm_context import schedule_features
from tunelab.core.target.host_cpu import vector_bits
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload

TARGET = llvm_target()
# a machine of 2 cores with 16 fp32 lanes, 200 GFLOP/s, 20 GB/s (10 FLOP per byte) and a 32 MiB cache
MACHINE = RooflineMachine(200.0, 20.0, cores=2, lanes=16, cache_bytes=32 << 20, source="test")


def _block(sch, name):
    return sch.get_sblock(name) if hasattr(sch, "get_sblock") else sch.get_block(name)


def gemm_schedule(n: int, *, vector: bool, parallel: bool):
    sch = tvm.s_tir.Schedule(get_workload("gemm").ir_module({"M": n, "N": n, "K": n}))
    i, j, k = sch.get_loops(_block(sch, "C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)
    if parallel:
        sch.parallel(io)
    if vector:
        sch.vectorize(ji)
    return sch


def copy_schedule(n: int):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([A, B])}))
    (i,) = sch.get_loops(_block(sch, "B"))
    io, ii = sch.split(i, [2, None])
    sch.parallel(io)
    iio, iii = sch.split(ii, [None, 16])
    sch.vectorize(iii)
    return sch


def test_a_copy_is_memory_bound_and_a_good_gemm_compute_bound():
    copy = estimate(schedule_features(copy_schedule(1 << 24), TARGET), MACHINE)
    assert copy.bound == "memory" and any("MB from memory" in x for x in copy.limits)
    # 2^24 floats read and written: at least 128 MB of traffic
    assert copy.traffic_bytes >= 2 * 4 * (1 << 24) * 0.99
    gemm = estimate(schedule_features(gemm_schedule(1024, vector=True, parallel=True), TARGET), MACHINE)
    assert gemm.bound == "compute" and gemm.flops == pytest.approx(2 * 1024**3, rel=0.01)
    assert gemm.limits == () and gemm.cores_used == 2 and gemm.vector_lanes_used == 16
    # its compute bound is the machine's peak: 2.15 GFLOP at 200 GFLOP/s
    assert gemm.compute_ms == pytest.approx(2 * 1024**3 / 200e9 * 1e3, rel=0.01)


def test_the_roofline_names_the_choice_that_limits_a_schedule():
    scalar = estimate(schedule_features(gemm_schedule(256, vector=False, parallel=True), TARGET), MACHINE)
    serial = estimate(schedule_features(gemm_schedule(256, vector=True, parallel=False), TARGET), MACHINE)
    best = estimate(schedule_features(gemm_schedule(256, vector=True, parallel=True), TARGET), MACHINE)
    assert "vectorized 1 of 16 lanes" in scalar.limits
    assert "parallel over 1 of 2 cores" in serial.limits
    assert best.predicted_ms < serial.predicted_ms < scalar.predicted_ms


def test_roofline_and_hybrid_keep_the_model_contract_on_a_real_space():
    w = get_workload("gemm")
    space = make_space(w, {"M": 128, "N": 128, "K": 128}, "float32", TARGET, "template")
    rng = np.random.default_rng(0)
    configs = [space.sample(rng) for _ in range(12)]
    X = space.features(configs)
    roofline = make_cost_model("roofline", space=space)
    assert roofline.trained and roofline.machine.lanes == vector_bits(TARGET.json) // 32
    pred = roofline.predict(X)
    assert pred.shape == (12,) and np.all(np.isfinite(pred)) and np.all(pred > 0)
    assert np.allclose(make_cost_model("roofline", space=space).predict(X), pred)  # deterministic
    with pytest.raises(ValueError, match="per-store features"):
        roofline.predict(X[:, :100])
    # hybrid: the roofline until it has data, then the roofline times the error it learned
    hybrid = make_cost_model("hybrid", space=space)
    assert hybrid.trained and np.allclose(hybrid.predict(X), pred)
    measured = pred * 3.0  # a roofline 3x optimistic everywhere
    hybrid.fit(X, measured)
    assert np.allclose(hybrid.predict(X) / measured, 1.0, rtol=0.1)
    # a prior from earlier sessions (time per GFLOP) trains it before any own trial
    prior = make_cost_model("hybrid", space=space)
    gflop = w.flops({"M": 128, "N": 128, "K": 128}) / 1e9
    prior.set_prior(X, measured / gflop, gflop=gflop, weight=0.3)
    prior.fit(np.zeros((0, 0)), np.zeros(0))
    assert prior.n_prior == 12 and np.median(prior.predict(X) / measured) == pytest.approx(1.0, rel=0.2)


def test_the_machine_is_the_stored_profile_where_one_exists():
    from tunelab.core.records import MachineProfile

    w = get_workload("gemm")
    space = make_space(w, {"M": 64, "N": 64, "K": 64}, "float32", TARGET, "template")
    nominal = RooflineMachine.for_space(space)
    assert nominal.source == "nominal" and nominal.cores == int(TARGET.json.get("num-cores") or 1)
    profile = MachineProfile("llvm", "h", {"float32": 123.0}, 45.0, {}, 2, 1.0, 0.0)
    measured = RooflineMachine.for_space(space, profile)
    assert (measured.peak_gflops, measured.bandwidth_gbs, measured.source) == (123.0, 45.0, "measured")

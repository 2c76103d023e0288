"""Across shapes: shape lists, carrying a config over to another shape, and real measurements."""

from __future__ import annotations

import math

import numpy as np
import pytest
from specs import FAST_MEASURE, small_spec

from tunelab.core.errors import StoreError, WorkloadError
from tunelab.core.search.space.auto import AutoSpace
from tunelab.core.search.space.template import TemplateSpace
from tunelab.core.store import Store
from tunelab.core.target.info import resolve_target
from tunelab.core.trust.shape_report import ShapeRow
from tunelab.core.trust.shapes import (
    MAX_RATIO,
    across_shapes,
    judge,
    nearest_factors,
    parse_shapes,
    space_for_shape,
    summarize,
    transfer_config,
)
from tunelab.core.workloads.base import format_shape
from tunelab.core.workloads.catalog import get_workload

GEMM = get_workload("gemm")
BASE = {"M": 64, "N": 64, "K": 64}


def shape(**kw):
    return {**BASE, **kw}


# ------------------------------------------------------------------------------------------ parsing


def test_parse_varies_one_parameter_keeping_the_base():
    assert parse_shapes(GEMM, "M=1,4,16,64", BASE) == [shape(M=1), shape(M=4), shape(M=16), shape(M=64)]
    assert parse_shapes("gemm", " M = 16 , 32 ", BASE) == [shape(M=16), shape(M=32)]


def test_parse_explicit_list_ranges_products_and_presets():
    assert parse_shapes(GEMM, "M=64,N=64,K=64;M=128,N=128,K=128", BASE) == [
        BASE,
        {"M": 128, "N": 128, "K": 128},
    ]
    assert parse_shapes(GEMM, "M=16..128", BASE) == [shape(M=16), shape(M=32), shape(M=64), shape(M=128)]
    assert parse_shapes(GEMM, "M=8:32:8", BASE) == [shape(M=8), shape(M=16), shape(M=24), shape(M=32)]
    assert parse_shapes(GEMM, "M=16,32,N=8,16", BASE) == [
        shape(M=16, N=8),
        shape(M=16, N=16),
        shape(M=32, N=8),
        shape(M=32, N=16),
    ]
    assert parse_shapes(GEMM, "square-128", BASE) == [{"M": 128, "N": 128, "K": 128}]
    # duplicates dropped, order kept; without a base the workload's defaults fill in
    assert parse_shapes(GEMM, "M=16;M=16,8", BASE) == [shape(M=16), shape(M=8)]
    assert parse_shapes(GEMM, "M=4") == [{"M": 4, "N": 512, "K": 512}]


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ; ",
        "16,32",
        "X=4",
        "M=0",
        "M=abc",
        "M=4,,8",
        "M=1,M=2",
        "M=8..4",
        "M=1:2:0",
        "M=1:100000",
        "N=4,x",
    ],
)
def test_parse_rejects_bad_input_in_one_line(text):
    with pytest.raises(WorkloadError) as info:
        parse_shapes(GEMM, text, BASE)
    assert "\n" not in str(info.value) and str(info.value).startswith("gemm")


# ----------------------------------------------------------------------------------------- transfer


@pytest.fixture(scope="module")
def llvm():
    return resolve_target("llvm")


def test_nearest_factors_prefers_the_inner_factors():
    # template tiles list inner factors only: 32 on an axis of 48 -> 24 (log-nearer than 48)
    assert nearest_factors(
        [32], [[1], [2], [3], [4], [6], [8], [12], [16], [24], [48]], outer_first=False
    ) == [24]
    assert nearest_factors([8], [[4], [16]], outer_first=False) == [4]  # a tie picks the smaller
    # auto tiles: [outer, ..., innermost]; the outer factor absorbs the rest of the extent
    cands = [[4, 2, 2, 1], [1, 2, 4, 2], [2, 1, 4, 2], [1, 1, 8, 2], [8, 1, 1, 2]]
    assert nearest_factors([4, 1, 8, 2], cands, outer_first=True) == [1, 1, 8, 2]


def test_template_transfer_keeps_dividing_factors_and_maps_the_others(llvm):
    src = TemplateSpace(GEMM, BASE, "float32", llvm)
    config = {
        "tile_i": [16],
        "tile_j": [32],
        "tile_k": [64],
        "order": "ro,si,ri",
        "unroll": 64,
        "vectorize": True,
        "parallel": False,
    }
    src.check_config(config)
    dst = space_for_shape(src, shape(M=40, N=48, K=16))
    out = transfer_config(src, config, dst)
    # 16 does not divide 40 (nearest divisor 20), 32 not 48 (24), 64 not 16 (16 itself)
    assert out == {**config, "tile_i": [20], "tile_j": [24], "tile_k": [16]}
    dst.check_config(out)
    dst.schedule(out)  # a legal schedule at the new shape
    # Factors that divide the new extent stay as they are; the rest of the config is untouched.
    same = transfer_config(src, config, space_for_shape(src, shape(M=128)))
    assert same == config
    # A space edited to fewer orders: a value it does not have cannot be carried over.
    data = dst.to_json()
    for knob in data["knobs"]:
        if knob["name"] == "order":
            knob["candidates"] = ["ro,ri,si"]
    narrow = TemplateSpace(GEMM, dst.shape, "float32", llvm, data)
    assert transfer_config(src, config, narrow) is None
    # An unroll step the target space lacks maps to the nearest one.
    for knob in data["knobs"]:
        if knob["name"] == "order":
            knob["candidates"] = ["ro,si,ri"]
        if knob["name"] == "unroll":
            knob["candidates"] = [0, 16, 512]
    fewer_steps = TemplateSpace(GEMM, dst.shape, "float32", llvm, data)
    assert transfer_config(src, config, fewer_steps)["unroll"] == 16
    # Not a point of the source space, or another kind of space: None.
    assert transfer_config(src, {**config, "tile_i": [5]}, dst) is None


def test_space_for_shape_keeps_edited_knobs(llvm):
    data = TemplateSpace(GEMM, BASE, "float32", llvm).to_json()
    for knob in data["knobs"]:
        if knob["name"] == "tile_i":
            knob["candidates"] = [[8], [16]]
        if knob["name"] == "unroll":
            knob["candidates"] = [0, 64]
    src = TemplateSpace(GEMM, BASE, "float32", llvm, data)
    dst = space_for_shape(src, shape(M=96))
    knobs = {k["name"]: k for k in dst.knobs}
    assert knobs["unroll"]["candidates"] == [0, 64]
    assert [32] in knobs["tile_i"]["candidates"] and [96] not in knobs["tile_i"]["candidates"]  # CPU limit 64
    assert all(96 % c[0] == 0 for c in knobs["tile_i"]["candidates"])


def test_auto_transfer_refactorises_tiles(llvm):
    src = AutoSpace(GEMM, BASE, "float32", llvm)
    rng = np.random.default_rng(0)
    configs = [src.sample(rng) for _ in range(6)]
    for new_shape in (shape(M=48, N=40), shape(M=16, K=128)):
        dst = space_for_shape(src, new_shape)
        for config in configs:
            out = transfer_config(src, config, dst)
            assert out is not None
            dst.check_config(out)
            assert out["sketch"] == config["sketch"]
            for pos, (before, after) in enumerate(zip(config["decisions"], out["decisions"], strict=True)):
                cands = dst.sketches[out["sketch"]].candidates[pos]
                if isinstance(before, list):
                    assert math.prod(after) == math.prod(dst.sketches[out["sketch"]].base_decisions[pos])
                    if before in cands:  # inner factors that fit are kept exactly
                        assert after == before
                elif cands is not None:
                    assert after == before  # categorical indices are kept
    # One exact case: M goes from 64 to 48, the M tile [1, 1, 64, 1] keeps its structure.
    config = {"sketch": 0, "decisions": [[1, 1, 64, 1], [2, 16, 2, 1], [16, 4], 1]}
    dst = space_for_shape(src, shape(M=48))
    out = transfer_config(src, config, dst)
    assert out == {"sketch": 0, "decisions": [[1, 1, 48, 1], [2, 16, 2, 1], [16, 4], 1]}
    dst.schedule(out)
    assert transfer_config(src, config, TemplateSpace(GEMM, BASE, "float32", llvm)) is None


# -------------------------------------------------------------------------------------- falls-off rule


def test_judge_applies_both_rules_exactly():
    assert judge(1.25, 50.0, 100.0) == (False, [])  # both limits are inclusive
    off, reasons = judge(1.26, 100.0, 100.0)
    assert off and "1.26x slower" in reasons[0]
    off, reasons = judge(None, 49.9, 100.0)
    assert off and "50% of the 100.0 GFLOP/s" in reasons[0]
    assert judge(2.0, 10.0, 100.0)[0] and len(judge(2.0, 10.0, 100.0)[1]) == 2
    assert judge(None, 10.0, None) == (False, [])  # nothing to compare with
    assert judge(None, None, 100.0, status="build_error") == (
        True,
        ["the schedule does not work here (build_error)"],
    )


def test_summary_names_the_shapes_that_fall_off():
    rows = [
        ShapeRow({"M": 16}, "M=16", "ok", ratio_to_tuned=None, gflops=20.0, falls_off=True),
        ShapeRow({"M": 32}, "M=32", "ok", ratio_to_tuned=1.6, gflops=60.0, falls_off=True),
        ShapeRow({"M": 64}, "M=64", "ok", ratio_to_tuned=1.0, gflops=70.0, falls_off=False),
        ShapeRow({"M": 7}, "M=7", "invalid", ratio_to_tuned=None, gflops=None, falls_off=True),
    ]
    text = summarize(rows, "M=64")
    assert text == (
        "The schedule tuned for M=64 falls off on 3 of 4 shape(s): M=16 (20.0 GFLOP/s), "
        "M=32 (1.60x its tuned schedule), M=7 (invalid); it holds up on the other 1."
    )
    assert summarize(rows[2:3], "M=64") == "The schedule tuned for M=64 holds up on all 1 shape(s)."
    assert "M=16 (20.0 GFLOP/s, 29% of the tuned shape's)" in summarize(rows, "M=64", 70.0)


# ------------------------------------------------------------------------------------ real measurement


@pytest.mark.slow
def test_across_shapes_on_real_sessions(tmp_path):
    from tunelab.core.session.loop import create_session

    store = Store(tmp_path / "tunelab.sqlite")
    source = create_session(store, small_spec(shape=BASE, tuner="random", trials=8, batch=8))
    list(source.run())
    other = create_session(store, small_spec(shape=shape(M=32), tuner="random", trials=4, batch=4, seed=1))
    list(other.run())
    best = store.best_trial(source.session_id)
    seen = []
    report = across_shapes(
        store,
        source.session_id,
        "M=16,32,64,128",
        options=FAST_MEASURE,
        on_row=lambda row: seen.append(row.shape_text),
    )
    rows = report.rows
    assert [r.shape["M"] for r in rows] == [16, 32, 64, 128]
    assert seen == [r.shape_text for r in rows]
    assert report.trial_id == best.id and report.source_config == best.config
    for row in rows:
        assert row.status == "ok", row.error  # built, ran, and matched NumPy
        assert row.latency_ms > 0 and len(row.samples_ms) >= 2  # adaptive repeats
        assert row.latency_ms == pytest.approx(float(np.median(row.samples_ms)))
        flops = GEMM.flops(row.shape)
        assert row.gflops == pytest.approx(flops / (row.latency_ms * 1e-3) / 1e9)
        off, reasons = judge(row.ratio_to_tuned, row.gflops, report.source.reference_gflops)
        assert (row.falls_off, list(row.reasons)) == (off, reasons)
    by_m = {r.shape["M"]: r for r in rows}
    # M=64 is the session's own shape; M=32 has its own tuned session; 16 and 128 have none.
    assert by_m[64].tuned_session_id == source.session_id and by_m[64].config == best.config
    assert by_m[32].tuned_session_id == other.session_id
    assert by_m[32].tuned_stored_ms == store.session(other.session_id).best_ms
    for m in (32, 64):
        assert by_m[m].ratio_to_tuned == pytest.approx(by_m[m].latency_ms / by_m[m].tuned_ms)
    assert by_m[64].ratio_to_tuned == 1.0  # the same schedule, measured once
    assert by_m[16].tuned_ms is None and by_m[16].ratio_to_tuned is None
    assert report.source.gflops == by_m[64].gflops
    assert report.falls_off == tuple(r.shape_text for r in rows if r.falls_off)
    assert report.summary.startswith("The schedule tuned for M=64,N=64,K=64 ")
    assert report.rule.to_json() == {"max_ratio_to_tuned": MAX_RATIO, "min_gflops_fraction": 0.5}
    # Shape dicts work as well as text; a trial of another session is refused.
    again = across_shapes(store, source.session_id, [{"M": 8}], options=FAST_MEASURE)
    assert again.rows[0].shape == shape(M=8) and again.rows[0].status == "ok"
    other_trial = store.best_trial(other.session_id)
    with pytest.raises(StoreError):
        across_shapes(store, source.session_id, "M=16", trial_id=other_trial.id)
    with pytest.raises(WorkloadError):
        across_shapes(store, source.session_id, "Q=16")
    store.close()


@pytest.mark.serial
def test_a_neighbour_busy_while_the_own_shape_is_measured_is_not_blamed_on_the_shapes(tmp_path, monkeypatch):
    """Busy loops planted for the own shape's first measurement only: the own shape is measured again
    after the others, keeps its faster figure, and where its two figures disagree every other shape is
    measured twice. Without the bracket the own shape's GFLOP/s (the reference of the 50 % rule and of
    the jitter report's shape cause) would be the disturbed one (issue 28's CI run: a neighbour made a
    64x64 GEMM look 12x less efficient than a 7x7 one)."""
    from neighbours import start_neighbours, stop_neighbours

    from tunelab.core.session.loop import create_session
    from tunelab.core.trust import shapes as shapes_module

    store = Store(tmp_path / "tunelab.sqlite")
    source = create_session(store, small_spec(shape=BASE, tuner="random", trials=4, batch=4))
    list(source.run())
    measured: list[tuple[str, float | None]] = []
    real_measure = shapes_module._Carrier.measure

    def measure_with_a_planted_neighbour(self, shape, schedules):
        pids = start_neighbours() if not measured else []
        try:
            results = real_measure(self, shape, schedules)
        finally:
            stop_neighbours(pids)
        ok = results[0].status == "ok"
        measured.append((format_shape(shape), float(np.median(results[0].samples_ms)) if ok else None))
        return results

    monkeypatch.setattr(shapes_module._Carrier, "measure", measure_with_a_planted_neighbour)
    report = across_shapes(store, source.session_id, "M=32", options=FAST_MEASURE)
    own, other = format_shape(BASE), format_shape(shape(M=32))
    first, again = (ms for text, ms in measured if text == own)
    print(f"\nown shape {first:.4f} ms beside the loops, {again:.4f} ms after; measured: {measured}")
    unsettled = max(first, again) > shapes_module.SETTLED * min(first, again)
    assert [text for text, _ in measured] == [own, other, own] + ([other] if unsettled else [])
    assert report.source.latency_ms == min(first, again)
    assert report.rows[0].latency_ms == min(ms for text, ms in measured if text == other)
    row = report.rows[0]
    assert (row.falls_off, list(row.reasons)) == judge(
        row.ratio_to_tuned, row.gflops, report.source.reference_gflops
    )
    store.close()


class _PlantedFigures:
    """Rows with planted latencies, in the order the bracket asks for them: the decision alone."""

    def __init__(self, figures: dict[str, list[float]]):
        self.figures = figures
        self.asked: list[str] = []

    def row(self, shape_dict):
        text = format_shape(shape_dict)
        self.asked.append(text)
        return ShapeRow(shape=shape_dict, shape_text=text, latency_ms=self.figures[text].pop(0))


@pytest.mark.parametrize(
    ("own_again", "expect_again"),
    [(0.011, False), (0.0125, False), (0.040, True)],  # 1.1x and 1.25x: settled; 4x: the machine changed
)
def test_the_own_shape_brackets_the_others_and_a_changed_machine_measures_them_again(own_again, expect_again):
    from tunelab.core.trust.shapes import SETTLED, _bracketed

    own, m16, m32 = BASE, shape(M=16), shape(M=32)
    figures = _PlantedFigures({format_shape(m16): [0.009], format_shape(m32): [0.002]})
    figures.figures[format_shape(own)] = [own_again]
    first = ShapeRow(shape=own, shape_text=format_shape(own), latency_ms=0.010)
    others = {
        format_shape(m): ShapeRow(shape=m, shape_text=format_shape(m), latency_ms=ms)
        for m, ms in ((m16, 0.005), (m32, 0.003))
    }
    source, kept = _bracketed(figures, own, first, others)
    assert source.latency_ms == 0.010  # the faster of its two
    assert (own_again / 0.010 > SETTLED) == expect_again
    if expect_again:  # each other shape measured once more, keeping its faster figure
        assert figures.asked == [format_shape(own), format_shape(m16), format_shape(m32)]
        assert {t: r.latency_ms for t, r in kept.items()} == {
            format_shape(m16): 0.005,
            format_shape(m32): 0.002,
        }
    else:
        assert figures.asked == [format_shape(own)] and kept == others
    # a failed own shape gives no bracket to read
    failed = ShapeRow(shape=own, shape_text=format_shape(own), status="wrong_result")
    figures = _PlantedFigures({format_shape(own): [0.010]})
    source, kept = _bracketed(figures, own, failed, others)
    assert figures.asked == [format_shape(own)] and source.latency_ms == 0.010 and kept == others

"""The pure parts of the kernel benchmark suite (tests/benchmarks/suite): the schedule describer on real
MetaSchedule schedules of a small GEMM, and the renderer of BENCHMARKS.md's kernel tables."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from benchmarks.suite.describe import describe_schedule
from benchmarks.suite.tables import SECTIONS, render_text

from tunelab.core.search.space.factory import make_space
from tunelab.core.target.info import llvm_target
from tunelab.core.workloads.catalog import get_workload


@pytest.fixture(scope="module")
def gemm_space():
    workload = get_workload("gemm")
    shape = workload.parse_shape({"M": 64, "N": 64, "K": 64}, complete=True)
    return make_space(workload, shape, "float32", llvm_target(), "auto", None)


def _trace(sch):
    return json.loads(json.dumps(sch.trace.as_json(remove_postproc=False), default=lambda o: o.value))


def test_the_describer_reads_tiles_parallel_vectorize_and_unroll_off_a_metaschedule_schedule(gemm_space):
    rng = np.random.default_rng(3)
    described = 0
    for _ in range(6):
        config = gemm_space.sample(rng)
        try:
            sch = gemm_space.schedule(config)
        except Exception:  # noqa: BLE001 - a sampled point the postprocessors reject says nothing here
            continue
        facts = describe_schedule(gemm_space.ir_module(), _trace(sch))
        # every original loop of the GEMM is tiled, and its factors multiply to its extent
        assert set(facts.tiles) == {"i", "j", "k"}
        assert all(math.prod(f) == 64 for f in facts.tiles.values())
        assert facts.unroll_max_step in (0, 16, 64, 512)
        for loop, extent in facts.parallel:
            # the parallel loop fuses outer tile levels: its extent is the product of their factors
            levels = [part.split(".") for part in loop.split("*")]
            assert extent == math.prod(facts.tiles[axis][int(level)] for axis, level in levels)
        words = facts.words()
        assert words.startswith("tiles i ") and "x".join(map(str, facts.tiles["j"])) in words
        if facts.vectorize:
            assert f"vectorizes {facts.vectorize[0][1]}" in words
        described += 1
    assert described >= 3


def _doc(tier: str) -> dict:
    figure = {"median_ms": 2.0, "gflops": 100.0, "round_medians_ms": [2.0, 2.1], "correct": True}
    schedule = {"packed": [], "cache_writes": [], "parallel": [["i.0", 3]], "vectorize": [["j.3", 8]]}
    run = {"wall_s": 100.0, "build_s": 30.0, "run_s": 50.0, "n_trials": 64, "n_ok": 63}
    return {
        "tier": tier,
        "command": f"python tests/benchmarks/run_suite.py --tier {tier}",
        "date": "2026-12-01",
        "suite_wall_s": 600,
        "machine": {
            "cores": 2,
            "cpu_model": "AMD EPYC",
            "target": "CPU znver3 · AVX2+FMA, 2 cores",
            "gpu": "none",
            "tvm": "0.27.0.post1",
            "python": "3.11.7",
            "load_avg_start": [0.5],
            "load_avg_end": [1.5],
        },
        "cases": [
            {
                "case": {
                    "name": "gemm_1024",
                    "workload": "gemm",
                    "shape": {"M": 1024, "N": 1024, "K": 1024},
                    "budget": 64,
                    "checkpoints": [64],
                    "seeds": [0],
                    "raw": True,
                    "goals": {"64": 0.5},
                },
                "runs": [
                    {
                        "tool": "tunelab",
                        "seed": 0,
                        **run,
                        "checkpoints": {"64": {"description": "tiles i 4x8", "schedule": schedule}},
                    },
                    {"tool": "tune_tir", "seed": 0, **run, "wall_s": 200.0, "checkpoints": {}},
                ],
                "remeasured": {
                    "figures": {
                        "tunelab_s0_64": figure,
                        "tune_tir_s0_64": {**figure, "median_ms": 3.0},
                        "vendor": {**figure, "median_ms": 1.0, "gflops": 200.0},
                    },
                    "vendor": {"library": "NumPy + openblas"},
                },
            }
        ],
    }


def test_the_renderer_fills_each_section_between_its_markers_and_leaves_the_rest():
    text = "# Benchmarks\nintro\n" + "".join(
        f"## {name}\n<!-- suite:{name}:begin -->\nold\n<!-- suite:{name}:end -->\nafter {name}\n"
        for name in SECTIONS
    )
    out = render_text(text, {"quick": _doc("quick")})
    assert out.startswith("# Benchmarks\nintro\n") and "old" not in out
    for name in SECTIONS:
        assert f"after {name}" in out
    # quality: 100 GFLOP/s, vendor 1 ms / ours 2 ms = 0.50 x, goal 0.5 met, the schedule in words
    assert "| GEMM 1024x1024x1024 | 64 | 100.0 | 0.50 | ≥ 0.5: met |" in out
    assert "tiles i 4x8" in out and "does not divide over 2 cores" in out
    # vs raw: 3 ms / 2 ms = 1.50, wall 100 / 200 = 0.50
    assert "| 2.000 | 3.000 | 1.50 | 100 | 200 | 0.50 | met |" in out
    # overhead: 100 - 30 - 50 = 20 s outside, 313 ms a trial, 80 % measuring
    assert "| 100.0 | 30.0 | 50.0 | 20.0 | 312 | 80 % |" in out
    assert render_text(out, {"quick": _doc("quick")}) == out  # rendering again changes nothing


def test_the_renderer_refuses_a_document_without_its_markers():
    with pytest.raises(ValueError, match="suite:quality:begin"):
        render_text("# Benchmarks\n", {})


def test_the_command_line_shortens_a_case_and_runs_a_probe_only_when_named():
    import argparse

    from benchmarks.run_suite import _override
    from benchmarks.suite.cases import TIERS

    skinny = next(c for c in TIERS["quick"] if c.name == "gemm_skinny")
    # the quick tier runs the pack_inputs variant; probes run only when named
    assert set(skinny.variants) == {"pack_inputs"} and "warmup100" in skinny.probes
    args = argparse.Namespace(budget=32, seeds="0,1,2", variant=["warmup100"], no_raw=False)
    short = _override(skinny, args)
    assert (short.budget, short.checkpoints, short.seeds) == (32, (32,), (0, 1, 2))
    assert short.goals == {}  # the 1000-trial goal does not apply to a 32-trial run
    assert short.variants == {"warmup100": skinny.probes["warmup100"]}
    same = _override(skinny, argparse.Namespace(budget=None, seeds=None, variant=[], no_raw=False))
    assert same == skinny
    assert not _override(skinny, argparse.Namespace(budget=None, seeds=None, variant=[], no_raw=True)).raw


def test_a_case_rerun_on_its_own_is_headed_by_the_command_that_measured_it():
    from benchmarks.suite.tables import header

    doc = _doc("long")
    assert header(doc).startswith("*long tier*, `python tests/benchmarks/run_suite.py --tier long`, ")
    short = "python tests/benchmarks/run_suite.py --tier long --case gemm_1024 --seeds 0 --out F"
    doc["cases"] = [{**doc["cases"][0], "command": short}, {**doc["cases"][0], "command": doc["command"]}]
    assert f"`{short}`, `{doc['command']}`, " in header(doc)

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
                        "checkpoints": {
                            "64": {"description": "tiles i 4x8", "schedule": schedule, "trial_index": 40}
                        },
                        "elapsed_s": [1.5 * (i + 1) for i in range(64)],
                    },
                    {
                        "tool": "tune_tir",
                        "seed": 0,
                        **run,
                        "wall_s": 200.0,
                        "checkpoints": {},
                        # by tunelab's 100 s tune_tir had measured 24 trials
                        "equal_wall": {"seconds": 100.0, "trials": 24},
                    },
                ],
                "remeasured": {
                    "figures": {
                        "tunelab_s0_64": figure,
                        "tune_tir_s0_64": {**figure, "median_ms": 3.0},
                        "tune_tir_s0_wall": {**figure, "median_ms": 5.0},
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
    # at tunelab's 100 s tune_tir's best of its first 24 trials: 5 ms / 2 ms = 2.50, faster
    assert (
        "| equal wall time: 100 s (tune_tir 24 trials) | 1 | 2.000 | 5.000 | 2.50 | 100 | 100 | 1.00 | met; "
        "faster in 1 of 1 seeds |" in out
    )
    # overhead: 100 - 30 - 50 = 20 s outside, 313 ms a trial, 80 % measuring
    assert "| 100.0 | 30.0 | 50.0 | 20.0 | 312 | 80 % |" in out
    assert render_text(out, {"quick": _doc("quick")}) == out  # rendering again changes nothing


def test_the_equal_wall_row_takes_tunelabs_best_only_if_it_was_in_hand_when_tune_tir_finished():
    from benchmarks.suite.tables import equal_wall_row

    case = _doc("quick")["cases"][0]
    tunelab, raw = case["runs"]
    # tune_tir finished first (60 s): tunelab's best trial (#41) was in hand at 61.5 s, so it has no figure
    tunelab["wall_s"], raw["equal_wall"] = 100.0, {"seconds": 60.0, "trials": 64}
    assert "| 1 | – | 5.000 | – |" in equal_wall_row(case)
    tunelab["checkpoints"]["64"]["trial_index"] = 30  # in hand at 46.5 s: its figure stands at 60 s
    assert "| 1 | 2.000 | 5.000 | 2.50 |" in equal_wall_row(case)
    # tune_tir had no trial by tunelab's end: tunelab's kernel is the only one, which counts as faster
    tunelab["wall_s"], raw["equal_wall"] = 10.0, {"seconds": 10.0, "trials": 0}
    del case["remeasured"]["figures"]["tune_tir_s0_wall"]
    assert "| – | – | 10 | 10 | 1.00 | met; in 1 of 1 seeds tune_tir had no trial yet |" in equal_wall_row(
        case
    )


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


@pytest.mark.slow  # MetaSchedule tunes for real: 27 s
def test_tune_tirs_trials_are_stamped_as_they_come_and_its_best_within_a_wall_time_is_built(tmp_path):
    """The real job: plain tune_tir with the suite's measure callback, then its best by a given time."""
    import subprocess
    import sys
    from pathlib import Path

    job = {
        "label": "stamps",
        "tool": "tune_tir",
        "workload": "gemm",
        "shape": {"M": 32, "N": 32, "K": 32},
        "budget": 4,
        "batch": 2,
        "seed": 0,
        "checkpoints": [4],
        "measure": {"number": 1, "repeat": 1, "min_repeat_ms": 0, "timeout_s": 60.0},
        "folder": str(tmp_path / "run"),
        "equal_wall_s": 1e6,  # longer than the run: the best by then is the best of all four
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "suite" / "tune_job.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "job.json"), str(tmp_path / "out.json")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    elapsed = out["elapsed_s"]
    # one stamp per committed record, two batches of two: each batch's pair shares its stamp
    assert len(elapsed) == out["n_trials"] == 4
    assert elapsed[0] == elapsed[1] < elapsed[2] == elapsed[3] <= out["wall_s"]
    assert out["equal_wall"] == {"seconds": out["wall_s"], "trials": 4}
    assert out["checkpoints"]["wall"]["trial_index"] == out["checkpoints"]["4"]["trial_index"]
    assert Path(out["checkpoints"]["wall"]["library"]).is_file()


def test_a_stored_case_is_rebuilt_from_its_traces_and_remeasured_without_tuning(tmp_path, gemm_space):
    """--remeasure: the kernels a run stored (as traces) are rebuilt and timed against the vendor again in a
    fresh process; the runs stay as they were, and the case says what re-measured it."""
    from benchmarks.run_suite import main

    rng = np.random.default_rng(5)
    traces = []
    while len(traces) < 2:
        try:
            traces.append(_trace(gemm_space.schedule(gemm_space.sample(rng))))
        except Exception:  # noqa: BLE001 - a sampled point the postprocessors reject
            continue
    doc = _doc("tiny")
    case = doc["cases"][0]
    case["case"] = {
        **case["case"],
        "name": "gemm_128",
        "shape": {"M": 64, "N": 64, "K": 64},
        "checkpoints": [4, 8],
    }
    case["runs"] = [
        {**case["runs"][0], "checkpoints": {"4": {"trace": traces[0]}, "8": {"trace": traces[1]}}}
    ]
    out = tmp_path / "tiny.json"
    out.write_text(json.dumps(doc))

    # bad input: one line each, the file untouched
    for argv in (
        ["--tier", "tiny", "--remeasure", "--out", str(out)],
        ["--tier", "tiny", "--case", "nope", "--remeasure", "--out", str(out)],
    ):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
    assert json.loads(out.read_text()) == doc

    assert main(["--tier", "tiny", "--case", "gemm_128", "--remeasure", "--out", str(out)]) == 0
    redone = json.loads(out.read_text())["cases"][0]
    assert redone["runs"] == case["runs"]  # nothing tuned again
    figures = redone["remeasured"]["figures"]
    assert set(figures) == {"tunelab_s0_4", "tunelab_s0_8", "vendor"}
    for label in ("tunelab_s0_4", "tunelab_s0_8"):
        assert figures[label]["correct"] and figures[label]["median_ms"] > 0
    assert figures["vendor"]["median_ms"] > 0
    assert redone["remeasure"]["command"].endswith("--case gemm_128 --remeasure --out " + str(out))

    from benchmarks.suite.tables import header

    assert (
        "Re-measured from the stored traces, nothing tuned again: `python tests/benchmarks/run_suite.py"
        in header(json.loads(out.read_text()))
    )


def test_a_schedule_that_reads_its_inputs_through_global_caches_is_not_said_to_skip_packing():
    from benchmarks.suite.tables import differences

    plain = {"packed": [], "cache_reads": [], "cache_writes": ["C (global)"], "vectorize": [["j.3", 16]]}
    assert differences(plain, 2) == "no packing of the inputs into panels (BLAS packs A and B)"
    panels = {**plain, "cache_reads": ["C input 0 (global)", "C input 1 (global)"]}
    assert differences(panels, 2) == "–"


def test_one_remeasure_command_of_several_cases_is_said_once_with_their_load_range():
    from benchmarks.suite.tables import header

    doc = _doc("long")
    command = "python tests/benchmarks/run_suite.py --tier long --case a --case b --remeasure"
    doc["cases"] = [
        {**doc["cases"][0], "remeasure": {"command": command, "date": "2026-12-04", "load_avg": [0.5, 0.4]}},
        {**doc["cases"][0], "remeasure": {"command": command, "date": "2026-12-04", "load_avg": [0.5, 0.9]}},
    ]
    said = header(doc)
    assert said.count(command) == 1
    assert said.endswith(f"nothing tuned again: `{command}` (2026-12-04, load average 0.4–0.9).")

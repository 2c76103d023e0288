"""A vendor ratio that cannot be believed says so (issue 25: "986.91x vendor" in green for a 64x64x512
GEMM, NumPy timed at 54.72 ms on a loaded machine, 0.066 ms alone): a vendor timed while other processes
took the cores, or a ratio outside 0.02-50x, carries a doubt that the CLI and the app show, with the way
to measure it again. Real NumPy timings, real planted neighbours, a real store."""

from __future__ import annotations

from dataclasses import replace

import pytest
from neighbours import start_neighbours, stop_neighbours
from specs import small_spec

from tunelab.core.cli.main import main as cli_main
from tunelab.core.records import MeasureOptions
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.trust.baselines import PLAUSIBLE_X, baseline_for, measure_baseline

QUIET = {"share": 0.0, "busy_pids": [], "names": {}}


@pytest.fixture(scope="module")
def gemm_session(tmp_path_factory):
    path = tmp_path_factory.mktemp("doubt") / "tunelab.sqlite"
    store = Store(path)
    session = create_session(store, small_spec(trials=4))
    list(session.run())
    yield store, session.session_id
    store.close()


@pytest.mark.serial
def test_a_vendor_timed_among_planted_neighbours_records_their_share():
    options = MeasureOptions(number=20, repeat=10, min_repeat_ms=20)
    planted = start_neighbours()
    try:
        baseline = measure_baseline("gemm", {"M": 64, "N": 64, "K": 512}, "float32", "llvm", options)
    finally:
        stop_neighbours(planted)
    neighbours = baseline.measure["neighbours"]
    # Two loops per core beside NumPy's threads take about two thirds of the cores on a quiet machine,
    # more with other work about: which processes are busiest (and named) depends on that other work.
    assert neighbours["share"] >= 0.25


def test_a_ratio_outside_the_plausible_band_or_a_busy_vendor_is_doubted(gemm_session):
    store, sid = gemm_session
    record = store.session(sid)
    measured = baseline_for(store, record)
    assert measured is not None
    quiet = replace(measured.baseline, measure={**measured.baseline.measure, "neighbours": QUIET})
    # within the band, timed on a quiet machine: nothing against it
    plausible = replace(measured, baseline=quiet, x_of_vendor=1.3)
    assert plausible.doubt is None
    implausible = replace(plausible, x_of_vendor=986.91)
    assert "986.91x is outside 0.02-50x" in implausible.doubt
    assert "outside" in replace(plausible, x_of_vendor=PLAUSIBLE_X[0] / 2).doubt
    busy = {"share": 0.8, "busy_pids": [4242], "names": {"4242": "stress"}}
    crowded = replace(plausible, baseline=replace(quiet, measure={**quiet.measure, "neighbours": busy}))
    assert crowded.doubt.startswith(
        "the vendor was timed while other processes took 80% of the cores (pid 4242)"
    )


def test_the_cli_warns_and_says_how_to_measure_again(gemm_session, capsys):
    store, sid = gemm_session
    record = store.session(sid)
    kept = baseline_for(store, record).baseline
    # the figure: the vendor stored 1000x slower than it runs, as among busy neighbours
    store.put_baseline(
        replace(kept, median_ms=record.best_ms * 1000, measure={**kept.measure, "neighbours": QUIET})
    )
    assert cli_main(["baseline", str(sid), "--db", str(store.path)]) == 0
    out = capsys.readouterr().out
    assert "-> 1000.00x of vendor" in out
    assert "warning: 1000.00x is outside 0.02-50x" in out and f"tunelab baseline {sid} --remeasure" in out
    assert cli_main(["baseline", str(sid), "--remeasure", "--db", str(store.path)]) == 0
    again = store.baseline(record.workload, record.shape, record.dtype, "llvm")
    # measured again: the stored figure replaced (its size beside a busy neighbour is the machine's to say)
    assert again.measured_at > kept.measured_at and again.median_ms != record.best_ms * 1000

"""`tunelab jitter` with a real tuned session, real worker processes and real SQLite: each cause that can be
planted on a CPU (a busy neighbour, a placement-sensitive layout, a shape the schedule does badly on) is
planted, and the report must name it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest
from cli_runs import run_tunelab
from confirming import finished_in_file
from neighbours import start_neighbours, stop_neighbours
from specs import small_spec

from tunelab.core.export.files import export_trial
from tunelab.core.faults import PLANT_ENV
from tunelab.core.records import MeasureOptions
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.trust.jitter import CAUSES, JitterReport
from tunelab.core.usecases.jitter import jitter_report

# serial: every test here judges real kernels against each other (layouts, shapes, a planted neighbour);
# beside the other lane's worker, the own shape read 12x slower per FLOP than the planted awkward one (CI)
pytestmark = [pytest.mark.slow, pytest.mark.serial]

SPEC = small_spec(
    shape={"M": 64, "N": 64, "K": 256},
    measure=MeasureOptions(number=2, repeat=3, min_repeat_ms=5, cooldown_s=0, confirm_runs=0),
)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A finished GEMM M=N=64, K=256 session (8 random trials) and its database path."""
    path = tmp_path_factory.mktemp("jitter") / "tunelab.sqlite"
    return path, finished_in_file(path, SPEC)


def test_a_neighbour_that_arrives_mid_way_is_named_with_its_pid(tuned):
    path, sid = tuned
    store = Store(path)
    pids: list[int] = []

    def progress(done: int, _total: int, _text: str) -> None:
        if done == 2 and not pids:  # runs 3..5 share the machine with one busy process per core
            pids.extend(start_neighbours())
            time.sleep(2.5)  # psutil needs two process scans (1 s apart) to see them busy

    started = time.monotonic()
    try:
        report = jitter_report(store, sid, runs=5, on_progress=progress)
    finally:
        stop_neighbours(pids)
    print(f"\n{time.monotonic() - started:.1f} s: {report.headline}")
    cause = report.cause("neighbours")
    assert "neighbours" in report.explaining, report.to_json()
    assert set(pids) & set(cause.evidence["pids"]), (pids, cause.evidence)
    assert any(f"pid {p} (" in cause.sentence for p in pids), cause.sentence
    assert cause.evidence["busy_runs"] >= 2 and cause.share > cause.tolerance
    # the validation behind it is stored, as validations are
    assert report.validation_id is not None and store.validation(report.validation_id)["source"]["top_k"] == 1
    store.close()


def test_a_planted_slow_layout_is_named_placement(tuned, monkeypatch):
    path, sid = tuned
    store = Store(path)
    monkeypatch.setenv(PLANT_ENV, "slowlayout@aligned")  # executed by the real worker processes
    report = jitter_report(store, sid, runs=3)
    print("\n" + report.headline)
    cause = report.cause("placement")
    assert "placement" in report.explaining, report.to_json()
    assert cause.evidence["worst_layout"] == "aligned" and cause.evidence["recorded_layout"] == "staggered"
    # The planted layout runs its kernel four times per timed call, so it is about 4x its own unplanted time.
    # The unplanted layouts differ from each other on their own (staggered ran 1.5-1.8x plain with some
    # random trials of this 0.015 ms kernel), so the share against the recorded layout varies with the trial
    # kept (+126 % to +292 % seen); against the fastest layout the plant shows as about 4x.
    ratios = cause.evidence["ratios"]
    assert cause.share > cause.tolerance, cause.evidence
    planted = ratios["aligned"] / min(ratios.values())
    assert planted > 2.5, cause.evidence
    # How far above 4x depends on the machine: beside busy neighbours the planted runs scattered (CV 81 %
    # of their ratios) and one read 62x. Bounded above only when the runs agreed (the measured noise floor).
    if (cause.evidence.get("ratio_cv") or 0.0) <= 0.25:
        assert planted < 6.0, cause.evidence
    assert "laid out aligned" in cause.sentence
    assert set(report.layouts) >= {"staggered", "aligned"}
    store.close()


def test_an_awkward_shape_is_named(tuned):
    path, sid = tuned
    store = Store(path)
    report = jitter_report(store, sid, runs=3, shapes="M=7,N=7")
    print("\n" + report.headline)
    cause = report.cause("shape")
    assert "shape" in report.explaining, report.to_json()
    # how much slower per FLOP 7x7 is depends on the random trial kept (+64 % to +190 % seen): named is the point
    assert cause.evidence["slowest"] == "M=7,N=7,K=256" and cause.share > cause.tolerance
    assert report.shapes == ("M=64,N=64,K=256", "M=7,N=7,K=256")
    assert "GFLOP/s" in cause.sentence
    # the session has predictions: the cost model is judged, per shape
    assert report.cause("cost_model").evidence.get("shapes")
    store.close()


def tunelab(*args: str, db, env=None) -> subprocess.CompletedProcess:
    return run_tunelab(*args, "--db", str(db), timeout=300, env=env)


def test_cli_jitter_json_text_and_bad_input(tuned, tmp_path):
    path, sid = tuned
    env = dict(os.environ, **{PLANT_ENV: "slowlayout@aligned"})
    proc = tunelab("jitter", str(sid), "--runs", "2", "--json", db=path, env=env)
    assert proc.returncode == 0, proc.stderr
    report = JitterReport.from_json(json.loads(proc.stdout))
    assert [c.name for c in report.causes] == list(CAUSES) and report.source["session_id"] == sid
    assert "placement" in report.explaining and "[2/2] run 2/2" in proc.stderr
    text = tunelab("jitter", str(sid), "--runs", "1", db=path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == text.stdout.splitlines()[0].strip()  # the headline first
    assert (
        "buffer placement" in text.stdout
        and "input shape" in text.stdout
        and "stored as validation" in text.stdout
    )
    before = Store(path).validations(sid)
    for args, words in (
        (("jitter", "999"), "session 999"),
        (("jitter", str(sid), "--runs", "0"), "--runs"),
        (("jitter", str(sid), "--shapes", "Q=3"), "Q"),
        (("jitter", str(tmp_path / "missing.schedule.json")), "does not exist"),
    ):
        bad = tunelab(*args, db=path)
        assert bad.returncode == 2 and bad.stdout == "", (args, bad.stderr)
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, bad.stderr)
    assert Store(path).validations(sid) == before  # bad input stored nothing
    fresh = tmp_path / "fresh.sqlite"
    bad = tunelab("jitter", str(tmp_path / "missing.schedule.json"), db=fresh)
    assert bad.returncode == 2 and not fresh.exists()
    # an exported schedule file: its validation is stored in the store named, created for it
    schedule = export_trial(Store(path), sid, out_dir=tmp_path / "export", formats=("schedule",))["schedule"]
    bad = tunelab("jitter", str(schedule), "--shapes", "M=8", db=fresh)
    assert bad.returncode == 2 and "need a SESSION" in bad.stderr and not fresh.exists()
    proc = tunelab("jitter", str(schedule), "--runs", "1", "--json", db=fresh)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["source"]["kind"] == "file" and doc["validation_id"] is not None
    assert Store(fresh).validation(doc["validation_id"])["source"]["kind"] == "file"
    assert "no predictions" in JitterReport.from_json(doc).cause("cost_model").sentence


def test_the_story_replayed_a_figure_confirmed_beside_a_neighbour_names_it_later(tmp_path):
    """Issue 15's story: the stated figure was confirmed while another user's jobs ran; later, on a quiet
    machine, the kernel runs differently. The report names the recording's neighbours by pid."""
    from tunelab.core.trust.confirm import confirm_session

    store = Store(tmp_path / "t.sqlite")
    session = create_session(store, SPEC)
    for _ in session.run():
        pass
    sid = session.session_id
    pids = start_neighbours()
    try:
        time.sleep(0.5)
        (confirmation,) = confirm_session(store, sid, top_k=1, runs=2, max_s=0)
    finally:
        stop_neighbours(pids)
    assert set(pids) & set(confirmation.schedules[0].other_busy_pids)
    report = jitter_report(store, sid, runs=3)
    print(f"\n{report.headline}")
    cause = report.cause("neighbours")
    if not cause.evidence.get("quiet_runs"):
        # Other users kept every later run busy too (a shared machine; the recording's planted neighbours
        # are in the stored confirmation, asserted above). Either the report blames the neighbours it sees
        # now, by pid, or, with the same processes busy in every run and no quiet figure recorded, it
        # names them and says it cannot tell: measure again on a quiet machine.
        if "neighbours" in report.explaining:
            assert cause.evidence["pids"] and any(
                f"pid {p}" in report.headline for p in cause.evidence["pids"]
            )
        else:
            assert "measure again on a quiet machine" in cause.sentence, cause.sentence
            assert re.search(r"pid \d+ \(", cause.sentence), cause.sentence
        store.close()
        return
    assert "neighbours" in report.explaining, report.to_json()
    assert set(pids) & set(cause.evidence["pids"]), (pids, cause.evidence)
    # The headline names the first few busy processes; on a shared machine other users' may come first.
    assert "was measured while" in cause.sentence
    assert any(f"pid {p}" in report.headline for p in cause.evidence["pids"])
    store.close()

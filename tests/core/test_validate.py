"""`tunelab.core.trust.remeasure` and `tunelab validate` with real TVM sessions, real worker processes and a real noisy
neighbour (busy-loop processes that are not ours)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest
from cli_runs import run_tunelab
from confirming import finished_in_file
from neighbours import start_neighbour
from specs import small_spec

from tunelab.core.errors import TunelabError
from tunelab.core.export.files import export_trial
from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.trust.remeasure.api import validate_schedule_file, validate_session
from tunelab.core.trust.remeasure.report import VERDICTS
from tunelab.core.trust.remeasure.verdict import DISTURBED_FRACTION
from tunelab.core.usecases.tuning import confirm_when_finished

pytestmark = pytest.mark.slow

SMALL = small_spec(
    shape={"M": 64, "N": 64, "K": 64},
    # no cool-down wait before batches: this session only feeds the tests below
    measure=MeasureOptions(number=2, repeat=3, min_repeat_ms=5, cooldown_s=0, confirm_runs=0),
)

# Four decent 256^3 GEMM configs (blocked, vectorized, parallel: ~0.3 ms each here), so that the
# session spends its time measuring well rather than timing kernels 50x slower.
DECENT_256 = {
    "kind": "template",
    "knobs": [
        {"name": "tile_i", "type": "split", "axis": "i", "parts": 2, "candidates": [[16], [32]]},
        {"name": "tile_j", "type": "split", "axis": "j", "parts": 2, "candidates": [[16], [32]]},
        {"name": "tile_k", "type": "split", "axis": "k", "parts": 2, "candidates": [[8]]},
        {"name": "order", "type": "order", "candidates": ["ro,si,ri"]},
        {"name": "unroll", "type": "choice", "candidates": [16]},
        {"name": "vectorize", "type": "choice", "candidates": [True]},
        {"name": "parallel", "type": "choice", "candidates": [True]},
    ],
}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A finished 64^3 GEMM session (8 random trials) and its database path."""
    path = tmp_path_factory.mktemp("validate") / "tunelab.sqlite"
    return path, finished_in_file(path, SMALL)


def tunelab(*args: str, db) -> subprocess.CompletedProcess:
    return run_tunelab(*args, "--db", str(db))


def content(path) -> str:
    """A digest of every row of every table (what is stored, whatever WAL checkpoints do to the file)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        h = hashlib.sha256()
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            h.update(table.encode())
            for row in sorted(map(repr, conn.execute(f"SELECT * FROM {table}"))):
                h.update(row.encode())
        return h.hexdigest()
    finally:
        conn.close()


@pytest.mark.serial
def test_planted_noisy_neighbour_is_named(tuned):
    path, sid = tuned
    store = Store(path)
    pids = [start_neighbour() for _ in range(os.cpu_count() or 2)]  # one per core: the machine is saturated
    try:
        for pid in pids:
            assert psutil.Process(pid).ppid() != os.getpid()  # not in our process tree: "another process"
        time.sleep(0.5)
        report = validate_session(store, sid, top_k=3, runs=4)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    print("\nnoisy neighbour:", report.summary)
    assert report.verdict == "noisy"
    assert "busy on the CPU" in report.cause
    assert any(f"pid {pid}," in report.cause for pid in pids), (pids, report.cause)
    best = report.schedules[0]
    assert best.busy_fraction >= 0.75 and set(pids) & set(best.other_busy_pids)
    assert all(s.verdict == "noisy" for s in report.schedules)
    # stored for the app, with one row per schedule
    stored = store.validations(sid)[0]
    assert stored["id"] == report.id and stored["verdict"] == "noisy" and stored["cause"] == report.cause
    assert [r["label"] for r in stored["results"]] == [s.label for s in report.schedules]
    assert store.validation(report.id)["summary"] == report.summary
    store.close()


def test_session_report_interleaves_fresh_processes(tuned):
    path, sid = tuned
    store = Store(path)
    trials = sorted((t for t in store.trials(sid) if t.ok), key=lambda t: (t.latency_ms, t.id))
    report = validate_session(store, sid, top_k=2, runs=3, record=False)
    assert report.verdict in VERDICTS and report.id is None and "id" not in report.to_json()
    assert [s.trial_id for s in report.schedules] == [t.id for t in trials[:2]]
    for s in report.schedules:
        assert s.runs == 3 and s.errors == () and s.remeasured_ms > 0
        assert s.recorded_ms == pytest.approx(next(t.latency_ms for t in trials if t.id == s.trial_id))
        assert len(s.samples_ms) == 3 * 3  # repeat=3 samples in each of 3 runs
        assert s.cause is None if s.verdict == "stable" else s.cause
        assert len({m.pid for m in s.measurements}) == 3  # a fresh process per run
    # round-robin with a rotating start: each schedule goes first in some process
    positions = {s.label: [m.position for m in s.measurements] for s in report.schedules}
    assert positions == {
        report.schedules[0].label: [0, 1, 0],
        report.schedules[1].label: [1, 0, 1],
    }
    first, second = report.schedules[0].measurements, report.schedules[1].measurements
    assert all(a.pid == b.pid for a, b in zip(first, second, strict=True))  # same process measures both
    # each schedule's reference kernel is its own, timed beside its window: not one per process
    assert all(a.reference_ms > 0 and b.reference_ms > 0 for a, b in zip(first, second, strict=True))
    assert all(a.reference_ms != b.reference_ms for a, b in zip(first, second, strict=True))
    # and each schedule timed again in the same process, after its other layouts
    assert all(m.again_ms > 0 and m.again_t0 > m.t1 for m in first + second)
    assert report.ranking.holds in (True, False) and len(report.ranking.recorded_order) == 2
    assert report.shapes[0].shape == SMALL.shape
    with pytest.raises(TunelabError):
        validate_session(store, 999)
    with pytest.raises(TunelabError, match="number of fresh processes must be at least 1"):
        validate_session(store, sid, runs=0)
    with pytest.raises(TunelabError, match="number of schedules to validate must be at least 1"):
        validate_session(store, sid, top_k=0)
    store.close()


def test_a_schedule_that_fails_in_its_worker_is_regressed(tuned):
    """A real failure inside the worker processes: the session's 64^3 kernel given 64x32 inputs."""
    from tunelab.core.search.space.factory import space_for_session
    from tunelab.core.trust.remeasure import api
    from tunelab.core.trust.remeasure.report import ValidationSource
    from tunelab.core.trust.remeasure.verdict import Problem, RecordedSchedule

    path, sid = tuned
    store = Store(path)
    rec = store.session(sid)
    trial = store.best_trial(sid)
    item = RecordedSchedule(
        "best",
        trial.id,
        trial.config,
        trial.latency_ms,
        tuple(trial.samples_ms),
        None,
        space_for_session(rec).schedule(trial.config),
    )
    problem = Problem(rec.workload, {"M": 64, "N": 64, "K": 32}, rec.dtype, rec.target, None, 0, rec.flops)
    report = api.validate_schedules(
        problem,
        [item],
        2,
        MeasureOptions(number=1, repeat=2, min_repeat_ms=1),
        ValidationSource("test"),
        None,
    )
    s = report.schedules[0]
    assert report.verdict == s.verdict == "regressed" and s.runs == 0 and s.runs_tried == 2
    assert s.cause.startswith("it failed in 2 of 2 runs: run error") and s.remeasured_ms is None
    store.close()


def quiet_runs(n: int, samples_ms: tuple[float, ...], *, cold_ms: float, cpu_freq_mhz: float) -> list:
    """`n` fresh-process runs that each timed `samples_ms` on a quiet machine (no busy process, no throttling),
    read from their JSON as a validation document holds them."""
    from tunelab.core.trust.remeasure.report import Measurement

    quiet = {"n": 5, "throttled": False, "cpu_freq_mhz": cpu_freq_mhz, "cpu_load_mean": 0.1}
    runs = [
        Measurement.from_json(
            {"run": r, "ok": True, "cold_ms": cold_ms, "samples_ms": list(samples_ms), "telemetry": quiet}
        )
        for r in range(n)
    ]
    assert all(m.telemetry.other_busy_pids == () and m.samples_ms == samples_ms for m in runs)
    return runs


def test_winners_curse_is_told_from_a_regression():
    """The verdict logic on given measurements: a session figure 30 % below three quiet fresh-process runs
    is a regression when no other trial of the session came close, and the winner's curse when others
    measured at or below the re-measured figure; judged against a confirmed figure it is stable."""
    from dataclasses import replace

    from tunelab.core.trust.remeasure.verdict import Problem, RecordedSchedule
    from tunelab.core.trust.remeasure.verdict import judge as judge_runs

    runs = quiet_runs(3, (0.99, 1.0, 1.0, 1.01), cold_ms=1.2, cpu_freq_mhz=3000.0)
    problem = Problem("gemm", {"M": 64, "N": 64, "K": 64}, "float32", {"kind": "llvm"}, None, 0, 2 * 64**3)

    def judge(**item):
        base = dict(
            label="best",
            trial_id=1,
            config={},
            recorded_ms=0.70,
            recorded_samples_ms=(0.7, 0.7),
            recorded_telemetry=None,
            schedule=None,
        )
        return judge_runs(RecordedSchedule(**{**base, **item}), list(runs), None, problem)

    alone = judge(rivals_ms=(1.3, 1.4))
    assert alone.verdict == "regressed" and alone.rivals == 0 and alone.recorded_kind == "session"
    lucky = judge(rivals_ms=(0.72, 0.98, 1.0, 1.3))
    assert lucky.verdict == "noisy" and lucky.rivals == 3
    assert lucky.cause.startswith("winner's curse") and "3 other trial(s)" in lucky.cause
    # the reference kernel ran 30 % slower than when 0.75 ms was recorded: the machine moved, not the schedule
    runs[:] = [replace(r, reference_ms=1.3) for r in runs]
    drifted = judge(recorded_ms=0.75, recorded_reference_ms=1.0)
    assert drifted.machine_drift == pytest.approx(1.3) and drifted.verdict == "noisy"
    assert drifted.cause.startswith("the machine itself was 30% slower")
    assert drifted.drift_corrected_ratio == pytest.approx(1.0 / 0.75 / 1.3)
    assert judge(recorded_ms=0.75).machine_drift is None  # no reference then: nothing to say
    confirmed = judge(recorded_ms=1.0, recorded_samples_ms=(1.0, 1.0), session_ms=0.70)
    assert confirmed.verdict == "stable" and confirmed.recorded_kind == "confirmed"
    assert confirmed.session_ms == 0.70


def test_a_figure_recorded_on_a_busy_machine_is_optimistic_not_regressed():
    """Issue 15's replay in numbers: a confirmation taken while a neighbour was busy (CV 16 %) stated
    33.5 ms; five quiet fresh-process runs measure 42.7 ms. Both ends compared, the recorded figure was
    optimistic; the same figures recorded on a quiet machine are a regression."""
    from tunelab.core.trust.confirmed import Confirmation
    from tunelab.core.trust.remeasure.verdict import Problem, RecordedSchedule, judge, recording_disturbance

    runs = quiet_runs(5, (42.5, 42.7, 42.7, 42.9), cold_ms=50.0, cpu_freq_mhz=2600.0)
    problem = Problem(
        "gemm", {"M": 1024, "N": 1024, "K": 1024}, "float32", {"kind": "llvm"}, None, 0, 2 * 1024**3
    )
    busy = recording_disturbance(
        what="the confirmation's runs",
        busy_pids=(4242,),
        names={"4242": "stress"},
        busy_fraction=0.6,
        cv=0.16,
    )
    expected = "pid 4242 (stress) was busy during 60% of the confirmation's runs; "
    assert busy == expected + "the confirmation's runs scattered (CV 16%)"

    def judged(disturbance):
        item = RecordedSchedule(
            label="trial 52",
            trial_id=52,
            config={},
            recorded_ms=33.5,
            recorded_samples_ms=(32.6, 33.5, 48.4),
            recorded_telemetry=None,
            schedule=None,
            session_ms=33.4,
            recorded_disturbance=disturbance,
        )
        return judge(item, list(runs), None, problem)

    optimistic = judged(busy)
    assert optimistic.verdict == "noisy"
    assert optimistic.cause.startswith("the recorded figure was optimistic: measured while pid 4242 (stress)")
    assert "27% slower" in optimistic.cause and "regress" not in optimistic.cause
    assert judged(None).verdict == "regressed"  # recorded on a quiet machine: the schedule did get slower
    # A quiet recording says nothing; a session stamp that saw another busy process or throttling does.
    assert recording_disturbance(what="the session's measurement", cv=0.02) is None
    assert (
        recording_disturbance(what="x", busy_pids=(7,), busy_fraction=0.1) is None
    )  # 10 % of the runs: quiet
    assert recording_disturbance(
        what="the session's measurement", throttled=True, throttle_reasons=("hw_slowdown",)
    )
    # The confirmation's conditions travel with it: stored, read back, handed to the export.
    c = Confirmation(33.5, (33.5,), 3, 0.16, 0.12, "noisy", 33.4, None, 7, disturbance=busy)
    assert Confirmation.from_json(c.to_json()) == c
    assert Confirmation.from_json({**c.to_json(), "disturbance": None}).disturbance is None


@pytest.mark.serial
def test_exported_schedule_reproduces_within_5_percent(tmp_path):
    """A 256^3 GEMM recorded with number=10, repeat=10, min_repeat_ms=50, exported, then re-measured in five
    fresh processes: on a quiet machine (no other busy process while recording or re-measuring, the
    confirmation's runs and the re-measurement's each agreeing within 2.5 %) the median is within 5 % of the
    recorded one. When another process was busy the figures cannot be compared; then the verdict must say so."""
    store = Store(tmp_path / "tunelab.sqlite")
    spec = SessionSpec(
        workload="gemm",
        shape={"M": 256, "N": 256, "K": 256},
        target="llvm",
        space_kind="template",
        space=DECENT_256,
        tuner="random",
        trials=4,
        batch=4,
        seed=0,
        measure=MeasureOptions(number=10, repeat=10, min_repeat_ms=50),
    )
    session = confirm_when_finished(create_session(store, spec))  # as `tunelab tune` runs it
    for _ in session.run():
        pass
    written = export_trial(store, session.session_id, out_dir=tmp_path / "out", formats=("schedule",))
    stats = json.loads(open(written["schedule"]).read())["stats"]
    best = store.trial(json.loads(open(written["schedule"]).read())["session"]["trial_id"])
    recording = store.trial_telemetry(session.session_id).get(best.id, {})
    report = validate_schedule_file(written["schedule"], store=store, runs=5)
    s = report.schedules[0]
    print(
        f"\n5% test: session {best.latency_ms:.4f} ms, confirmed {stats['median_ms']:.4f} ms "
        f"({len(stats['samples_ms'])} samples); "
        f"re-measured {s.remeasured_ms:.4f} ms (ratio {s.ratio:.4f}, cv {s.cv:.4f}); "
        f"{s.quiet_runs} quiet runs: {s.quiet_ms and round(s.quiet_ms, 4)} ms "
        f"(ratio {s.quiet_ratio and round(s.quiet_ratio, 4)}); busy pids {s.other_busy_pids}; "
        f"run medians {[round(x, 4) for x in s.run_medians_ms]}; machine drift {s.machine_drift:.3f}; "
        f"confirmation {stats['confirmed']}"
    )
    assert s.runs == 5 and s.errors == ()
    assert stats["source"] == "confirmed" and s.recorded_ms == pytest.approx(stats["median_ms"])
    assert stats["reference_ms"] > 0 and s.machine_drift == pytest.approx(
        s.reference_ms / stats["reference_ms"]
    )
    assert report.source.kind == "file" and store.validations()[0]["schedule_file"] == report.source.path
    medians = s.run_medians_ms
    # quiet: no other busy process then or now, runs that agree, and a machine as fast as when the figure was
    # recorded (the reference kernel within 3 %: a virtual machine's host has other tenants no process list shows).
    # The figure the file states is the confirmation's, so its fresh processes must agree as the re-measurement's
    # do: seen on CI and here, a confirmation whose processes disagreed by 4.1 % stated 0.1648 ms of a schedule
    # that five processes then agreed on at 0.1564 ms (the reference kernel level, 0.998).
    confirmed = stats["confirmed"]
    quiet = (
        not recording.get("other_busy_pids")
        and confirmed["disturbance"] is None
        and (confirmed["run_cv"] or 0.0) <= 0.025
        and s.quiet_runs == s.runs
        and s.run_cv <= 0.025
        and abs(s.machine_drift - 1) <= 0.03
    )
    if quiet:
        # The requirement. It used to miss by 8-13 % on quiet machines for two reasons, both fixed: the
        # session's best figure was the luckiest of close rivals (now confirmed in fresh processes, and
        # the export states that figure: tunelab.core.trust.confirm), and the buffers' placement depended on the
        # measuring process's heap history (now placed on purpose: tunelab.core.measure.placement).
        # Within 5 % as measured, or once the machine's own speed (the reference kernel, here within 3 %) is
        # taken out; and never slower than the file states by more than 5 %. Neither reading alone: on this
        # kind of VM the reference moves with the kernel only weakly (r = 0.20 run by run), so within 3 % its
        # movement is noise as often as drift. Seen on CI both ways: the machine 2.7 % faster and the schedule
        # 5.2 % faster (2.6 % once corrected); the machine 2.7 % slower and the schedule 2.8 % faster (5.3 %
        # once corrected). validate's verdict reads it the same way: the raw figure first, the correction only
        # as a cause once the reference moved beyond 3 %.
        off_raw, off_corrected = abs(s.ratio - 1), abs(s.drift_corrected_ratio - 1)
        assert min(off_raw, off_corrected) <= 0.05, (s.ratio, s.drift_corrected_ratio, medians)
        assert s.ratio <= 1.05, (s.ratio, medians, report.cause)
        assert report.verdict == "stable", (report.verdict, report.cause)
    elif s.busy_fraction >= DISTURBED_FRACTION:
        # Another process was busy during many runs: validate must not call it stable, and must name it.
        assert report.verdict == "noisy" and "busy on the CPU" in report.cause
    elif abs(s.machine_drift - 1) > 0.03:
        # The machine itself was faster or slower than when the figure was recorded (the reference kernel
        # moved; seen on CI: 3.7 % faster, the schedule 7.4 % faster). What must not be called stable is a
        # schedule that moved beyond 5 % once the machine's own drift is taken out.
        assert abs(s.drift_corrected_ratio - 1) <= 0.05 or report.verdict != "stable", (
            s.drift_corrected_ratio,
            medians,
            report.verdict,
            report.cause,
        )
    else:
        # The runs disagree among themselves (cv > 2.5 %), the re-measurement's or the confirmation's, with no
        # busy process in sight. Seen on a clean CI run: every fresh-process median 8-25 % above the session's
        # figure. Whatever the cause, tunelab must not call a drift beyond 5 % stable.
        within = min(medians) <= 1.05 * s.recorded_ms and max(medians) >= 0.95 * s.recorded_ms
        assert within or report.verdict != "stable", (medians, report.verdict, report.cause)
    store.close()


def test_cli_validate_json_and_bad_input(tuned, tmp_path):
    db, sid = tuned
    proc = tunelab("validate", str(sid), "--repeats", "2", "--top", "1", "--json", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    for key in (
        "recorded_ms",
        "remeasured_ms",
        "cv",
        "runs",
        "throttled",
        "shapes",
        "verdict",
        "cause",
        "summary",
        "schedules",
        "id",
    ):
        assert key in doc
    assert doc["runs"] == 2 and len(doc["schedules"]) == 1 and doc["verdict"] in VERDICTS
    assert doc["shapes"][0]["shape"] == SMALL.shape and doc["shapes"][0]["latency_ms"] == doc["remeasured_ms"]
    assert "[2/2] run 2/2" in proc.stderr

    # A schedule file (what a person was handed) re-measures too, and the report is stored and printed.
    exported = tunelab("export", str(sid), "--out", str(tmp_path / "export"), db=db)
    assert exported.returncode == 0, exported.stderr[-3000:]
    schedule = next((tmp_path / "export").glob("*.schedule.json"))
    proc = tunelab("validate", str(schedule), "--repeats", "1", "--json", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["source"]["kind"] == "file" and isinstance(doc["id"], int) and len(doc["schedules"]) == 1
    assert doc["verdict"] in VERDICTS
    text = tunelab("validate", str(schedule), "--repeats", "1", db=db)
    assert text.returncode == 0, text.stderr[-3000:]
    verdict_line, schedule_line = text.stdout.splitlines()[:2]
    assert (
        verdict_line.split(":")[0] in VERDICTS
        and "re-measured" in schedule_line
        and "runs 1" in schedule_line
    )

    store = Store(db)
    n_before = len(store.validations())
    store.close()
    corrupt = tmp_path / "corrupt.schedule.json"
    corrupt.write_text("{ not json")
    foreign = tmp_path / "foreign.schedule.json"
    foreign.write_text(json.dumps({"hello": 1}))
    bad = [
        (["validate", "999"], "session 999 does not exist"),
        (["validate", str(tmp_path / "missing.schedule.json")], "does not exist"),
        (["validate", str(corrupt)], "is not valid JSON"),
        (["validate", str(foreign)], "is not a tunelab schedule file"),
        (["validate", str(sid), "--shapes", "Q=4"], "unknown"),
    ]
    fresh = tmp_path / "fresh.sqlite"  # a database that does not exist yet: bad input must not create it
    bad.append((["validate", str(corrupt), "--db", str(fresh)], "is not valid JSON"))
    before = content(db)
    procs = [
        (
            args,
            message,
            subprocess.Popen(
                [sys.executable, "-m", "tunelab", *args, *([] if "--db" in args else ["--db", str(db)])],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
        for args, message in bad
    ]
    for args, message, proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        lines = stderr.strip().splitlines()
        assert proc.returncode == 2, (args, stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("tunelab: error:") and message in lines[0], (
            args,
            lines,
        )
        assert stdout == ""
    assert content(db) == before and not fresh.exists()
    store = Store(db)
    assert len(store.validations()) == n_before
    store.close()

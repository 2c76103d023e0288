"""The `tunelab` command line through real subprocesses (the contract in shared/DESIGN.md)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from cli_runs import run_tunelab, tune_gemm
from specs import small_spec

from tunelab.core.workloads.catalog import WORKLOADS

pytestmark = pytest.mark.slow


def tunelab(*args: str, db=None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if db is not None:
        env["TUNELAB_DB"] = str(db)
    return run_tunelab(*args, timeout=timeout, env=env)


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "cli.sqlite"
    runs = []
    for tuner, confirm in (
        ("xgb", ["--confirm-max-s", "0"]),
        ("random", ["--confirm-runs", "0"]),
    ):  # the first one confirms (default runs; one attempt: measuring again has its own test)
        proc = tunelab(
            *tune_gemm(
                *confirm,
                "--json",
                trials=6,
                batch=3,
                target="llvm",
                tuner=tuner,
                number=1,
                repeat=2,
                min_repeat_ms=1,
            ),
            db=db,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append((proc.stdout, proc.stderr))
    return db, runs


def test_tune_json_and_progress(tuned_db):
    _, runs = tuned_db
    stdout, stderr = runs[0]
    doc = json.loads(stdout)  # stdout is exactly one JSON document
    assert doc["session_id"] == 1 and doc["trials"] == 6
    assert doc["measured"] + doc["failed"] == 6
    assert doc["best_ms"] > 0 and doc["best_gflops"] > 0
    assert "ETA" in stderr and "6/6 trials" in stderr
    # finished: the 3 fastest were re-measured in 3 fresh processes and stored as a validation
    assert "confirming the 3 fastest schedule(s) in 3 fresh processes" in stderr
    (confirmation,) = doc["confirmations"]
    assert confirmation["runs"] == 3 and len(confirmation["schedules"]) == 3 and confirmation["validation_id"]
    assert all(s["remeasured_ms"] > 0 for s in confirmation["schedules"])
    assert json.loads(runs[1][0])["confirmations"] == []


def test_sessions_show_compare(tuned_db):
    db, _ = tuned_db
    sessions = json.loads(tunelab("sessions", "--json", db=db).stdout)
    assert [(s["id"], s["status"]) for s in sessions] == [(2, "finished"), (1, "finished")]
    show = json.loads(tunelab("show", "1", "--json", "--trials", db=db).stdout)
    assert show["id"] == 1 and len(show["trials_list"]) == 6 and show["best_trial"]["config"]
    assert len(show["confirmed"]) == 3 and all(c["runs"] == 3 for c in show["confirmed"])
    assert json.loads(tunelab("show", "2", "--json", db=db).stdout)["confirmed"] == []
    text = tunelab("show", "1", db=db).stdout
    assert "confirmed: trial" in text
    # what an export would state, with the placement figures of the trial it picks
    export = show["export"]
    assert f"export states trial #{export['trial_number']}: " in text
    assert set(export["placement"]["layout_ms"]) == {"staggered", "aligned", "plain"}
    assert ("placement-sensitive" in text.lower()) == export["placement"]["sensitive"]
    table = tunelab("sessions", db=db).stdout
    assert "finished" in table and "gemm" in table
    cmp = json.loads(tunelab("compare", "1", "2", "--json", db=db).stdout)
    assert [s["id"] for s in cmp["sessions"]] == [1, 2]
    assert min(s["speedup_vs_fastest"] for s in cmp["sessions"]) == pytest.approx(1.0)

    # One best per session everywhere: the figure an export states, with its kind (issue 25)
    listed = {s["id"]: s for s in sessions}
    assert listed[2]["best"]["kind"] == "session" and listed[2]["best_ms"] == listed[2]["session_best_ms"]
    assert listed[1]["best"]["kind"] in ("confirmed", "untrusted")  # confirmed in 3 fresh processes
    assert listed[1]["best_ms"] == export["stated_ms"] and listed[1]["best"]["runs"] == 3
    assert listed[1]["best"]["trusted"] == (export["untrusted_because"] is None)
    assert show["best_ms"] == listed[1]["best_ms"] and show["best"] == listed[1]["best"]
    compared = {s["id"]: s for s in cmp["sessions"]}
    fastest = min(listed[i]["best_ms"] for i in (1, 2))
    for i in (1, 2):
        assert compared[i]["best_ms"] == listed[i]["best_ms"] and compared[i]["best"] == listed[i]["best"]
        assert compared[i]["speedup_vs_fastest"] == pytest.approx(listed[i]["best_ms"] / fastest)
    assert f"{listed[1]['best']['kind']}" in table and " session" in table
    assert f"stated best ({listed[1]['best']['kind']}): " in text


def test_export(tuned_db, tmp_path):
    db, _ = tuned_db
    proc = tunelab("export", "1", "--out", str(tmp_path / "best"), "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)
    assert os.path.exists(written["library"]) and os.path.exists(written["schedule"])
    stats = json.load(open(written["schedule"]))["stats"]
    assert stats["picked_for"] == "stated figure" and stats["placement"]["plain_ms"] > 0
    # --robust: the confirmed trial whose worst placement is fastest
    proc = tunelab("export", "1", "--robust", "--out", str(tmp_path / "robust"), "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    doc = json.load(open(json.loads(proc.stdout)["schedule"]))
    show = json.loads(tunelab("show", "1", "--json", db=db).stdout)
    worst = {c["trial_id"]: max(c["layout_ms"].values()) for c in show["confirmed"] if not c["disturbance"]}
    if worst:
        assert doc["session"]["trial_id"] == min(worst, key=lambda k: (worst[k], k))
        assert doc["stats"]["picked_for"] == "worst placement (--robust)"


def test_trials_are_named_by_their_number_in_the_session(tuned_db, tmp_path):
    """Text says '#N' (the number within the session, from 1), JSON has trial_id and trial_number
    beside it, and export --trial takes the number as printed; --trial-id the id."""
    db, _ = tuned_db
    show = json.loads(tunelab("show", "2", "--json", "--trials", db=db).stdout)
    trials = show["trials_list"]
    assert [t["number"] for t in trials] == list(range(1, len(trials) + 1))
    assert trials[0]["id"] > len(trials)  # session 2's ids follow session 1's: ids are not numbers
    best = show["best_trial"]
    assert show["best_trial_number"] == best["number"] and show["best_trial_id"] == best["id"]
    text = tunelab("show", "2", db=db).stdout
    assert f"best: trial #{best['number']} (id {best['id']})" in text
    other = next(t for t in trials if t["status"] == "ok" and t["id"] != best["id"])
    for flag, value in (("--trial", f"#{other['number']}"), ("--trial", str(other["number"]))):
        out = tmp_path / f"t{len(value)}"
        proc = tunelab("export", "2", flag, value, "--out", str(out), "--json", db=db)
        assert proc.returncode == 0, proc.stderr
        assert json.load(open(json.loads(proc.stdout)["schedule"]))["session"]["trial_id"] == other["id"]
    proc = tunelab(
        "export", "2", "--trial-id", str(other["id"]), "--out", str(tmp_path / "id"), "--json", db=db
    )
    assert json.load(open(json.loads(proc.stdout)["schedule"]))["session"]["trial_id"] == other["id"]
    bad = tunelab("export", "2", "--trial", f"#{len(trials) + 1}", "--out", str(tmp_path / "x"), db=db)
    assert bad.returncode == 2 and f"session 2 has no trial #{len(trials) + 1}" in bad.stderr


def test_workloads_json():
    doc = json.loads(tunelab("workloads", "--json").stdout)
    names = {w["name"] for w in doc}
    assert set(WORKLOADS) <= names  # every catalog workload, as the registry (and test_workloads) lists it


BAD = [
    (["tune", "nosuch"], "unknown workload"),
    (["tune", "gemm", "--shape", "M=abc"], "gemm"),
    (["tune", "gemm", "--dtype", "int3"], "dtype"),
    (["tune", "gemm", "--tuner", "foo"], "unknown tuner"),
    (["tune", "gemm", "--space", "weird"], "unknown space"),
    (["tune", "gemm", "--target", "{bad json"], "target"),
    (["tune", "gemm", "--trials", "-3"], "trials"),
    (["tune", "gemm", "--trials", "many"], "invalid int"),
    (["tune", "gemm", "--leader-band", "0.9"], "leader band must be 0"),
    (["show", "42"], "does not exist"),
    (["export", "42", "--out", "x"], "does not exist"),
    (["compare", "1", "42"], "does not exist"),
    (["frobnicate"], "invalid choice"),
]


def assert_one_line_error(proc, message: str) -> None:
    """Bad input: exit 2, one stderr line that names the problem, no traceback, nothing on stdout."""
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunelab: error:"), proc.stderr
    assert message in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_exits_2_with_one_line_and_changes_nothing(tuned_db, args, message):
    db, _ = tuned_db
    before = digest(db)
    assert_one_line_error(tunelab(*args, db=db), message)
    assert digest(db) == before


def test_missing_and_corrupt_db(tmp_path):
    missing = tmp_path / "none.sqlite"
    proc = tunelab("sessions", "--db", str(missing))
    assert proc.returncode == 2 and not missing.exists()
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    before = digest(corrupt)
    for args in (["sessions"], ["tune", "gemm", "--shape", "M=8,N=8,K=8", "--trials", "1"]):
        proc = tunelab(*args, "--db", str(corrupt))
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert digest(corrupt) == before


def test_resume_unknown_session(tmp_path):
    db = tmp_path / "x.sqlite"
    proc = tunelab("tune", "--resume", "3", db=db)
    assert proc.returncode == 2


def test_gui_without_a_display_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["TUNELAB_DB"] = str(tmp_path / "db.sqlite")
    proc = subprocess.run(
        [sys.executable, "-m", "tunelab"], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "no display" in proc.stderr


def test_signals_steer_a_running_tune(tmp_path):
    """The desktop app runs sessions as child processes: SIGUSR1 pauses, SIGUSR2 resumes, SIGTERM stops."""
    import signal
    import time

    from tunelab.core.cli.tuning import CONTROL_READY
    from tunelab.core.store import Store

    db = tmp_path / "steer.sqlite"
    env = dict(os.environ, TUNELAB_DB=str(db))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tunelab",
            *tune_gemm(
                "--json", trials=64, batch=2, target="llvm", tuner="random", number=1, repeat=2, cooldown=0
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    for line in proc.stderr:
        if CONTROL_READY in line:
            break
    proc.send_signal(signal.SIGUSR1)  # pause
    # paused once the round under way ends (its builds and runs take longer on a busy machine)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with Store(db) as store:
            if store.session(1).status == "paused":
                break
        time.sleep(0.2)
    time.sleep(1)
    with Store(db) as store:
        paused_at = store.session(1).n_trials
        assert store.session(1).status == "paused"
    time.sleep(2)
    with Store(db) as store:
        assert store.session(1).n_trials == paused_at  # nothing measured while paused
    proc.send_signal(signal.SIGUSR2)  # resume
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)  # stop (what the app's Stop sends): cancelled, exit 128 + 15
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143
    doc = json.loads(out)
    assert doc["status"] == "cancelled" and paused_at <= doc["trials"] < 64


# ---- tune --spec FILE (what the desktop app runs) ------------------------------------------------
def _spec_doc(**changes) -> dict:
    from tunelab.core.records import MeasureOptions

    measure = MeasureOptions(number=1, repeat=2, min_repeat_ms=1, confirm_runs=0)
    return small_spec(**{"trials": 4, "measure": measure, **changes}).to_json()


def test_tune_from_a_spec_file(tmp_path):
    from tunelab.core.cli.tuning import CONTROL_READY

    spec_file = tmp_path / "spec.json"
    doc = _spec_doc(name="from a file")
    spec_file.write_text(json.dumps(doc))
    db = tmp_path / "spec.sqlite"
    proc = tunelab("tune", "--spec", str(spec_file), "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["session_id"] == 1 and summary["status"] == "finished" and summary["trials"] == 4
    assert summary["tuner"] == "random" and summary["confirmations"] == []
    assert (
        f"session 1: {CONTROL_READY}" in proc.stderr.splitlines()
    )  # for people; the app waits for the "ready" event
    show = json.loads(tunelab("show", "1", "--json", "--db", str(db)).stdout)
    assert show["name"] == "from a file" and show["budget"] == 4 and show["space"] == "template"
    assert show["shape"] == {"M": 32, "N": 32, "K": 32} and show["target_kind"] == "llvm"
    assert show["measure"] == doc["measure"]


BAD_SPECS = [
    ("bad JSON", "{not json", [], "is not valid JSON"),
    ("unknown key", json.dumps({**_spec_doc(), "trails": 4}), [], "unknown key 'trails'"),
    ("wrong type", json.dumps({**_spec_doc(), "batch": "4"}), [], "'batch' must be an integer"),
    ("invalid shape", json.dumps(_spec_doc(shape={"M": 0, "N": 32, "K": 32})), [], "'M' must be at least 1"),
    ("with --resume", json.dumps(_spec_doc()), ["--resume", "1"], "cannot be combined with --resume"),
    ("with a workload", json.dumps(_spec_doc()), ["gemm"], "cannot be combined with a workload"),
    ("with --trials", json.dumps(_spec_doc()), ["--trials", "9"], "cannot be combined with --trials"),
]


@pytest.mark.parametrize(
    ("text", "extra", "message"), [b[1:] for b in BAD_SPECS], ids=[b[0] for b in BAD_SPECS]
)
def test_bad_spec_exits_2_with_one_line_and_stores_nothing(tuned_db, tmp_path, text, extra, message):
    db, _ = tuned_db
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(text)
    before = digest(db)
    for store in (db, tmp_path / "new.sqlite"):  # an existing store, and one that is not there yet
        assert_one_line_error(
            tunelab("tune", *extra, "--spec", str(spec_file), "--db", str(store), "--json"), message
        )
    assert digest(db) == before
    assert not (tmp_path / "new.sqlite").exists()

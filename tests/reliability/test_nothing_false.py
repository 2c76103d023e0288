"""Issue 26, "nothing false": probes 4-6 and 8-13 as real `tunelab` processes against real SQLite files.

Each test plants its input (a tampered schedule file, a wrong reference, a held write lock, an option
out of range) and asserts on what tunelab says, its exit code and what it left on disk. The helpers and
the tuned-session fixture are test_bad_input's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_bad_input import ONE_D, QUICK, copy_db, count, one_error_line, tunelab
from test_bad_input import tuned as tuned_fixture

tuned = pytest.fixture(scope="module", name="tuned")(tuned_fixture.__wrapped__)
from test_signals import hold_write_lock  # noqa: E402

pytestmark = pytest.mark.slow


def leaves_nothing(proc: subprocess.CompletedProcess, db: Path, words: str, code: int = 2) -> str:
    """One error line naming ``words``, exit ``code``, and no database file (nor its -wal) behind."""
    line = one_error_line(proc, code)
    assert words in line, line
    assert not db.exists() and not Path(f"{db}-wal").exists(), line
    return line


# ---- 4: a schedule file's figures and config are checked against its own workload ----------------------


def _tampered(tuned, tmp_path: Path, change) -> Path:
    doc = json.loads(tuned[2].read_text())
    change(doc)
    path = tmp_path / "tampered.schedule.json"
    path.write_text(json.dumps(doc))  # json writes NaN as the literal NaN, which json.loads reads back
    return path


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d["stats"].update(median_ms=-5), "stats.median_ms must be a finite number above 0"),
        (lambda d: d["stats"].update(median_ms=float("nan")), "stats.median_ms"),
        (lambda d: d["stats"].update(samples_ms=[1.0, -2.0]), "stats.samples_ms"),
        (lambda d: d["config"].update(tile_i=[10**9]), "config is not a point of its template space"),
        (lambda d: d["config"].update(unroll=10**9), "knob 'unroll'"),
        (lambda d: d["config"].update(tile_i=[3]), "knob 'tile_i'"),  # 3 does not divide the axis of 16
    ],
    ids=["median-5", "median-nan", "negative-sample", "tile-1e9", "unroll-1e9", "tile-3-of-16"],
)
def test_a_schedule_files_figures_and_config_are_checked_when_loaded(tuned, tmp_path, change, words):
    path = _tampered(tuned, tmp_path, change)
    db = copy_db(tuned, tmp_path)
    before = count(db, "validations")
    line = one_error_line(tunelab("validate", str(path), db=db))
    assert words in line and str(path) in line, line
    assert count(db, "validations") == before  # nothing stored


# ---- 5: every trial wrong is not "finished" -----------------------------------------------------------


def test_a_custom_reference_that_disagrees_with_every_kernel_exits_4_naming_it(tmp_path):
    custom = tmp_path / "wrong_ref.py"
    custom.write_text(ONE_D.replace("return A * 2", "return A * 3"))
    db = tmp_path / "wrong.sqlite"
    proc = tunelab("tune", "custom", "--custom", str(custom), "--shape", "N=64", "--trials", "4",
                   "--batch", "4", "--fail-fast", "0", *QUICK[4:], db=db)  # fmt: skip
    line = one_error_line(proc, 4)
    assert "reference()" in line and str(custom) in line and "all 4 trials" in line, line
    with __import__("sqlite3").connect(db) as conn:
        statuses = {s for (s,) in conn.execute("SELECT status FROM trials")}
    assert statuses == {"wrong_result"}  # stored as what happened; resumable evidence kept


# ---- 6, 12, 13: options out of range are one line naming the option, and no database -------------------


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--seed", "-1", "--seed:"),
        ("--seed", "99999999999999999999999", "--seed:"),
        ("--cooldown", "-1", "--cooldown:"),
        ("--warmup", "-1", "--warmup:"),
        ("--target-cv", "-1", "--target-cv:"),
        ("--min-repeat-ms", "-1", "--min-repeat-ms:"),
        ("--timeout", "nan", "--timeout:"),
        ("--trials", "99999999999999999999", "--trials:"),
        ("--dtype", "", "--dtype is empty"),
        ("--shape", "M=2147483648,N=1,K=1", "M=2147483648 is past the largest size TVM indexes (2^31-1"),
    ],
)
def test_an_option_out_of_range_is_named_and_stores_nothing(tmp_path, option, value, words):
    db = tmp_path / "none.sqlite"
    leaves_nothing(tunelab("tune", "gemm", *QUICK, option, value, db=db), db, words)


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--target", "cuda"], "CUDA"),  # no GPU here: compile only, refused for tuning
        (["--warm-start", "99"], "--warm-start"),
        (["--rpc", "127.0.0.1:9", "--rpc-key", "nobody"], "127.0.0.1:9"),  # nothing listens on port 9
    ],
    ids=["cuda-without-gpu", "warm-start-99", "tracker-not-answering"],
)
def test_a_refused_start_creates_no_database(tmp_path, extra, words):
    if extra[:2] == ["--target", "cuda"] and os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU: a CUDA target is not refused here")
    db = tmp_path / "sub" / "default.sqlite"  # as the default store: its folder does not exist yet
    leaves_nothing(tunelab("tune", "gemm", *QUICK, *extra, db=db), db, words)


# ---- 8: a new session waits for a held write lock as long as the README says ----------------------------


def test_a_new_session_waits_the_write_patience_and_says_the_real_number(tuned, tmp_path):
    db = copy_db(tuned, tmp_path)
    sessions = count(db, "sessions")
    locker = hold_write_lock(db, 40)
    try:
        started = time.monotonic()
        proc = tunelab("tune", "gemm", *QUICK, db=db, env={"TUNELAB_WRITE_PATIENCE_S": "4"})
        waited = time.monotonic() - started
    finally:
        locker.kill()
        locker.wait()
    line = one_error_line(proc, 3)
    assert "more than 4 s" in line, line  # the patience it was given, not the 10 s busy timeout
    assert waited >= 4
    assert count(db, "sessions") == sessions


def test_a_new_session_outwaits_a_lock_longer_than_the_busy_timeout(tuned, tmp_path):
    db = copy_db(tuned, tmp_path)
    locker = hold_write_lock(db, 12)  # past the 10 s busy timeout, inside the 30 s patience
    try:
        proc = tunelab("tune", "gemm", *QUICK, "--json", db=db, env={"TUNELAB_WRITE_PATIENCE_S": "30"})
    finally:
        locker.wait(60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["trials"] == 2


# ---- 9: --resume with options that would change the session is refused ---------------------------------


@pytest.mark.parametrize("extra", [["--trials", "10"], ["--confirm-runs", "0"], ["--seed", "3"]])
def test_resume_refuses_options_it_would_ignore(tuned, tmp_path, extra):
    db = copy_db(tuned, tmp_path)
    before = db.read_bytes()
    line = one_error_line(tunelab("tune", "--resume", str(tuned[1]), *extra, db=db))
    assert f"it cannot be combined with {extra[0]}" in line, line
    assert db.read_bytes() == before


# ---- 10: --tuner-option is checked against the tuner the session will use -----------------------------


def test_a_tuner_option_without_tuner_is_for_the_recommended_tuner(tmp_path):
    db = tmp_path / "rec.sqlite"
    # model=xgb, not the probe's model=mlp: since the xgb tuner's default loss became 'rank', mlp needs
    # loss=reg too; what this checks is that 'model' is judged as the xgb tuner's option, not random's
    proc = tunelab("tune", "gemm", *QUICK, "--tuner-option", "model=xgb", "--json", db=db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["tuner"] == "xgb"
    bad = tmp_path / "bad.sqlite"
    line = leaves_nothing(
        tunelab("tune", "gemm", *QUICK, "--tuner-option", "nosuch=1", db=bad), bad, "nosuch"
    )
    assert "'random'" not in line and "recommended" in line, line


# ---- 13: SIGHUP stops a session like SIGTERM -----------------------------------------------------------


def test_sighup_stops_a_session_cleanly_and_it_resumes(tmp_path):
    db = tmp_path / "hup.sqlite"
    cmd = [sys.executable, "-m", "tunelab", "tune", "gemm", "--shape", "M=64,N=64,K=64", "--trials", "6",
           "--batch", "2", *QUICK[4:], "--db", str(db)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "TUNELAB_DB"}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stderr:  # the handlers are in place once the session says it is ready
        if "control signals ready" in line:
            break
    proc.send_signal(signal.SIGHUP)
    rest = proc.stderr.read()
    assert proc.wait(120) == 128 + signal.SIGHUP, rest
    assert "Traceback" not in rest
    with __import__("sqlite3").connect(db) as conn:
        assert conn.execute("SELECT status FROM sessions").fetchone()[0] == "cancelled"
    resumed = tunelab("tune", "--resume", "1", "--json", db=db)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["trials"] == 6


# ---- 13: a space file is tuned as the kind it says, or refused -----------------------------------------


def test_a_space_file_whose_kind_is_not_the_tuned_space_is_refused(tmp_path):
    from tunelab.core.records import SessionSpec
    from tunelab.core.search.space.factory import make_space
    from tunelab.core.session.loop import session_target
    from tunelab.core.workloads.catalog import get_workload

    shape = {"M": 16, "N": 16, "K": 16}
    target = session_target(SessionSpec(workload="gemm", shape=shape, target="llvm"))
    data = make_space(get_workload("gemm"), shape, "float32", target, "template").to_json()
    assert data["kind"] == "template" and "knobs" in data
    space = tmp_path / "space.json"
    space.write_text(json.dumps({**data, "kind": "auto"}))  # template knobs, said to be an auto space
    db = tmp_path / "kind.sqlite"
    shape_arg = ["--shape", "M=16,N=16,K=16", "--space-file", str(space)]
    line = leaves_nothing(tunelab("tune", "gemm", *shape_arg, *QUICK, db=db), db, "says its kind is auto")
    assert "--space auto" in line
    # asked for as what it says, its template knobs are no auto space: refused too, nothing stored
    leaves_nothing(tunelab("tune", "gemm", *shape_arg, "--space", "auto", *QUICK, db=db), db, "auto space")


# ---- 13: a custom file whose own code crashes the process is named as such -----------------------------

SEGFAULTING_REFERENCE = '''"""B = 2 A; reference() dereferences NULL, except in the child that vets the file."""
import ctypes
import sys

PARAMS = {"N": 256}


def compute(N, dtype):
    A = te.placeholder((N,), dtype, name="A")
    return [A, te.compute((N,), lambda i: A[i] * 2, name="B")]


def reference(A, **shape):
    if "--vet" not in sys.argv:
        ctypes.string_at(0)
    return A * 2
'''


def test_a_custom_reference_that_crashes_the_process_is_the_files_crash(tmp_path):
    custom = tmp_path / "segv.py"
    custom.write_text(SEGFAULTING_REFERENCE)
    db = tmp_path / "segv.sqlite"
    proc = tunelab("tune", "custom", "--custom", str(custom), *QUICK, db=db)
    line = one_error_line(proc, 1)  # tunelab itself survives: the session crashed, resumable
    assert "workload file's own code crashed" in line and "reference()" in line and "SIGSEGV" in line, line
    assert "not a kernel's" in line
    assert "Fatal Python error" not in proc.stderr
    assert count(db, "trials") == 0  # no trial blamed for it

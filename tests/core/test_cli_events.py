"""The progress protocol (tunelab.core.cli.protocol) from real `tunelab` child processes: JSON lines on the
descriptor ``--events-fd`` names, while stderr and stdout stay as they were."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace

import pytest
from cli_runs import run_tunelab
from specs import FAST_MEASURE, small_spec

from tunelab.core.cli.protocol import parse_event
from tunelab.core.store import Store

pytestmark = pytest.mark.slow


class Child:
    """`python -m tunelab ARGS --events-fd N` with its events read line by line."""

    def __init__(self, *args: str) -> None:
        read_end, write_end = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tunelab", *args, "--events-fd", str(write_end)],
            pass_fds=(write_end,),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(write_end)
        self.events_file = os.fdopen(read_end, encoding="utf-8")
        self.raw_lines: list[str] = []

    def events(self):
        for line in self.events_file:
            self.raw_lines.append(line)
            yield parse_event(line)

    def finish(self, timeout: float = 600) -> tuple[list[dict], str, str]:
        events = list(self.events())
        out, err = self.proc.communicate(timeout=timeout)
        self.events_file.close()
        return events, out, err


def _spec_file(tmp_path, **changes) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(small_spec(**changes).to_json()))
    return str(path)


def test_a_tune_reports_session_ready_trials_stage_and_done(tmp_path):
    db = tmp_path / "events.sqlite"
    measure = replace(FAST_MEASURE, confirm_runs=1, confirm_top=1, confirm_max_s=0)
    child = Child(
        "tune", "--spec", _spec_file(tmp_path, trials=4, measure=measure), "--db", str(db), "--json"
    )
    events, out, err = child.finish()

    assert child.proc.returncode == 0, err[-3000:]
    assert all(e is not None for e in events), child.raw_lines  # every line on the pipe is an event
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["session", "ready"] and kinds[-1] == "done"
    assert events[0] == {"event": "session", "session_id": 1}
    assert events[1] == {"event": "ready", "session_id": 1}
    assert events[-1] == {"event": "done", "exit_code": 0}
    trials = [e for e in events if e["event"] == "trial"]
    with Store(db) as store:
        stored = store.trials(1)
    assert [e["trial_id"] for e in trials] == [t.id for t in stored]  # each as it was stored, in order
    assert [e["done"] for e in trials] == [1, 2, 3, 4] and {e["total"] for e in trials} == {4}
    assert [e["ok"] for e in trials] == [t.ok for t in stored]
    stages = [e["text"] for e in events if e["event"] == "stage"]
    assert stages and "confirming" in stages[0]  # the winner's confirmation, after the trials
    assert kinds.index("stage") > max(i for i, k in enumerate(kinds) if k == "trial")
    assert "error" not in kinds
    # stdout and stderr are what they were without events
    assert json.loads(out)["session_id"] == 1
    assert "session 1: control signals ready" in err and "4/4 trials" in err


def test_bad_input_is_an_error_event_with_the_line_stderr_shows(tmp_path):
    db = tmp_path / "bad.sqlite"
    child = Child("tune", "--spec", _spec_file(tmp_path, trials=0), "--db", str(db), "--json")
    events, out, err = child.finish()
    assert child.proc.returncode == 2 and out == ""
    (line,) = err.strip().splitlines()
    error, done = events
    assert error == {"event": "error", "message": line.removeprefix("tunelab: error: "), "exit_code": 2}
    assert "trial budget must be at least 1" in error["message"]
    assert done == {"event": "done", "exit_code": 2}
    assert not db.exists()


def test_a_stopped_tune_ends_with_done_and_no_error(tmp_path):
    db = tmp_path / "stop.sqlite"
    child = Child("tune", "--spec", _spec_file(tmp_path, trials=64, batch=2), "--db", str(db), "--json")
    seen = []
    for event in child.events():
        seen.append(event)
        if event["event"] == "trial":
            child.proc.send_signal(signal.SIGTERM)  # what the app's Stop sends
            break
    events, out, _err = child.finish()
    events = seen + events
    assert child.proc.returncode == 143
    assert events[-1] == {"event": "done", "exit_code": 143}
    assert "error" not in [e["event"] for e in events]
    assert json.loads(out)["status"] == "cancelled"


def test_bias_reports_its_error_and_end(tmp_path):
    db = tmp_path / "empty.sqlite"
    Store(db).close()
    child = Child("bias", "7", "--by-task", "--json", "--db", str(db))
    events, out, err = child.finish()
    assert child.proc.returncode == 2 and out == ""
    error, done = events
    assert error["event"] == "error" and error["exit_code"] == 2
    assert error["message"] == err.strip().removeprefix("tunelab: error: ")
    assert done == {"event": "done", "exit_code": 2}


def test_events_need_a_descriptor_of_their_own(tmp_path):
    proc = run_tunelab("tune", "gemm", "--events-fd", "1", "--db", str(tmp_path / "x.sqlite"), timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        "tunelab: error: --events-fd: events need a file descriptor of their own (3 or more), not 1"
    )

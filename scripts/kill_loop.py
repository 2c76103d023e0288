#!/usr/bin/env python3
"""Kill a real tuning session with SIGKILL at random moments, resume it each time, then finish it.

    python scripts/kill_loop.py --kills 20 --trials 150         # the CI variant (tests/reliability)
    python scripts/kill_loop.py --kills 200 --trials 400 --db /tmp/k.sqlite   # the long one

After every kill it checks, reading the SQLite file itself: every trial (and its samples) stored
before the kill is still there byte for byte; the session's stored tuner state never goes back
(the genetic tuner's generation only grows, so a resumed process continued from it rather than
starting over). At the end: the budget is reached exactly, no config was measured twice, and no
trial carries a worker's death caused by the kill. It prints one JSON report; exit 0 only when
nothing was lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TUNE = [
    "tune",
    "gemm",
    "--shape",
    "M=32,N=32,K=32",
    "--space",
    "template",
    "--tuner",
    "genetic",
    "--batch",
    "2",
    "--number",
    "1",
    "--repeat",
    "2",
    "--min-repeat-ms",
    "1",
    "--cooldown",
    "0",
    "--max-repeat",
    "2",
    "--confirm-runs",
    "0",
    "--seed",
    "7",
]


def snapshot(db: Path) -> tuple[dict[int, tuple], dict[int, tuple], int | None, str | None]:
    """(trial rows by id, samples by trial id, the tuner's generation, status) read as a stranger would."""
    if not db.exists():
        return {}, {}, None, None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        trials = {row[0]: tuple(row) for row in conn.execute("SELECT * FROM trials ORDER BY id")}
        samples: dict[int, tuple] = {}
        for trial_id, idx, ms in conn.execute("SELECT trial_id, idx, ms FROM samples ORDER BY trial_id, idx"):
            samples[trial_id] = (*samples.get(trial_id, ()), (idx, ms))
        row = conn.execute("SELECT tuner_state, status FROM sessions ORDER BY id LIMIT 1").fetchone()
        if conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] > 1:
            raise SystemExit("a second session was created: a resume started a new session")
    except sqlite3.OperationalError:  # the schema is not written yet (killed during creation)
        return {}, {}, None, None
    finally:
        conn.close()
    if row is None:
        return trials, samples, None, None
    state = json.loads(row[0]) if row[0] else {}
    return trials, samples, state.get("generation"), row[1]


def start(args: list[str], db: Path, log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tunelab", *args, "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=6.0, help="longest wait before a kill (s)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    folder = Path(tempfile.mkdtemp(prefix="tunelab-kill-loop-"))
    db = args.db or folder / "kill.sqlite"
    log = open(folder / "tune.log", "ab")
    report: dict = {
        "kills": 0,
        "kills_with_new_trials": 0,
        "trials_lost": 0,
        "rows_changed": 0,
        "tuner_state_regressed": 0,
        "trials_at_kills": [],
        "log": str(folder / "tune.log"),
    }
    before_trials, before_samples, generation, _ = snapshot(db)
    command = [*TUNE, "--trials", str(args.trials)]
    started = time.time()
    while report["kills"] < args.kills:
        proc = start(command, db, log)
        if report["kills"] % 2 == 0:  # at any moment, start-up and session creation included
            time.sleep(rng.uniform(0.3, args.max_delay))
        else:  # just after a trial landed, in the middle of the next batch's build or run
            deadline = time.time() + 120
            while (
                len(snapshot(db)[0]) <= len(before_trials) and proc.poll() is None and time.time() < deadline
            ):
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 1.5))
        if proc.poll() is not None:  # it finished the budget before the kill: the loop is over
            break
        os.killpg(proc.pid, signal.SIGKILL)  # the process and its builder / runner workers
        proc.wait()
        report["kills"] += 1
        trials, samples, gen, status = snapshot(db)
        for trial_id, row in before_trials.items():
            if trial_id not in trials:
                report["trials_lost"] += 1
            elif trials[trial_id] != row or samples.get(trial_id) != before_samples.get(trial_id):
                report["rows_changed"] += 1
        if generation is not None and (gen is None or gen < generation):
            report["tuner_state_regressed"] += 1
        report["kills_with_new_trials"] += len(trials) > len(before_trials)
        report["trials_at_kills"].append(len(trials))
        before_trials, before_samples, generation = trials, samples, gen
        if status is not None:  # the session exists: from now on it is resumed
            command = ["tune", "--resume", "1"]
    # Finish the budget.
    proc = start(command, db, log)
    report["final_exit"] = proc.wait(timeout=1800)
    trials, samples, gen, status = snapshot(db)
    report["trials_lost"] += sum(t not in trials for t in before_trials)
    report["rows_changed"] += sum(t in trials and trials[t] != row for t, row in before_trials.items())
    configs = [row[6] for row in trials.values()]  # config_key
    report.update(
        trials=len(trials),
        budget=args.trials,
        status=status,
        duplicates=len(configs) - len(set(configs)),
        killed_by_us=sum(
            1 for row in trials.values() if row[8] and ("SIGKILL" in row[8] or "terminated" in row[8])
        ),
        wall_s=round(time.time() - started, 1),
    )
    ok = (
        report["trials_lost"] == 0
        and report["rows_changed"] == 0
        and report["duplicates"] == 0
        and report["tuner_state_regressed"] == 0
        and report["trials"] == args.trials
        and status == "finished"
    )
    report["ok"] = ok
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

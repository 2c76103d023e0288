"""Real SQLite files with faults, through the real Store and the real `tunelab` command (issue 8).

A copy of a real store cut at many lengths, pages of it overwritten, random bytes, a schema newer
than this tunelab, a disk that fills up while a session writes, and a lock another process holds.
For each: one clear line (the CLI exits 2 for a file the person named that is damaged or newer),
no traceback, and nothing written to a damaged file (its bytes compared before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
from cli_runs import run_tunelab, tune_gemm
from specs import FAST_MEASURE, small_spec

import tunelab.core.store.connection as store_module
from tunelab.core.errors import StoreError
from tunelab.core.records import NewTrial
from tunelab.core.session.loop import TuningSession, create_session
from tunelab.core.store import Store, schema_version

pytestmark = pytest.mark.slow

PAGE = 4096
NO_CONFIRM = ("--target", "llvm", "--confirm-runs", "0")


def tunelab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_tunelab(*args, timeout=timeout)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, one stderr line naming the problem, no traceback, nothing on stdout."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("tunelab: error:"), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def assert_one_line(exc: BaseException, *words: str) -> None:
    message = str(exc)
    assert isinstance(exc, StoreError) and message and len(message.splitlines()) == 1, message
    for word in words:
        assert word in message, message


def side_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))


@pytest.fixture(scope="module")
def real_store(tmp_path_factory) -> Path:
    """A closed store with a couple of sessions: one tuned for real (GEMM 32^3, 4 of its 6 trials, then
    stopped: it can be resumed), one of 120 trials written through the writer API (enough pages to cut
    the file in many places)."""
    path = tmp_path_factory.mktemp("faults") / "real.sqlite"
    with Store(path) as s:
        session = create_session(s, small_spec(trials=6, batch=2))
        session.on_trial.append(lambda t: session.cancel() if t.index == 3 else None)
        assert len(list(session.run())) == 4
        assert s.session(session.session_id).status == "cancelled"
        sid = s.create_session(
            small_spec(name="written"),
            target_json={"kind": "llvm"},
            target_kind="llvm",
            space_json={"kind": "template", "knobs": []},
            tvm_version="test",
            flops=1e6,
        )
        for i in range(120):
            now = time.time()
            s.add_trial(
                sid,
                NewTrial(
                    round=i // 8,
                    config={"tile": [i], "note": "x" * 300},
                    status="ok",
                    error=None,
                    samples_ms=(1.0 + i, 1.1 + i, 1.2 + i),
                    predicted_ms=None,
                    build_s=0.1,
                    run_s=0.1,
                    started_at=now,
                    finished_at=now,
                ),
                f"key{i}",
            )
        s.add_round(sid, 0, 8, None, 1.0)
        s.set_status(sid, "finished")
    assert side_files(path) == []  # closed: everything is in the main file
    return path


def read_everything(path: Path) -> None:
    with Store(path, create=False) as s:
        for record in s.sessions():
            s.trials(record.id, with_samples=True)
            s.tasks(record.id)
            s.rounds(record.id)
            s.best_trial(record.id)


# ---- a file cut short ---------------------------------------------------------------------------------


def cuts(size: int) -> list[int]:
    pages = size // PAGE
    return sorted(
        {
            0,
            1,
            50,
            99,
            100,
            1000,
            PAGE,
            2 * PAGE,
            3 * PAGE + 777,
            (pages // 2) * PAGE,
            size // 2 + 13,
            (pages - 1) * PAGE,
        }
    )


def test_the_store_reads_whole(real_store):
    read_everything(real_store)
    assert len(cuts(real_store.stat().st_size)) >= 10


@pytest.mark.parametrize("index", range(12))
def test_a_cut_store_is_refused_in_one_line_and_left_as_it_is(real_store, tmp_path, index):
    data = real_store.read_bytes()
    points = cuts(len(data))
    if index >= len(points):
        pytest.skip("fewer cut points for this file size")
    cut = points[index]
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[:cut])
    before = digest(path)
    expected = {0: "empty SQLite file", 1: "less than an SQLite header"}.get(cut, "damaged")
    for args in (["sessions", "--json"], ["show", "1", "--trials"]):
        assert_one_line_error(tunelab(*args, "--db", str(path)), expected)
    # readers, and writers but for an empty file (a new database may be made in one)
    for create, readonly in ((False, False), (False, True), *([(True, False)] if cut else [])):
        with pytest.raises(StoreError) as info:
            Store(path, create=create, readonly=readonly)
        assert_one_line(info.value, expected)
    assert digest(path) == before and side_files(path) == []


def test_a_store_missing_only_its_last_byte_still_reads(real_store, tmp_path):
    """SQLite reads a short last page as zeros; nothing of it was in use here, so nothing is lost."""
    path = tmp_path / "short.sqlite"
    path.write_bytes(real_store.read_bytes()[:-1])
    before = digest(path)
    proc = tunelab("sessions", "--json", "--db", str(path))
    assert proc.returncode == 0, proc.stderr
    assert [s["id"] for s in json.loads(proc.stdout)] == [2, 1]
    assert digest(path) == before


# ---- pages overwritten ------------------------------------------------------------------------------------


def test_overwritten_pages_are_never_a_traceback_and_never_written_to(real_store, tmp_path):
    """Garbage in one page: what the reads touch says "damaged" in one line (it was a bare
    sqlite3.DatabaseError, a traceback); a session refuses to write to the file at all."""
    data = real_store.read_bytes()
    rng = random.Random(8)
    pages = len(data) // PAGE
    damaged_seen = 0
    with Store(tmp_path / "ok.sqlite") as fine:
        fine.check_intact()
    for page in sorted(rng.sample(range(1, pages), min(6, pages - 1))):
        path = tmp_path / f"page{page}.sqlite"
        path.write_bytes(data[: page * PAGE] + rng.randbytes(PAGE) + data[(page + 1) * PAGE :])
        before = digest(path)
        for args in (["sessions"], ["show", "1", "--trials"]):
            proc = tunelab(*args, "--db", str(path))
            assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
            if proc.returncode != 0:
                assert_one_line_error(proc, "damaged")
                damaged_seen += 1
        with Store(path, create=False) as s:  # opened (the schema may be intact), but a session won't write
            with pytest.raises(StoreError) as info:
                create_session(s, small_spec(trials=1))
            assert_one_line(info.value, "damaged")
            with pytest.raises(StoreError):
                list(TuningSession(s, 1).run())
        assert digest(path) == before, f"page {page}: a damaged file was written to"
    assert damaged_seen  # some overwritten page was met by a read


def test_tune_on_a_damaged_store_writes_nothing(real_store, tmp_path):
    data = bytearray(real_store.read_bytes())
    pages = len(data) // PAGE
    page = pages - 2  # trials of the written session: the schema reads, the data does not
    data[page * PAGE : (page + 1) * PAGE] = random.Random(1).randbytes(PAGE)
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(bytes(data))
    before = digest(path)
    proc = tunelab(*tune_gemm(*NO_CONFIRM, "--db", str(path), shape="M=16,N=16,K=16", trials=2))
    assert_one_line_error(proc, "damaged")
    assert_one_line_error(tunelab("tune", "--resume", "1", "--db", str(path)), "damaged")
    assert digest(path) == before


# ---- random bytes and a newer schema ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_random_bytes_are_refused_and_untouched(tmp_path, seed):
    rng = random.Random(seed)
    body = rng.randbytes(rng.choice([10, 100, PAGE, 3 * PAGE + 5]))
    if seed % 2:  # with SQLite's own header: garbage that looks like a database
        body = b"SQLite format 3\0" + body
    path = tmp_path / "random.sqlite"
    path.write_bytes(body)
    for args in (["sessions"], ["show", "1"]):
        assert_one_line_error(tunelab(*args, "--db", str(path)))
    with pytest.raises(StoreError) as info:
        Store(path)
    assert_one_line(info.value)
    assert path.read_bytes() == body and side_files(path) == []


def test_a_newer_schema_is_refused_and_untouched(real_store, tmp_path):
    path = tmp_path / "newer.sqlite"
    shutil.copy(real_store, path)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_version() + 1),))
    raw.close()
    before = digest(path)
    words = ("newer tunelab", f"schema {schema_version() + 1}", f"this one knows {schema_version()}")
    for args in (
        ["sessions"],
        ["show", "1"],
        tune_gemm(*NO_CONFIRM, shape="M=16,N=16,K=16", trials=1),
    ):
        assert_one_line_error(tunelab(*args, "--db", str(path)), *words)
    for create, readonly in ((True, False), (False, True)):
        with pytest.raises(StoreError) as info:
            Store(path, create=create, readonly=readonly)
        assert_one_line(info.value, *words)
    assert digest(path) == before
    # a read-only connection cannot remove SQLite's side files when it closes; they hold nothing
    assert all((path.parent / name).stat().st_size == 0 for name in side_files(path) if name.endswith("-wal"))


# ---- a full disk ------------------------------------------------------------------------------------------


def test_a_full_disk_stops_the_session_and_keeps_every_committed_trial(tmp_path):
    """PRAGMA max_page_count on the session's own connection: the file cannot grow past its size
    once three trials are in, as on a full disk."""
    path = tmp_path / "full.sqlite"
    store = Store(path)
    session = create_session(
        store, small_spec(trials=10, batch=2, measure=replace(FAST_MEASURE, cooldown_s=0))
    )
    yielded = []

    def on_trial(trial):
        yielded.append(trial.id)
        if len(yielded) == 3:
            pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
            store._conn.execute(f"PRAGMA max_page_count = {pages}")

    session.on_trial.append(on_trial)
    with pytest.raises(StoreError) as info:
        for _ in session.run():
            pass
    assert_one_line(info.value, "full")
    store.close()
    with Store(path, create=False) as s:  # a fresh connection: what was committed is there
        record = s.session(session.session_id)
        stored = [t.id for t in s.trials(session.session_id, with_samples=True)]
        assert set(yielded) <= set(stored) and len(stored) < 10
        assert record.status == "crashed" and "full" in record.error
    with Store(path, create=False) as s:  # space again: the session resumes and measures nothing twice
        done = list(TuningSession(s, session.session_id).run())
        trials = s.trials(session.session_id)
        assert len(done) == 10 - len(stored) and len(trials) == 10
        assert len({json.dumps(t.config, sort_keys=True) for t in trials}) == 10
        assert s.session(session.session_id).status == "finished"


def _small_tmpfs(folder: Path) -> bool:
    """Mount a 4 MiB tmpfs on `folder` (root only); False where that cannot be done."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("mount"):
        return False
    folder.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tunelab-full", str(folder)], capture_output=True, text=True
    )
    return proc.returncode == 0


def _fill(folder: Path, leave: int) -> None:
    """Fill the filesystem of `folder`, then give back `leave` bytes."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * PAGE)
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave))


# The real CLI with the page limit set on every connection it opens, where no small filesystem can be had.
_LIMITED_CLI = """
import sys
import tunelab.core.store as store
opened = store.Store.__init__
def limited(self, *args, **kwargs):
    opened(self, *args, **kwargs)
    pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
    self._conn.execute(f"PRAGMA max_page_count = {pages + 6}")
store.Store.__init__ = limited
from tunelab.core.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("how", ["tmpfs", "max_page_count"])
def test_tune_on_a_full_disk_exits_3_in_one_line_and_keeps_the_trials(tmp_path, how):
    args = tune_gemm(
        *NO_CONFIRM,
        shape="M=16,N=16,K=16",
        trials=40,
        batch=2,
        tuner="random",
        number=1,
        repeat=1,
        min_repeat_ms=1,
        cooldown=0,
    )
    mounted = tmp_path / "small"
    if how == "tmpfs":
        if not _small_tmpfs(mounted):
            pytest.skip("mounting a small tmpfs needs root")
        db = mounted / "full.sqlite"
    else:
        db = tmp_path / "full.sqlite"
    try:
        Store(db).close()
        if how == "tmpfs":
            _fill(mounted, leave=320 * 1024)
            cmd = [sys.executable, "-m", "tunelab", *args, "--db", str(db)]
        else:
            cmd = [sys.executable, "-c", _LIMITED_CLI, *args, "--db", str(db)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if how == "tmpfs":
            (mounted / "filler").unlink()
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert proc.returncode == 3, proc.stderr[
            -3000:
        ]  # the store failed: not bad input (2), not a crash (1)
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("tunelab: error: session 1 crashed:") and "full" in last, last
        assert "tunelab tune --resume 1" in last
        progress = [
            int(line.split("]")[1].split("/")[0])
            for line in proc.stderr.splitlines()
            if line.startswith("[") and "trials" in line
        ]
        with Store(db, create=False) as s:
            stored = s.trials(1)
            assert 1 <= len(stored) < 40
            assert len(stored) >= max(progress, default=0)  # every trial shown as done was kept
            assert f"The {len(stored)} trial(s) stored before are kept" in last
    finally:
        if how == "tmpfs" and mounted.is_dir():
            subprocess.run(["umount", str(mounted)], capture_output=True)


# ---- a lock held by another process ----------------------------------------------------------------------

_HOLDER = """
import sqlite3, sys, time
path, exclusive, seconds = sys.argv[1], sys.argv[2] == "exclusive", float(sys.argv[3])
conn = sqlite3.connect(path, isolation_level=None)
if exclusive:  # a program that keeps the file to itself (WAL readers are blocked too)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE" if exclusive else "BEGIN IMMEDIATE")
conn.execute("UPDATE sessions SET name = 'uncommitted' WHERE id = 1")
print("holding", flush=True)
time.sleep(seconds)
conn.execute("ROLLBACK")
"""


def _hold(path: Path, exclusive: bool, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), "exclusive" if exclusive else "write", str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "holding"
    return holder


def test_a_writer_holding_the_lock_does_not_block_readers(real_store, tmp_path):
    path = tmp_path / "locked.sqlite"
    shutil.copy(real_store, path)
    holder = _hold(path, exclusive=False, seconds=20)
    try:
        listed = tunelab("sessions", "--json", "--db", str(path))
        shown = tunelab("show", "1", "--json", "--db", str(path))
        table = tunelab("sessions", "--db", str(path))
        assert holder.poll() is None  # all read while the write transaction was still open
    finally:
        holder.kill()
        holder.wait()
    for proc in (listed, shown, table):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert [s["id"] for s in json.loads(listed.stdout)] == [2, 1]
    assert json.loads(shown.stdout)["name"] != "uncommitted"  # readers see only what was committed
    read_everything(path)


def test_a_lock_held_past_the_busy_timeout_is_one_line(real_store, tmp_path, monkeypatch):
    """A program holding the file in exclusive locking mode blocks even WAL readers: after the busy
    timeout the Store says who is in the way (it said "not an SQLite file: database is locked")."""
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.5)
    path = tmp_path / "held.sqlite"
    shutil.copy(real_store, path)
    before = digest(path)
    holder = _hold(path, exclusive=True, seconds=20)
    try:
        # (A read-only open falls back to SQLite's immutable mode, which reads without the lock.)
        for create, readonly in ((False, False), (True, False)):
            with pytest.raises(StoreError) as info:
                Store(path, create=create, readonly=readonly)
            assert_one_line(info.value, "locked by another process", "0.5 s")
    finally:
        holder.kill()
        holder.wait()
    read_everything(path)
    assert digest(path) == before

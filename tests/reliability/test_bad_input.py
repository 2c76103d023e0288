"""Bad input and hostile files (issue 8, part 4): one clear line, exit 2, nothing stored.

Everything here is real: TVM builds and measures, SQLite files on disk, `tunelab` in subprocesses, a
read-only folder is a tmpfs remounted read-only (root ignores chmod), a full disk is a small tmpfs
filled up. Helpers live in this file so the folder's conftest stays someone else's to grow.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tunelab.core.errors import StoreError, StoreFailure, TargetError, TunelabError, WorkloadError
from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.store import Store, is_store_failure

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
from cli_runs import one_error_line, run_tunelab
from host_cpus import an_mcpu_this_host_lacks
from specs import FAST_MEASURE_ARGS, small_spec

pytestmark = pytest.mark.slow

FAST = MeasureOptions(
    number=1, repeat=2, min_repeat_ms=1, warmup=1, timeout_s=30, cooldown_s=0.0, confirm_runs=0
)
QUICK = [
    "--trials",
    "2",
    "--batch",
    "2",
    *FAST_MEASURE_ARGS,
    "--target",
    "llvm",
]

ONE_D = '''"""B[i] = 2 A[i]: elementwise, no reduction."""
PARAMS = {"N": 256}


def compute(N, dtype):
    A = te.placeholder((N,), dtype, name="A")
    B = te.compute((N,), lambda i: A[i] * 2, name="B")
    return [A, B]


def reference(A, **shape):
    return A * 2
'''

# A reduction to a 0-d output: the template has no spatial loop to tile, so every config is rejected.
SCALAR = """PARAMS = {"N": 64}


def compute(N, dtype):
    A = te.placeholder((N,), dtype, name="A")
    k = te.reduce_axis((0, N), name="k")
    B = te.compute((), lambda: te.sum(A[k], axis=k), name="B")
    return [A, B]


def reference(A, **shape):
    return A.sum()
"""


def tunelab(
    *args: str, db: Path | None = None, timeout: float = 600, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    full.pop("TUNELAB_DB", None)
    return run_tunelab(
        *args, *(["--db", str(db)] if db is not None else []), timeout=timeout, env=full, cwd=cwd
    )


def tuned_template_export(folder: Path, out_name: str) -> tuple[Path, int, Path]:
    """A finished real template-space session (GEMM 32^3, random tuner, 4 trials) in ``folder``, exported
    by the CLI with its defaults (every format) to ``folder / out_name``: (database, session id, export)."""
    from tunelab.core.session.loop import create_session

    db = folder / "tuned.sqlite"
    with Store(db) as store:
        session = create_session(store, small_spec(trials=4, measure=FAST))
        assert len(list(session.run())) == 4
    out = folder / out_name
    proc = tunelab("export", str(session.session_id), "--out", str(out), db=db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return db, session.session_id, out


def count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@contextmanager
def mounted_tmpfs(folder: Path, size: str = "64m"):
    """A fresh tmpfs at ``folder`` (root only: chmod does not stop root from writing, a read-only or a
    full filesystem does); skipped where it cannot be mounted."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs (a read-only or a full filesystem)")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@contextmanager
def read_only_folder(folder: Path, *files: Path):
    """A folder holding copies of ``files`` that this process cannot write: a tmpfs remounted read-only
    as root; otherwise (a normal user) a chmod 555 folder."""
    if os.geteuid() != 0:
        folder.mkdir(parents=True)
        for f in files:
            shutil.copy2(f, folder)
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    with mounted_tmpfs(folder):
        for f in files:
            shutil.copy2(f, folder)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        assert not os.access(folder, os.W_OK)
        yield folder


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A finished real session (GEMM 16^3, 4 trials) and its export; tests copy the database."""
    from tunelab.core.export.files import export_trial
    from tunelab.core.session.loop import create_session

    folder = tmp_path_factory.mktemp("tuned")
    db = folder / "tuned.sqlite"
    with Store(db) as store:
        session = create_session(store, small_spec(shape={"M": 16, "N": 16, "K": 16}, trials=4, measure=FAST))
        assert len(list(session.run())) == 4
        written = export_trial(store, session.session_id, out_dir=folder / "export", formats=("schedule",))
    return db, session.session_id, Path(written["schedule"])


def copy_db(tuned, tmp_path: Path) -> Path:
    db = tmp_path / "copy.sqlite"
    shutil.copy2(tuned[0], db)
    return db


# ---- shapes -------------------------------------------------------------------------------------------


def test_partial_shape_is_refused_naming_what_is_missing(tmp_path):
    db = tmp_path / "t.sqlite"
    line = one_error_line(tunelab("tune", "gemm", "--shape", "M=64,N=64", *QUICK, db=db))
    assert "leaves out K" in line and "M=64,N=64" in line and "M=512,N=512,K=512" in line
    line = one_error_line(tunelab("tune", "gemm", "--shape", "M=16,N=16,K=16;M=32", *QUICK, db=db))
    assert "leaves out N, K" in line
    assert not db.exists()


def test_partial_shape_in_the_engine():
    from tunelab.core.workloads.catalog import get_workload

    gemm = get_workload("gemm")
    with pytest.raises(WorkloadError, match="leaves out K"):
        gemm.parse_shape("M=64,N=64", complete=True)
    with pytest.raises(WorkloadError, match="leaves out N"):
        gemm.parse_shape({"M": 8, "K": 8}, complete=True)
    assert (
        gemm.parse_shape("", complete=True) == gemm.parse_shape(None, complete=True) == gemm.default_shape()
    )
    assert gemm.parse_shape("square-128", complete=True)["K"] == 128  # a preset names every parameter
    assert gemm.parse_shape("M=64,N=64")["K"] == 512  # the library call keeps its documented defaults


def test_huge_shape_is_refused_at_once_with_the_bytes_needed(tmp_path):
    db = tmp_path / "t.sqlite"
    started = time.monotonic()
    proc = tunelab("tune", "gemm", "--shape", "M=1000000000000,N=64,K=64", *QUICK, db=db, timeout=120)
    line = one_error_line(proc)
    assert time.monotonic() - started < 60  # the import of TVM, not a walk over 10^12
    assert "512,000,000,016,384 bytes" in line and "memory" in line
    assert not db.exists()
    # an extent no one could store as a number either
    line = one_error_line(tunelab("tune", "gemm", "--shape", f"M={10**400},N=1,K=1", *QUICK, db=db))
    assert "memory" in line and not db.exists()


def test_divisors_never_walk_the_extent():
    from tunelab.core.search.space.auto import tile_candidates
    from tunelab.core.search.space.base import divisors

    for n in (1, 2, 12, 97, 360, 1024, 9973 * 3):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    started = time.monotonic()
    big = divisors(10**12)
    assert len(big) == 169 and big[0] == 1 and big[-1] == 10**12
    assert tile_candidates(999_999_999_989, 2, 64) == (
        (999_999_999_989, 1),
    )  # a prime: 10^6 trials, not 10^12
    assert time.monotonic() - started < 10


def test_validate_shapes_too_big_for_memory_are_refused(tuned, tmp_path):
    db = copy_db(tuned, tmp_path)
    before = count(db, "validations")
    line = one_error_line(
        tunelab("validate", str(tuned[1]), "--shapes", "M=1000000000000", "--repeats", "1", db=db)
    )
    assert "memory" in line and count(db, "validations") == before


# ---- a person's TE file -------------------------------------------------------------------------------

HOSTILE = {
    "hang": ("while True:\n    pass\n", "did not finish loading within 10 s"),
    "exit0": ("import sys\nsys.exit(0)\n", "sys.exit(0)"),
    "os_exit": ("import os\nos._exit(0)\n", "ended the process that loads it (exited with status 0)"),
    "signal": ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "SIGSEGV"),
    "raises": ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_custom_file_is_one_line_and_stores_nothing(tmp_path, kind):
    code, words = HOSTILE[kind]
    path = tmp_path / f"{kind}.py"
    path.write_text(ONE_D + code)
    db = tmp_path / "t.sqlite"
    started = time.monotonic()
    proc = tunelab(
        "tune",
        "custom",
        "--custom",
        str(path),
        *QUICK,
        db=db,
        timeout=300,
        env={"TUNELAB_CUSTOM_TIMEOUT_S": "10"},
    )
    line = one_error_line(proc)
    assert words in line, line
    assert time.monotonic() - started < 120
    assert not db.exists()


def test_system_exit_in_process_is_a_workload_error():
    from tunelab.core.workloads.custom import CustomWorkload

    # in this process (the child check skipped on purpose): still an error, never the end of tunelab
    with pytest.raises(WorkloadError, match=r"sys\.exit\(3\)"):
        CustomWorkload(ONE_D + "import sys\nsys.exit(3)\n", vet=False)
    exits_when_big = ONE_D.replace(
        '    A = te.placeholder((N,), dtype, name="A")',
        '    if N > 256:\n        raise SystemExit(0)\n    A = te.placeholder((N,), dtype, name="A")',
    )
    wl = CustomWorkload(exits_when_big, vet=False)
    with pytest.raises(WorkloadError, match=r"compute\(\) raised sys\.exit\(0\)"):
        wl.tensors("N=512")


def test_custom_code_at_the_tuned_shape_is_checked_in_a_child_first(tmp_path):
    # loads fine at the default shape, hangs in reference() at N=512: refused before anything is stored
    slow = ONE_D.replace("    return A * 2", "    while A.size > 256:\n        pass\n    return A * 2")
    path = tmp_path / "slow_ref.py"
    path.write_text(slow)
    db = tmp_path / "t.sqlite"
    line = one_error_line(
        tunelab(
            "tune",
            "custom",
            "--custom",
            str(path),
            "--shape",
            "N=512",
            *QUICK,
            db=db,
            timeout=300,
            env={"TUNELAB_CUSTOM_TIMEOUT_S": "10"},
        )
    )
    assert "within 10 s" in line and not db.exists()


def test_custom_code_runs_once_to_check_it_and_once_in_tunelab(tmp_path):
    marker = tmp_path / "ran.txt"
    path = tmp_path / "side_effect.py"
    path.write_text(ONE_D + f"import os\nos.system('echo ran >> {marker}')\n")
    db = tmp_path / "t.sqlite"
    proc = tunelab("tune", "custom", "--custom", str(path), "--shape", "N=128", *QUICK, db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a child checked it, tunelab ran it: not once more in every measuring worker
    assert marker.read_text().splitlines() == ["ran", "ran"]


def test_schedule_file_code_never_runs_without_trust_custom(tmp_path):
    marker = tmp_path / "ran.txt"
    path = tmp_path / "side_effect.py"
    path.write_text(ONE_D + f"import os\nos.system('echo ran >> {marker}')\n")
    db = tmp_path / "t.sqlite"
    assert tunelab("tune", "custom", "--custom", str(path), *QUICK, db=db).returncode == 0
    out = tmp_path / "out"
    assert tunelab("export", "1", "--out", str(out), db=db).returncode == 0
    schedule = next(out.glob("*.schedule.json"))
    marker.unlink()
    before = count(db, "validations")
    line = one_error_line(tunelab("validate", str(schedule), "--repeats", "1", db=db))
    assert "--trust-custom" in line and "custom_source" in line
    assert not marker.exists() and count(db, "validations") == before
    from tunelab.core.export.files import build_schedule_file, schedule_from_file

    for load in (schedule_from_file, build_schedule_file):
        with pytest.raises(TunelabError, match="trust-custom"):
            load(schedule)
    assert not marker.exists()
    proc = tunelab("validate", str(schedule), "--repeats", "1", "--trust-custom", "--json", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert marker.exists() and count(db, "validations") == before + 1


def test_non_utf8_files_are_one_line(tmp_path):
    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes(b'PARAMS = {"N": 8}\n# caf\xe9\n')
    space = tmp_path / "space.json"
    space.write_bytes(b'{"knobs": "\xff"}')
    db = tmp_path / "t.sqlite"
    line = one_error_line(tunelab("tune", "custom", "--custom", str(latin1), *QUICK, db=db))
    assert "not UTF-8" in line and "0xe9" in line
    line = one_error_line(
        tunelab("tune", "gemm", "--shape", "M=16,N=16,K=16", "--space-file", str(space), *QUICK, db=db)
    )
    assert "not UTF-8" in line and "space file" in line
    assert not db.exists()


# ---- every config rejected ----------------------------------------------------------------------------


def test_one_dimensional_compute_tunes_with_its_default_shape(tmp_path):
    path = tmp_path / "double.py"
    path.write_text(ONE_D)
    db = tmp_path / "t.sqlite"
    proc = tunelab("tune", "custom", "--custom", str(path), *QUICK, "--json", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["measured"] == 2 and doc["rejected"] == 0
    assert "custom N=256 (the default shape)" in proc.stderr


def test_a_space_that_rejects_every_config_is_refused_before_storing(tmp_path):
    path = tmp_path / "scalar.py"
    path.write_text(SCALAR)
    db = tmp_path / "t.sqlite"
    line = one_error_line(tunelab("tune", "custom", "--custom", str(path), *QUICK, db=db))
    assert "cannot schedule this compute: none of" in line and "made a legal schedule" in line
    assert "list index out of range" in line
    assert not db.exists()


def test_a_stored_session_whose_configs_are_all_rejected_exits_non_zero(tmp_path):
    from tunelab.core.search.space.factory import make_space
    from tunelab.core.session.loop import CheckedSpec, create_session
    from tunelab.core.target.info import resolve_target
    from tunelab.core.workloads.catalog import get_workload

    db = tmp_path / "t.sqlite"
    workload = get_workload("custom", SCALAR)
    shape, target = workload.default_shape(), resolve_target("llvm")
    space = make_space(workload, shape, "float32", target, "template")
    spec = SessionSpec(
        workload="custom",
        shape=shape,
        custom_source=SCALAR,
        target="llvm",
        tuner="random",
        trials=4,
        batch=2,
        measure=FAST,
    )
    with Store(db) as store:  # stored as an older tunelab (without the check before storing) would have
        sid = create_session(
            store, spec, validated=CheckedSpec(workload, shape, "float32", target, space)
        ).session_id
    proc = tunelab("tune", "--resume", str(sid), "--json", db=db)
    line = one_error_line(proc, code=4)
    assert "measured nothing" in line and "InvalidSchedule: list index out of range" in line
    assert json.loads(proc.stdout)["trials"] == 0


# ---- export -------------------------------------------------------------------------------------------


def test_export_to_a_file_or_twice_into_one_folder(tuned, tmp_path):
    db, sid, _ = tuned
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    line = one_error_line(tunelab("export", str(sid), "--out", str(a_file), db=db))
    assert "is a file" in line and a_file.read_text() == "mine"
    line = one_error_line(tunelab("export", str(sid), "--out", str(a_file / "sub"), db=db))
    assert str(a_file) in line
    out = tmp_path / "out"
    assert tunelab("export", str(sid), "--out", str(out), db=db).returncode == 0
    schedule = next(out.glob("*.schedule.json"))
    schedule.write_text("edited by hand")
    line = one_error_line(tunelab("export", str(sid), "--out", str(out), db=db))
    assert "already holds an export" in line and "--force" in line
    assert schedule.read_text() == "edited by hand"
    proc = tunelab("export", str(sid), "--out", str(out), "--force", "--json", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(schedule.read_text())["session"]["id"] == sid


def test_export_into_a_read_only_folder(tuned, tmp_path):
    db, sid, _ = tuned
    with read_only_folder(tmp_path / "ro") as folder:
        for out in (folder, folder / "new"):
            line = one_error_line(tunelab("export", str(sid), "--out", str(out), db=db))
            assert str(folder) in line and ("read-only" in line.lower())
        assert os.listdir(folder) == []


# ---- a database in a read-only folder -----------------------------------------------------------------


def test_database_in_a_read_only_folder_is_read_and_never_written(tuned, tmp_path):
    db = copy_db(tuned, tmp_path)
    sid = tuned[1]
    with read_only_folder(tmp_path / "ro", db) as folder:
        ro_db = folder / db.name
        with Store(ro_db) as store:  # the library: read-only by itself, every read works
            assert store.readonly and [r.id for r in store.sessions()] == [sid]
            assert len(store.trials(sid)) == 4
            with pytest.raises(StoreError, match="read-only"):
                store.set_status(sid, "cancelled")
        proc = tunelab("sessions", "--json", db=ro_db)
        assert proc.returncode == 0, proc.stderr
        assert [s["id"] for s in json.loads(proc.stdout)] == [sid]
        proc = tunelab("show", str(sid), "--json", db=ro_db)
        assert proc.returncode == 0 and json.loads(proc.stdout)["trials"] == 4
        for args in (
            ["tune", "--resume", str(sid)],
            ["validate", str(sid), "--repeats", "1"],
            ["tune", "gemm", "--shape", "M=16,N=16,K=16", *QUICK],
        ):
            line = one_error_line(tunelab(*args, db=ro_db))
            assert "read-only" in line and "not an SQLite" not in line
        line = one_error_line(
            tunelab("tune", "gemm", "--shape", "M=16,N=16,K=16", *QUICK, db=folder / "new.sqlite")
        )
        assert "Cannot create" in line and "read-only" in line
        assert sorted(os.listdir(folder)) == [db.name]
    assert count(db, "trials") == 4 and count(db, "validations") == 0


def test_database_with_its_wal_in_a_read_only_folder_is_read(tuned, tmp_path):
    # a copy taken while a writer held the file open: the newest rows are still in the -wal file
    db = copy_db(tuned, tmp_path)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE sessions SET name = 'renamed in the wal'")
    assert Path(f"{db}-wal").stat().st_size > 0
    try:
        with read_only_folder(tmp_path / "ro", db, Path(f"{db}-wal"), Path(f"{db}-shm")) as folder:
            with Store(folder / db.name, create=False) as store:
                assert store.readonly and store.sessions()[0].name == "renamed in the wal"
    finally:
        writer.close()


# ---- validate where the schedule cannot run -----------------------------------------------------------


def test_validate_refuses_targets_this_host_cannot_execute(tuned, tmp_path):
    mcpu = an_mcpu_this_host_lacks()
    db = copy_db(tuned, tmp_path)
    sid = tuned[1]
    foreign = {"kind": "llvm", "mcpu": mcpu, "num-cores": 2}
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET target = ?", (json.dumps(foreign),))
    for extra in ([], ["--shapes", "M=8,16"]):
        line = one_error_line(tunelab("validate", str(sid), "--repeats", "1", *extra, db=db))
        assert mcpu in line and "cannot run on this machine" in line and "lacks" in line
    other_arch = {"kind": "llvm", "mcpu": "generic", "mtriple": "riscv64-unknown-linux-gnu"}
    for name, target, words in (("mcpu", foreign, "lacks"), ("arch", other_arch, "riscv64")):
        doc = json.loads(tuned[2].read_text())
        doc["target"] = target
        path = tmp_path / f"{name}.schedule.json"
        path.write_text(json.dumps(doc))
        line = one_error_line(tunelab("validate", str(path), "--repeats", "1", db=db))
        assert words in line and "cannot run on this machine" in line
    assert count(db, "validations") == 0

    # the library paths the app takes, before measuring or storing anything
    from tunelab.core.trust.remeasure.api import validate_schedule_file, validate_session
    from tunelab.core.trust.shapes import across_shapes
    from tunelab.core.usecases.validation import validate_and_store

    with Store(db) as store:
        with pytest.raises(TargetError, match="cannot run on this machine"):
            validate_session(store, sid, runs=1)
        with pytest.raises(TargetError, match="cannot run on this machine"):
            across_shapes(store, sid, "M=8")
        with pytest.raises(TargetError, match="cannot run on this machine"):
            validate_schedule_file(tmp_path / "mcpu.schedule.json", store=store, runs=1)
        for remeasure, shapes in ((True, ""), (False, "M=8,16"), (True, "M=8")):
            with pytest.raises(TargetError, match="cannot run on this machine"):
                validate_and_store(store, sid, top_k=1, runs=1, shapes=shapes or None, remeasure=remeasure)
    assert count(db, "validations") == 0


# ---- exit codes: bad input 2, a failing store 3 -------------------------------------------------------


def test_sqlite_errors_are_told_apart():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(sqlite3.OperationalError) as full:
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    assert is_store_failure(full.value)  # "database or disk is full": the disk, not the input


def test_store_writes_on_a_full_database_are_store_failures(tmp_path):
    from tunelab.core.records import NewTrial
    from tunelab.core.session.loop import create_session

    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database " * 100)
    with pytest.raises(StoreError) as bad:  # a file the user named that is no database: bad input
        Store(not_sqlite)
    assert not isinstance(bad.value, StoreFailure) and "not an SQLite file" in str(bad.value)
    with Store(tmp_path / "full.sqlite") as store:
        spec = SessionSpec(workload="gemm", shape={"M": 8, "N": 8, "K": 8}, target="llvm", measure=FAST)
        sid = create_session(store, spec).session_id
        pages = store.db.execute("PRAGMA page_count").fetchone()[0]
        store.db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own limit: the disk is full
        now = time.time()
        trial = NewTrial(
            round=0,
            config={"x": 1},
            status="ok",
            error=None,
            samples_ms=[1.0] * 50_000,
            predicted_ms=None,
            build_s=0.1,
            run_s=0.1,
            started_at=now,
            finished_at=now,
        )
        with pytest.raises(StoreFailure, match="full"):
            store.add_trial(sid, trial, "x1")
        assert store.trials(sid) == []  # rolled back: nothing half-written


def test_a_disk_that_fills_up_while_tuning_exits_3(tmp_path):
    from tunelab.core.session.loop import create_session

    with mounted_tmpfs(tmp_path / "small", size="2m") as folder:
        db = folder / "t.sqlite"
        with Store(db) as store:
            spec = small_spec(shape={"M": 16, "N": 16, "K": 16}, trials=40, measure=FAST)
            sid = create_session(store, spec).session_id
        # fill the disk, then give back a little: enough to open the database, not to tune 40 trials
        with open(folder / "filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        os.truncate(folder / "filler", max(0, (folder / "filler").stat().st_size - 96 * 1024))
        proc = tunelab("tune", "--resume", str(sid), db=db)
        line = one_error_line(proc, code=3)
        assert "the store failed" in line and ("full" in line or "I/O" in line), line


def test_readme_names_the_exit_codes():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for words in ("exits 2", "exits 3", "exits 4", "--trust-custom", "--force"):
        assert words in readme, words

"""Issue 26, "nothing false", probes 1 and 2: a disk that fills under `tunelab export`, and a temporary
folder that fills under `tunelab tune`, on real tmpfs mounts of a planted size, with `tunelab` in real
processes. A full disk is the machine's fault: exit 3 and one line naming the folder, no part of an export
left behind, no trial stored as its config's fault, and a resume measures what it cut short.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_bad_input import FAST_MEASURE_ARGS, mounted_tmpfs, one_error_line, tuned_template_export, tunelab

pytestmark = pytest.mark.slow

PAGE = 4096  # tmpfs counts whole pages
EXPORT_FILES = ("schedule.json", "tvmscript.py", "so")
NAME = "gemm_M32_N32_K32"


def _pages(path: Path) -> int:
    return -(-path.stat().st_size // PAGE)


@pytest.fixture(scope="module")
def template_session(tmp_path_factory):
    """A finished real session (GEMM 32^3, template space, 4 trials) and its export onto a roomy disk."""
    return tuned_template_export(tmp_path_factory.mktemp("full_disk"), "reference")


def _export(template_session, out: Path, *extra: str) -> subprocess.CompletedProcess:
    db, session_id, _ = template_session
    return tunelab("export", str(session_id), "--out", str(out), *extra, db=db, timeout=300)


def _assert_whole(out: Path, reference: Path) -> None:
    """Every file of the export there, each as long as the roomy disk's, the database as MetaSchedule's."""
    for suffix in EXPORT_FILES:
        assert (out / f"{NAME}.{suffix}").stat().st_size > 0
    assert (out / f"{NAME}.so").stat().st_size == (reference / f"{NAME}.so").stat().st_size
    json.loads((out / f"{NAME}.schedule.json").read_text())
    for name in ("database_workload.json", "database_tuning_record.json"):
        assert (out / "database" / name).read_bytes() == (reference / "database" / name).read_bytes()


def test_an_export_onto_a_filling_disk_is_whole_or_leaves_nothing(template_session, tmp_path):
    """Disks planted to fill at each file of the export: at the schedule file (4 KiB), half way through
    the library (ld: "final link failed: No space left on device"), at the MetaSchedule database (whose
    writer does not report a full disk: it left a workload file cut at 4096 bytes and said nothing);
    then a sweep of sizes. Each export exits 3 with one line and leaves the folder empty, or exits 0
    with every file whole."""
    _, _, reference = template_session
    before_library = sum(_pages(reference / f"{NAME}.{s}") for s in ("schedule.json", "tvmscript.py"))
    library = _pages(reference / f"{NAME}.so")
    planted = {
        "schedule": (1, "no space left to write the export"),
        "library": (before_library + library // 2, f"{NAME}.so"),
        "database": (before_library + library + 1, "MetaSchedule database"),
    }
    for what, (pages, words) in planted.items():
        disk = tmp_path / what
        with mounted_tmpfs(disk, f"{pages * 4}k"):
            out = disk / "out"
            line = one_error_line(_export(template_session, out), code=3)
            assert words in line and "nothing was exported" in line, (what, line)
            assert list(out.iterdir()) == [], what  # no file that looks like an export, no staging folder
            # the disk grows: the same export, without --force (nothing of the failed one blocks it)
            subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
            proc = _export(template_session, out)
            assert proc.returncode == 0, (what, proc.stderr[-2000:])
            _assert_whole(out, reference)
    seen = set()
    for kib in range(8, 112, 12):
        disk = tmp_path / f"sweep{kib}"
        with mounted_tmpfs(disk, f"{kib}k"):
            out = disk / "out"
            proc = _export(template_session, out)
            seen.add(proc.returncode)
            if proc.returncode == 0:
                _assert_whole(out, reference)
            else:
                one_error_line(proc, code=3)
                assert list(out.iterdir()) == [], kib
    assert seen == {0, 3}  # the sweep reached both a full disk and a roomy one


def _session_row(db: Path) -> tuple[str, str | None]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status, error FROM sessions").fetchone()


def _trials(db: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status, error FROM trials ORDER BY id").fetchall()


TUNE = ["tune", "gemm", "--target", "llvm", "--space", "template", "--tuner", "random", "--confirm-runs", "0"]


def test_a_full_temporary_folder_for_the_inputs_stops_the_session_and_blames_no_config(tmp_path):
    """TMPDIR on a 64 KiB tmpfs: the problem's inputs (GEMM 128^3: 64 KiB arrays) do not fit; NumPy's
    "OSError: 4096 requested and 992 written" was a traceback. Now: exit 3, one line naming the folder, no
    trial stored; a resume with room measures the whole budget."""
    db = tmp_path / "inputs.sqlite"
    with mounted_tmpfs(tmp_path / "tmp", "64k") as small:
        args = [*TUNE, "--shape", "M=128,N=128,K=128", "--trials", "4", "--batch", "4", *FAST_MEASURE_ARGS]
        line = one_error_line(tunelab(*args, db=db, env={"TMPDIR": str(small)}), code=3)
        assert f"the temporary folder {small} is full" in line and "written" in line, line
        assert "the store failed" not in line  # the disk is named for what it is, not as the store
    assert _trials(db) == []
    assert _session_row(db)[0] == "crashed"
    proc = tunelab("tune", "--resume", "1", db=db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [status for status, _ in _trials(db)] == ["ok"] * 4
    assert _session_row(db)[0] == "finished"


def test_a_temporary_folder_that_fills_while_tuning_stops_the_session_and_blames_no_config(tmp_path):
    """TMPDIR on a 400 KiB tmpfs, 16 trials: builds and links fill it (the issue: 3 of 16 trials stored
    as run_error "ld: final link failed: No space left on device", "finished", exit 0, those configs
    never measured again). Now: exit 3, one line naming the folder; every trial stored before it is a
    measurement, none an error of the disk's; a resume with room measures the rest, every trial ok."""
    db = tmp_path / "filling.sqlite"
    with mounted_tmpfs(tmp_path / "tmp", "400k") as small:
        args = [*TUNE, "--shape", "M=32,N=32,K=32", "--trials", "16", "--batch", "8", *FAST_MEASURE_ARGS]
        line = one_error_line(tunelab(*args, db=db, env={"TMPDIR": str(small)}), code=3)
        assert f"the temporary folder {small} is full" in line and "No space left on device" in line, line
    stored = _trials(db)
    assert len(stored) < 16 and all(status == "ok" for status, _ in stored), stored
    status, error = _session_row(db)
    assert status == "crashed" and "No space left on device" in error
    proc = tunelab("tune", "--resume", "1", db=db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = _trials(db)
    assert after[: len(stored)] == stored  # kept as they were
    assert len(after) == 16 and all(status == "ok" for status, _ in after), after
    assert _session_row(db)[0] == "finished"

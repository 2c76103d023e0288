"""Issue 26, "nothing false", probes 3 and 7: `tunelab import` of tunelab's own export (the CLI's default,
a template-space session, which it refused as "a point of neither of tunelab's spaces"), and of huge or
hostile records files (a 200 MB line of digits was a ValueError traceback; a 300 MB records file took
7.2 GB of memory before MemoryError). Real sessions, real exports, `tunelab` in real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_bad_input import one_error_line, tuned_template_export, tunelab

from tunelab.core.store import Store

pytestmark = pytest.mark.slow

DB_FILES = ("database_workload.json", "database_tuning_record.json")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A finished real template-space session (GEMM 32^3, random tuner, 4 trials) exported by the CLI with
    its defaults (every format)."""
    return tuned_template_export(tmp_path_factory.mktemp("own_export"), "export")


def test_tunelab_imports_its_own_template_export(exported, tmp_path):
    """Tune (template), export, import (the database folder, and the export folder itself): the imported
    session's best trial is the exported one, the same config, and its template rebuilds the same IR."""
    import tvm_ffi

    from tunelab.core.search.space.factory import space_for_session

    db, session_id, out = exported
    doc = json.loads(next(out.glob("*.schedule.json")).read_text())
    with Store(db) as source:
        exported_trial = source.trial(doc["session"]["trial_id"])
        source_space = space_for_session(source.session(session_id))
        source_mod = source_space.schedule(exported_trial.config).mod
    for given, imported_db in ((out / "database", tmp_path / "a.sqlite"), (out, tmp_path / "b.sqlite")):
        proc = tunelab("import", str(given), db=imported_db)
        assert proc.returncode == 0, proc.stderr[-2000:]
        with Store(imported_db) as store:
            (record,) = store.sessions()
            assert record.space_kind == "template" and record.status == "finished"
            (trial,) = store.trials(record.id)
            assert record.best_trial_id == trial.id and trial.status == "ok"
            assert trial.config == exported_trial.config == doc["config"]
            (line,) = [json.loads(t) for t in (out / "database" / DB_FILES[1]).read_text().splitlines()]
            assert trial.trace_json == line[1][0]  # the trace the export wrote, as it wrote it
            assert tvm_ffi.structural_equal(space_for_session(record).schedule(trial.config).mod, source_mod)
            assert trial.latency_ms == pytest.approx(doc["stats"]["median_ms"], rel=1e-6)


def test_an_exported_config_that_is_not_its_schedules_is_refused(exported, tmp_path, capsys):
    """The config annotation is believed only when the template rebuilds that very schedule from it."""
    from tunelab.core.search.space.factory import space_for_session

    db, session_id, out = exported
    with Store(db) as source:
        unrolls = next(
            k for k in space_for_session(source.session(session_id)).knobs if k["name"] == "unroll"
        )
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / DB_FILES[0]).write_bytes((out / "database" / DB_FILES[0]).read_bytes())
    (line,) = [json.loads(t) for t in (out / "database" / DB_FILES[1]).read_text().splitlines()]
    (inst,) = [i for i in line[1][0][0] if i[0] == "Annotate" and i[2] == ["tunelab.config"]]
    config = json.loads(inst[1][1][1:-1])  # a string input of a trace is kept in its quotes
    config["unroll"] = next(u for u in unrolls["candidates"] if u != config["unroll"])  # another point
    inst[1][1] = '"' + json.dumps(config, sort_keys=True) + '"'
    (bad / DB_FILES[1]).write_text(json.dumps(line) + "\n")
    line_ = one_error_line(tunelab("import", str(bad), db=tmp_path / "none.sqlite"), code=2)
    assert "is a point of neither of tunelab's spaces" in line_
    assert not (tmp_path / "none.sqlite").exists()


def _hostile(exported, folder: Path, records: str | None = None) -> Path:
    _, _, out = exported
    folder.mkdir()
    (folder / DB_FILES[0]).write_bytes((out / "database" / DB_FILES[0]).read_bytes())
    if records is not None:
        (folder / DB_FILES[1]).write_text(records)
    return folder


def test_a_line_of_digits_is_one_line(exported, tmp_path):
    """A 100,000-digit number (Python's int limit: 'Exceeds the limit (4300 digits)') and a 65 MiB line of
    digits (longer than any record: refused before it is parsed) are each one line, exit 2, no store."""
    db = tmp_path / "none.sqlite"
    digits = _hostile(exported, tmp_path / "digits", "1" * 100_000 + "\n")
    line = one_error_line(tunelab("import", str(digits), db=db), code=2)
    assert "line 1 is not a JSON record: Exceeds the limit" in line
    huge = _hostile(exported, tmp_path / "huge")
    with (huge / DB_FILES[1]).open("w") as f:
        for _ in range(65):
            f.write("7" * 2**20)
        f.write("\n")
    line = one_error_line(tunelab("import", str(huge), db=db), code=2)
    assert "line 1 is longer than 64 MiB" in line
    assert not db.exists()


MEASURE_READ = """
import resource, sys
from tunelab.core.usecases.ms_import import read_work_dir
import tvm  # noqa: F401 - loaded before the baseline: its libraries are not the file's cost
from tvm.s_tir import meta_schedule  # noqa: F401
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
(workload,) = read_work_dir(sys.argv[1])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(workload.records), (after - before) * 1024)
"""


def test_a_large_records_file_is_streamed_in_bounded_memory(exported, tmp_path):
    """A 30 MB records file (the exported record again and again, each with its own run time, as
    MetaSchedule records a schedule measured again): read in a child process, its peak memory grows by
    less than 4x the file (JSONDatabase's whole-file read took 24x-68x: 3.4 GB for 50 MB), and every
    record is read, in order."""
    _, _, out = exported
    (line,) = [json.loads(t) for t in (out / "database" / DB_FILES[1]).read_text().splitlines()]
    big = _hostile(exported, tmp_path / "big")
    size, n = 0, 0
    with (big / DB_FILES[1]).open("w") as f:
        while size < 30 * 2**20:
            line[1][1] = [1e-5 + n * 1e-12]
            text = json.dumps(line) + "\n"
            f.write(text)
            size, n = size + len(text), n + 1
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE_READ, str(big)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, grown = map(int, proc.stdout.split())
    assert count == n
    assert grown < 4 * size, f"{grown / 2**20:.0f} MiB for a {size / 2**20:.0f} MiB file"

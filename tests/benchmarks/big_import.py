"""The peak memory of `tunelab import` on a large MetaSchedule records file (issue 26, probe 7).

A 300 MB records file took 7.2 GB of memory before a MemoryError when the import read it whole (as
MetaSchedule's JSONDatabase does); the import now streams it one line at a time. This tunes a small
template session (GEMM 32^3, 4 trials), exports it, grows the export's records file to the size asked
for (the exported record again and again, each with its own run time, as MetaSchedule records a schedule
measured again), imports it with `tunelab import` in a process of its own and reports that process's
peak resident memory (``getrusage`` of the waited-for child).

    python tests/benchmarks/big_import.py --mb 300
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECORDS = "database_tuning_record.json"
WORKLOADS = "database_workload.json"


def tunelab(*args: str, db: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tunelab", *args, "--db", str(db)]
    return subprocess.run(command, capture_output=True, text=True, check=True)


def grow(records: Path, workloads: Path, folder: Path, size_bytes: int) -> int:
    """`folder` holding the workload file and a records file of at least `size_bytes`; its record count."""
    folder.mkdir()
    (folder / WORKLOADS).write_bytes(workloads.read_bytes())
    (line,) = [json.loads(t) for t in records.read_text().splitlines()]
    size, count = 0, 0
    with (folder / RECORDS).open("w") as f:
        while size < size_bytes:
            line[1][1] = [1e-5 + count * 1e-12]
            text = json.dumps(line) + "\n"
            f.write(text)
            size, count = size + len(text), count + 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=300.0, help="the records file's size in MB (10^6 bytes)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        db = root / "tuned.sqlite"
        tunelab("tune", "gemm", "--shape", "M=32,N=32,K=32", "--trials", "4", "--tuner", "random",
                "--confirm-runs", "0", db=db)  # fmt: skip
        tunelab("export", "1", "--out", str(root / "out"), db=db)
        database = root / "out" / "database"
        count = grow(database / RECORDS, database / WORKLOADS, root / "big", int(args.mb * 1e6))
        size = (root / "big" / RECORDS).stat().st_size
        started = time.perf_counter()
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tunelab",
                "import",
                str(root / "big"),
                "--db",
                str(root / "imported.sqlite"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        out, err = child.stdout.read(), child.stderr.read()
        code = os.waitstatus_to_exitcode(status)
        peak = usage.ru_maxrss * 1024  # KiB on Linux
        result = {
            "records_bytes": size,
            "records": count,
            "exit_code": code,
            "seconds": round(seconds, 1),
            "peak_rss_bytes": peak,
            "peak_over_file": round(peak / size, 3),
            "last_line": (out or err).strip().splitlines()[-1:] or [""],
        }
        print(json.dumps(result, indent=1))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Libraries rebuilt from the traces a tuning run stored: a case re-measured without tuning it again.

``python rebuild_job.py JOB.json OUT.json``. The job names the problem and, per kernel, its label and its
trace as ``tune_job.py`` stored it (MetaSchedule's JSON, postprocessing included); each trace is replayed on
the problem's module and built for this machine's target, as ``tune_job.py`` built it. The result maps each
label to its library. Used by ``run_suite.py --remeasure``: when the vendor baseline changed (PyTorch's
convolution installed after the run) or a re-measurement was disturbed, hours of tuning need not be redone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the suite is importable from its parent folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suite.describe import replayed
from suite.tune_job import _problem, build_library


def rebuild(job: dict[str, Any], folder: Path) -> dict[str, str]:
    _, _, mod, target = _problem(job)
    libraries = {}
    for kernel in job["kernels"]:
        path = folder / f"{kernel['label']}.so"
        build_library(replayed(mod, kernel["trace"]), target, path)
        libraries[kernel["label"]] = str(path)
    return libraries


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text())
    folder = Path(job["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    Path(argv[2]).write_text(json.dumps({"libraries": rebuild(job, folder)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

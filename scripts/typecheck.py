#!/usr/bin/env python3
"""mypy on the engine (`tunelab.core`) and the desktop app (`tunelab.app`), at the strictness
`[tool.mypy]` in pyproject.toml keeps green.

    python scripts/typecheck.py            # exit 1 on any error

mypy follows imports by path, and the folder core/ becomes tunelab.core only when installed (an
editable install maps it with an import hook mypy does not run). So, as scripts/import_graph.py does
for the import graph, mypy reads a copy laid out as the wheel lays it out.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from import_graph import ROOT, installed_view


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tunelab-typecheck-") as folder:
        view = installed_view(Path(folder))
        command = [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "-p",
            "tunelab.core",
            "-p",
            "tunelab.app",
        ]
        return subprocess.run(command, cwd=view).returncode


if __name__ == "__main__":
    sys.exit(main())

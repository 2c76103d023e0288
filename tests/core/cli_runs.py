"""Running the `tunelab` command in a child process, as a person would, and reading its one error line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_tunelab(
    *args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """`python -m tunelab ARGS` run to its end, stdout and stderr captured as text (``env`` None: this process's)."""
    return subprocess.run(
        [sys.executable, "-m", "tunelab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )


def tune_gemm(*options: str, shape: str = "M=32,N=32,K=32", trials: int, **flags: object) -> list[str]:
    """`tune gemm --shape SHAPE --trials N --FLAG VALUE ... OPTIONS`: the arguments of a small GEMM session,
    each keyword a flag with its value (``min_repeat_ms=1``: ``--min-repeat-ms 1``)."""
    named = [arg for name, value in flags.items() for arg in (f"--{name.replace('_', '-')}", str(value))]
    return ["tune", "gemm", "--shape", shape, "--trials", str(trials), *named, *options]


def one_error_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The single 'tunelab: error:' line of a run that failed with ``code``, with no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tunelab: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]

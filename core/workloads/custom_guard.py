"""The child processes that guard tunelab from a custom workload file: its load, its shapes and its reference().

A person's file runs in tunelab's process only after a child process loaded it first within a time limit
(:func:`vet_custom`), and its ``reference()`` runs in a forked child (:func:`reference_in_child`), so a
file that hangs, ends its process or crashes is one WorkloadError, not tunelab's end.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

import numpy as np

from tunelab.core.errors import WorkloadError

VET_TIMEOUT_S = 60.0  # a workload file's child check must finish within this (``$TUNELAB_CUSTOM_TIMEOUT_S``)
VET_TIMEOUT_ENV = "TUNELAB_CUSTOM_TIMEOUT_S"
# What this process already vetted: (source hash, name, shape, dtype) -> None (fine) or the error message.
_VETTED: dict[tuple[str, str, str, str], str | None] = {}

FILENAME = "<custom workload>"


def _user_line(exc: BaseException) -> int | None:
    """The line of the custom file where ``exc`` was raised (deepest frame in that file)."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == FILENAME:
            line = frame.lineno
    return line


def describe(exc: BaseException) -> str:
    line = _user_line(exc)
    if isinstance(exc, SystemExit):
        text = f"sys.exit({exc.code!r}); a workload file must not end the process"
    else:
        text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    return f"{text} (line {line})" if line is not None else text


# What the person's code may raise and still be a message, not tunelab's end: everything but Ctrl-C.
USER_ERRORS = (Exception, SystemExit)


def vet_timeout_s() -> float:
    """The child check's time limit: ``$TUNELAB_CUSTOM_TIMEOUT_S`` or :data:`VET_TIMEOUT_S`."""
    try:
        value = float(os.environ.get(VET_TIMEOUT_ENV, "") or VET_TIMEOUT_S)
    except ValueError:
        return VET_TIMEOUT_S
    return value if value > 0 else VET_TIMEOUT_S


def vet_custom(
    source: str,
    name: str = "custom",
    *,
    build: bool = False,
    shape: Any = None,
    dtype: str | None = None,
    timeout_s: float | None = None,
) -> None:
    """Load a workload file in a child process first, within a time limit; WorkloadError (one line) when
    it fails there: raises, loops past the limit, or ends the process (sys.exit, os._exit, a signal).

    Without ``build`` the child does what loading does (run the file, build the default shape). With it
    the child also reads ``shape`` (text, dict or None for the default; every parameter named) and
    ``dtype``, checks they fit in memory, and builds that shape's tensors, inputs and NumPy reference, as
    a session at that shape will. Each check is done once per process; a syntax error is found without one.
    """
    if not isinstance(source, str):
        raise WorkloadError(f"{name}: the workload file must be text, got {type(source).__name__}")
    try:
        compile(source, FILENAME, "exec")
    except SyntaxError:
        return  # the in-process load names the line without running anything
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    key = (digest, name, json.dumps(shape, sort_keys=True) if build else "", str(dtype) if build else "")
    if key not in _VETTED:
        outcome = _vet_in_child(source, name, build, shape, dtype, timeout_s or vet_timeout_s())
        _VETTED[key] = outcome.get("error")
        if _VETTED[key] is None:
            _VETTED[(digest, name, "", "")] = None  # it loaded, too
            if build:  # the same check for the shape as parsed (what Workload.vet asks)
                _VETTED[(digest, name, json.dumps(outcome["shape"], sort_keys=True), outcome["dtype"])] = None
    refusal = _VETTED[key]
    if refusal is not None:
        raise WorkloadError(refusal)


def _vet_in_child(
    source: str, name: str, build: bool, shape: Any, dtype: str | None, timeout_s: float
) -> dict[str, Any]:
    from tunelab.core.faults import describe_exit

    with tempfile.TemporaryDirectory(prefix="tunelab-vet-") as folder:
        job, result, log = (os.path.join(folder, f) for f in ("job.json", "result.json", "stderr.txt"))
        with open(job, "w", encoding="utf-8") as f:
            json.dump({"source": source, "name": name, "build": build, "shape": shape, "dtype": dtype}, f)
        with open(log, "wb") as err:
            # Its own process group: a file that starts processes of its own is stopped with them.
            proc = subprocess.Popen(
                [sys.executable, "-m", "tunelab.core.workloads.custom", "--vet", job, result],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                what = (
                    f"building the shape {_shape_text(shape)}"
                    if build and isinstance(shape, dict)
                    else "loading"
                )
                return {
                    "error": f"{name}: the workload file did not finish {what} within {timeout_s:g} s "
                    f"(an endless loop?); it was stopped and nothing ran in tunelab"
                }
        try:
            with open(result, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            tail = _last_line(log)
            return {
                "error": f"{name}: the workload file ended the process that loads it "
                f"({describe_exit(proc.returncode)}) before it finished" + (f": {tail}" if tail else "")
            }


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _last_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _shape_text(shape: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


_SIGNALS = {int(x) for x in signal.Signals}


def reference_in_child(
    wl: Any, inputs: list[np.ndarray], shape: dict[str, int], dtype: str | None
) -> np.ndarray:
    """:meth:`CustomWorkload.reference` in a forked child of this process (the file is not run again: the
    child has its functions already), its answer as a .npy file; a crash there is one WorkloadError."""
    limit = vet_timeout_s() * 5  # the vetting child already ran this reference at this shape within 1x
    with tempfile.TemporaryDirectory(prefix="tunelab-reference-") as folder:
        result, log = os.path.join(folder, "result.npy"), os.path.join(folder, "stderr.txt")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; it ends with os._exit whatever happens
            _reference_child(wl, inputs, shape, dtype, result, log)
        status = _wait(pid, limit)
        if status is None:
            raise WorkloadError(
                f"{wl.name}: the workload file's reference() did not finish within {limit:g} s at "
                f"{_shape_text(shape)}; it was stopped"
            )
        if os.path.exists(result + ".error"):
            with open(result + ".error", encoding="utf-8") as f:
                raise WorkloadError(f.read().strip())
        if status != 0 or not os.path.exists(result):
            how = (
                f"died of {signal.Signals(-status).name}"
                if -status in _SIGNALS
                else f"exited with status {status}"
            )
            raise WorkloadError(
                f"{wl.name}: the workload file's own code crashed the process that runs its reference() "
                f"({how}) at {_shape_text(shape)}: the file's fault, not a kernel's"
            )
        return np.load(result, allow_pickle=False)


def _reference_child(
    wl: Any, inputs: list[np.ndarray], shape: dict[str, int], dtype: str | None, result: str, log: str
) -> None:
    """The forked child: reference() here, its answer (or its one-line error) written, then the end at once
    (os._exit: none of the parent's exit handlers run here)."""
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(fd, 2)  # a crash's dump (faulthandler's, TVM's) is not tunelab's stderr
        for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)  # die of it, as the exit status says
        np.save(result, wl._reference(inputs, shape, dtype), allow_pickle=False)
    except WorkloadError as exc:
        _write_error(result, str(exc))
    except BaseException as exc:  # noqa: BLE001 - whatever escaped is the file's doing
        _write_error(result, f"{wl.name}: the workload file failed: {describe(exc)}")
    os._exit(0)


def _write_error(result: str, message: str) -> None:
    with open(result + ".error", "w", encoding="utf-8") as f:
        f.write(message)


def _wait(pid: int, limit: float) -> int | None:
    """The child's exit status (negative: the signal it died of), or None when it ran past ``limit``
    seconds (then it is killed)."""
    deadline, pause = time.monotonic() + limit, 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)

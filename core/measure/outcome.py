"""What a measured candidate came to: its MeasureResult, and a failed run's message as a status and one line."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tunelab.core.faults import TOO_SLOW, cuda_fault


@dataclass(frozen=True)
class MeasureResult:
    # "ok" | "build_error" | "run_error" | "timeout" (a hang, or "too slow: ..." when the per-call wall
    # limit stopped it) | "wrong_result"
    status: str
    error: str | None  # one line
    samples_ms: tuple[float, ...]
    build_s: float | None
    run_s: float | None
    started_at: float
    finished_at: float
    device: str | None = None  # the RPC server that measured it; None: this machine

    @classmethod
    def build_error(cls, built: Any, build_s: float, started: float) -> MeasureResult:
        """A candidate whose build failed (``built``: MetaSchedule's BuilderResult); it never ran."""
        return cls("build_error", _short(built.error_msg), (), build_s, None, started, time.time())

    @classmethod
    def measured(
        cls, run_secs: Any, build_s: float, t0: float, t1: float, started: float, device: str | None = None
    ) -> MeasureResult:
        """A candidate that ran from ``t0`` to ``t1`` and gave the runner's samples (seconds)."""
        samples = tuple(float(x) * 1e3 for x in run_secs)
        return cls("ok", None, samples, build_s, t1 - t0, started, t1, device)

    @classmethod
    def failed(
        cls,
        message: str,
        error: str,
        build_s: float,
        t0: float,
        t1: float,
        started: float,
        device: str | None = None,
    ) -> MeasureResult:
        """A candidate whose run failed with the runner's ``message``, told in ``error`` (one line)."""
        return cls(_classify(message), error, (), build_s, t1 - t0, started, t1, device)


def _classify(message: str) -> str:
    if "Timeout" in message or "timeout" in message.lower().split("\n")[0]:
        return "timeout"
    if "SIGALRM" in message:  # stopped at the per-call wall limit (Evaluate's watchdog)
        return "timeout"
    if "wrong result" in message:
        return "wrong_result"
    return "run_error"


def _exception_text(text: str) -> str:
    """The exception a worker's traceback ends with, without the frames: 'MemoryError',
    'tvm.error.InternalError: CUDALaunch Error: ...' (its own lines kept); the text itself when it is
    not a traceback."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return text
    # Frames are indented; the exception starts at the first line that is not (its own further lines
    # may be indented, as TVM's " grid=(...)" is).
    after = lines[starts[-1] + 1 :]
    first = next((i for i, line in enumerate(after) if line and not line[0].isspace()), None)
    return "\n".join(after[first:]).strip() if first is not None else text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _run_error_text(message: str, timeout_s: float, call_limit_s: float | None = None) -> str:
    """MetaSchedule's runner message in one line of words: how the kernel failed, without the runner's
    preamble or the worker's traceback. A CUDA fault is named with its launch shape and likely cause
    (tunelab.core.faults.cuda_fault), as a CPU crash is by its signal."""
    text = message.strip()
    if text.startswith(("LocalRunner: Timeout", "RPCRunner: Timeout")):
        return f"hang: no result within {timeout_s:g} s (the worker was killed)"
    for runner in ("LocalRunner", "RPCRunner"):
        text = text.removeprefix(f"{runner}: An exception occurred").strip()
    if "SIGALRM" in text:  # Evaluate's watchdog stopped the call
        limit = f" of {call_limit_s:g} s" if call_limit_s else ""
        return f"{TOO_SLOW}: one call ran past the per-call wall limit{limit} and was stopped"
    text = _exception_text(text)
    if "WrongResult: " in text:  # tunelab's own check: its sentence, not the exception's name
        return _one_line(text.partition("WrongResult: ")[2])
    if text in ("Subprocess terminated", ""):  # without tunelab.core.faults' patch: the status is unknown
        return "the worker running the kernel died (exit status unknown)"
    fault = cuda_fault(text)
    if fault is not None:
        return fault.line()
    return _one_line(text)


def _short(message: str, limit: int = 2000) -> str:
    text = message.strip()
    return text if len(text) <= limit else text[:limit] + " ..."

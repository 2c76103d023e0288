"""The deployment gate: does an exported kernel still run within a tolerance of the figure its file states?

``tunelab validate SCHEDULE_FILE --gate PCT`` re-measures the file's schedule in fresh processes
(:func:`tunelab.core.trust.remeasure.api.validate_schedule_file`) and compares the median with the file's
``stats.median_ms``. :func:`stated_figure` refuses, before anything is measured, a file whose figure cannot
be held to (missing, not a positive number, never confirmed, a noisy confirmation); :func:`judge_gate` is
the comparison, a pure function of the report. A figure confirmed beside busy processes is judged: noise
only adds time, so it is pessimistic and the gate is lenient with it, which the gate's line says.

A failure measured while other processes were busy (or the machine throttled) is not yet a verdict on the
kernel: :func:`gate_until_judged` measures again, for up to the patience the file's confirmation had,
until an attempt passes (noise only adds time, so a pass beside noise is a pass) or fails undisturbed. Where
the machine never settles, the fastest attempt is judged and its line names what kept it busy.

TVM-free: the CLI imports this before it measures."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.records_json import JsonRecord
from tunelab.core.trust.remeasure.attempts import measure_until
from tunelab.core.trust.remeasure.report import ScheduleResult, ValidationReport, ms_text, pct_text
from tunelab.core.trust.remeasure.verdict import recording_disturbance


@dataclass(frozen=True, slots=True)
class GateResult(JsonRecord):
    """The gate's finding: the stated and measured figures, how much slower, and the likeliest cause."""

    pct: float  # the tolerance, percent of the stated figure
    stated_ms: float
    measured_ms: float
    passed: bool
    cause: str | None  # why it is slower, in words; None when it passed
    note: str | None  # what to keep in mind about the stated figure (recorded beside busy processes)
    disturbed: str | None = None  # what disturbed the gate's own runs, in words; None when nothing did
    attempts: int = 1  # how many times the kernel was measured (again while a failure was disturbed)

    json_properties = {"slower": "measured_ms"}

    @property
    def slower(self) -> float:
        """Measured over stated, minus 1: 0.25 is 25 % slower, negative is faster."""
        return self.measured_ms / self.stated_ms - 1

    def line(self) -> str:
        how = f"{pct_text(abs(self.slower))} {'slower' if self.slower > 0 else 'faster'}"
        figures = f"{ms_text(self.measured_ms)} against the {ms_text(self.stated_ms)} its file states ({how})"
        if self.passed:
            text = f"gate passed: {figures}, within {self.pct:g}%"
        else:
            text = f"gate failed: {figures}, beyond {self.pct:g}%; likely cause: {self.cause}"
        if self.attempts > 1:
            text += (
                f" (measured {self.attempts} times: the machine stayed busy; this is the fastest)"
                if self.disturbed and not self.passed
                else f" (measured {self.attempts} times: the earlier ones were disturbed)"
            )
        return text + (f" ({self.note})" if self.note else "")


def check_gate_pct(pct: float) -> None:
    if not math.isfinite(pct) or pct < 0:
        raise TunelabError(f"the gate is a percentage of 0 or more, not {pct:g}", option="gate")


def check_gate_wait(wait_s: float) -> None:
    if not math.isfinite(wait_s) or not 0 <= wait_s <= 86_400:
        raise TunelabError(
            f"the gate's wait for a quiet machine is 0..86400 seconds, not {wait_s:g}", option="gate-wait"
        )


def stated_figure(doc: dict[str, Any], what: str) -> float:
    """The figure a schedule file states (``stats.median_ms``), when the gate can hold a kernel to it;
    else TunelabError, one line saying why the file cannot be judged."""
    raw = doc.get("stats")
    stats: dict[str, Any] = raw if isinstance(raw, dict) else {}
    figure = stats.get("median_ms")
    if (
        isinstance(figure, bool)
        or not isinstance(figure, (int, float))
        or not math.isfinite(figure)
        or figure <= 0
    ):
        raise TunelabError(
            f"{what} cannot be gated: it states no figure to hold to (stats.median_ms is {figure!r})"
        )
    why = stats.get("untrusted_because")
    if why is None and stats.get("source") == "session" and "trusted" not in stats:
        why = "never confirmed in fresh processes: the session's own figure of its winner is biased low"
    # A figure taken beside busy processes is pessimistic and can be gated (leniently); one biased low or
    # scattered would fail a kernel that did not change.
    if isinstance(why, str) and not why.startswith("confirmed while"):
        raise TunelabError(
            f"{what} cannot be gated: its figure is not one to hold to ({why}); confirm the session "
            "(tunelab validate SESSION) and export it again"
        )
    return float(figure)


def judge_gate(report: ValidationReport, stated_ms: float, pct: float) -> GateResult:
    """Compare the re-measured median with the stated figure; TunelabError when no run gave a timing."""
    (s,) = report.schedules
    if s.remeasured_ms is None:
        errors = "; ".join(dict.fromkeys(s.errors)) or "no run gave a timing"
        raise TunelabError(f"{s.label} cannot be gated here: its kernel did not run ({errors})")
    passed = s.remeasured_ms <= stated_ms * (1 + pct / 100)
    note = f"the stated figure was {s.recorded_disturbance}" if s.recorded_disturbance else None
    cause = None if passed else likely_cause(s)
    return GateResult(pct, stated_ms, s.remeasured_ms, passed, cause, note, disturbed=gate_disturbance(s))


def gate_until_judged(
    measure: Callable[[], ValidationReport],
    stated_ms: float,
    pct: float,
    *,
    max_s: float,
    on_stage: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[ValidationReport, GateResult]:
    """Measure and judge; while the kernel fails the gate with its runs disturbed, measure again if another
    attempt fits in ``max_s`` seconds from the start (judged by the last attempt's length). Returns the
    first attempt that passes or fails undisturbed; else the fastest attempt, its result saying how many
    there were. A pass is never measured again: noise only adds time."""

    def judged() -> tuple[ValidationReport, GateResult]:
        report = measure()
        return report, judge_gate(report, stated_ms, pct)

    def again(why: str, attempt: int, left_s: float) -> None:
        if on_stage is not None:
            on_stage(
                f"failed while {why}: measuring again (attempt {attempt}, {left_s:.0f} s left of {max_s:.0f} s)"
            )

    attempts = measure_until(
        judged, lambda a: None if a[1].passed else a[1].disturbed, max_s=max_s, on_again=again, clock=clock
    )
    (report, result), why = attempts[-1]
    if why is not None:  # out of time, every attempt failed beside busy processes: the fastest
        report, result = min((a for a, _ in attempts), key=lambda a: a[1].measured_ms)
    return report, replace(result, attempts=len(attempts))


def gate_disturbance(s: ScheduleResult) -> str | None:
    """What disturbed the gate's runs of ``s`` (other processes busy, the machine throttling), or None."""
    return recording_disturbance(
        what="the gate's runs",
        busy_pids=s.other_busy_pids,
        names=s.process_names,
        busy_fraction=s.busy_fraction,
        throttled=s.throttled,
    )


def likely_cause(s: ScheduleResult) -> str:
    """Why a kernel runs slower than stated, the strongest evidence first: the machine itself slower (the
    reference kernel), other processes busy or throttling now, the runs' own scatter, else the kernel."""
    drift = s.drift_note()
    if drift is not None and s.machine_drift is not None and s.machine_drift > 1:
        return drift
    now = gate_disturbance(s)
    if now is not None:
        return f"{now} (measure again on a quiet machine)"
    if s.verdict == "noisy" and s.cause:
        return s.cause
    placement = s.placement_note()
    if placement is not None:
        return placement
    return (
        "nothing measured disturbed the runs: the kernel itself runs slower on this machine (other "
        "hardware, TVM or its settings; `tunelab jitter` on the file tells its spread apart)"
    )

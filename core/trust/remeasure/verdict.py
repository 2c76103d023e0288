"""Judge a validation's fresh-process runs: each schedule's figures, its verdict and likely cause, the ranking.

Each schedule gets a verdict in plain words:

* ``stable``: the re-measured median agrees with the recorded one and the runs agree with each other;
* ``noisy``: the runs disagree (cv above :data:`NOISY_CV`), or another process was busy (or the GPU
  throttled) during at least :data:`DISTURBED_FRACTION` of them, or the recorded figure is much
  slower than every re-measurement; the likely cause comes from the telemetry ("another process
  (pid 1234, python) was busy on the CPU during 60% of the runs", thermal throttling, power capping,
  first-run JIT/allocation cost, ...);
* ``regressed``: the re-measured median is slower than recorded by more than :data:`REGRESS_TOL` and
  the recorded figure lies outside the re-measured interquartile range, on a quiet machine, and the
  figure was recorded on a quiet machine too (one recorded while another process was busy, the
  machine throttled or its samples scattered is "optimistic", a ``noisy`` verdict); or the
  schedule no longer builds, runs or gives the right answer. When the recorded figure is the
  session's own and other trials of the session measured at or below the re-measured figure, it is
  ``noisy`` instead, with the winner's curse as the cause: the fastest of several noisy figures is
  biased low (see :mod:`tunelab.core.trust.confirm`).

Pure functions of the measurements (no processes, no TVM): :func:`judge` one schedule
(:func:`tunelab.core.trust.remeasure.summary.summarize` the whole).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tunelab.core.measure.placement import placement_ratio
from tunelab.core.stats import coefficient_of_variation, median, quartiles
from tunelab.core.trust.remeasure.report import (
    DRIFT_TOL,
    Measurement,
    RecordedTelemetry,
    ScheduleResult,
    TelemetryWindow,
    ms_text,
    pct_text,
)

NOISY_CV = 0.10  # coefficient of variation (samples, or per-run medians) above which runs disagree
REGRESS_TOL = 0.10  # re-measured vs recorded median: beyond this (and outside the IQR) it changed
DISTURBED_FRACTION = 0.25  # share of runs with another busy process / throttling that taints them
MIN_RUNS_TO_JUDGE = 3  # fewer runs can say "noisy" or "stable", never "regressed"
FIRST_SAMPLE_RATIO = 1.3  # first timed sample of a process vs the rest: first-run cost leaking in
MAX_NAMED = 6  # other processes named in a cause (the most often seen first)

_THERMAL = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
_POWER = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})


@dataclass(frozen=True)
class RecordedSchedule:
    """One schedule to re-measure, with the figure it is judged against."""

    label: str
    trial_id: int | None
    config: Any
    recorded_ms: float | None
    recorded_samples_ms: tuple[float, ...]
    recorded_telemetry: RecordedTelemetry | None
    schedule: Any  # tvm Schedule
    # The session's own figure where `recorded_ms` is a fresh-process confirmation (tunelab.core.trust.confirm).
    session_ms: float | None = None
    # The session's figures of the other successful trials of its shape (fastest first, capped): when the
    # recorded figure is the session's own, they tell a winner's curse from a regression.
    rivals_ms: tuple[float, ...] = ()
    # the reference kernel's time when `recorded_ms` was measured (a confirmation or an export), if known
    recorded_reference_ms: float | None = None
    # what disturbed the machine while `recorded_ms` was measured, in words (None: quiet or unknown)
    recorded_disturbance: str | None = None


@dataclass(frozen=True)
class Problem:
    """The workload problem every schedule of a validation solves."""

    workload: str
    shape: dict[str, int]
    dtype: str
    target: dict[str, Any]
    custom_source: str | None
    seed: int
    flops: float


def _median_of(values: Sequence[float]) -> float:
    """The median of values known to be there (a run that gave a timing has samples)."""
    value = median(values)
    assert value is not None
    return value


def recording_disturbance(
    *,
    what: str,
    busy_pids: Sequence[int] = (),
    names: dict[str, str] | None = None,
    busy_fraction: float | None = None,
    throttled: bool = False,
    throttle_reasons: Sequence[str] = (),
    cv: float | None = None,
) -> str | None:
    """How the machine was while a figure was recorded, in words, when it was not quiet; else None.

    ``what`` names the measurement ("the session's measurement", "the confirmation's runs"); the
    figure counts as disturbed when another process was busy (during at least
    :data:`DISTURBED_FRACTION` of the runs, where that is known), the machine throttled, or its samples
    scattered beyond :data:`NOISY_CV`."""
    parts = []
    if busy_pids and (busy_fraction is None or busy_fraction >= DISTURBED_FRACTION):
        shown = ", ".join(
            f"pid {p}" + (f" ({names[str(p)]})" if names and str(p) in names else "") for p in busy_pids[:3]
        )
        during = (
            f" during {pct_text(busy_fraction)} of {what}" if busy_fraction is not None else f" during {what}"
        )
        parts.append(f"{shown} {'was' if len(busy_pids) == 1 else 'were'} busy{during}")
    if throttled:
        reasons = f" ({', '.join(throttle_reasons)})" if throttle_reasons else ""
        parts.append(f"the machine throttled{reasons} during {what}")
    if cv is not None and cv > NOISY_CV:
        parts.append(f"{what} scattered (CV {pct_text(cv)})")
    return "; ".join(parts) or None


def judge(
    item: RecordedSchedule, ms: list[Measurement], build_error: str | None, problem: Problem
) -> ScheduleResult:
    """One schedule's figures, telemetry and verdict from its measurements (one per run)."""
    ok = [m for m in ms if m.ok and m.samples_ms is not None]
    samples = [x for m in ok for x in m.samples_ms or ()]
    run_medians = [_median_of(m.samples_ms or ()) for m in ok]
    remeasured = median(samples)
    quart = quartiles(samples)
    windows = [m.telemetry for m in ms if m.telemetry is not None]
    n_win = len(windows)
    busy_runs = sum(1 for w in windows if w.other_busy_pids)
    throttled_runs = sum(1 for w in windows if w.throttled)
    names = {int(p): n for w in windows for p, n in w.names.items()}
    first_ratios = _first_ratios(ok)
    cold = [m.cold_ms for m in ok if m.cold_ms is not None]
    recorded = item.recorded_ms
    ratio = remeasured / recorded if remeasured is not None and recorded else None
    layout_ms = _layout_medians(ok)
    placement = placement_ratio(layout_ms)
    reference_ms = median([m.reference_ms for m in ok if m.reference_ms])
    drift = (
        reference_ms / item.recorded_reference_ms
        if reference_ms is not None and item.recorded_reference_ms
        else None
    )
    quiet = [m for m in ok if m.telemetry is not None and m.telemetry.quiet]
    quiet_ms = median([x for m in quiet for x in m.samples_ms or ()])
    entry = ScheduleResult(
        label=item.label,
        trial_id=item.trial_id,
        config=item.config,
        recorded_ms=recorded,
        recorded_samples_ms=tuple(item.recorded_samples_ms),
        recorded_kind="confirmed" if item.session_ms is not None else "session",
        session_ms=item.session_ms,
        rivals=sum(1 for x in item.rivals_ms if x <= remeasured) if remeasured is not None else None,
        recorded_telemetry=item.recorded_telemetry,
        recorded_disturbance=item.recorded_disturbance,
        remeasured_ms=remeasured,
        ratio=ratio,
        mean_ms=statistics.fmean(samples) if samples else None,
        min_ms=min(samples) if samples else None,
        max_ms=max(samples) if samples else None,
        q1_ms=quart[0] if quart else None,
        q3_ms=quart[1] if quart else None,
        cv=coefficient_of_variation(samples),
        run_cv=coefficient_of_variation(run_medians),
        runs=len(ok),
        runs_tried=len(ms),
        quiet_runs=len(quiet),
        quiet_ms=quiet_ms,
        quiet_ratio=quiet_ms / recorded if quiet_ms is not None and recorded else None,
        run_medians_ms=tuple(run_medians),
        samples_ms=tuple(samples),
        cold_ms=median(cold),
        first_sample_ratio=median(first_ratios),
        layout_ms=layout_ms,
        placement_ratio=placement,
        reference_ms=reference_ms,
        recorded_reference_ms=item.recorded_reference_ms,
        machine_drift=drift,
        drift_corrected_ratio=ratio / drift if ratio is not None and drift else None,
        gflops=problem.flops / (remeasured * 1e-3) / 1e9 if remeasured else None,
        throttled=throttled_runs > 0,
        busy_fraction=busy_runs / n_win if n_win else 0.0,
        throttled_fraction=throttled_runs / n_win if n_win else 0.0,
        other_busy_pids=tuple(sorted({p for w in windows for p in w.other_busy_pids})),
        process_names={str(p): n for p, n in names.items()},
        errors=tuple(m.error or "" for m in ms if not m.ok),
        measurements=tuple(ms),
        verdict="stable",  # judged next, from the figures above
        cause=None,
    )
    verdict, cause = _verdict(entry, windows, names, build_error)
    return replace(entry, verdict=verdict, cause=cause)


def _first_ratios(ok: list[Measurement]) -> list[float]:
    """Each run's first timed sample over the median of its rest (runs of at least three samples)."""
    return [
        m.samples_ms[0] / rest
        for m in ok
        if m.samples_ms is not None
        and len(m.samples_ms) >= 3
        and (rest := median(m.samples_ms[1:])) is not None
        and rest > 0
    ]


def _layout_medians(ok: list[Measurement]) -> dict[str, float]:
    """Per buffer layout, the median of the runs' figures."""
    by_layout: dict[str, list[float]] = {}
    for m in ok:
        for layout, value in (m.layout_ms or {}).items():
            by_layout.setdefault(layout, []).append(value)
    return {layout: _median_of(values) for layout, values in by_layout.items()}


def _verdict(
    e: ScheduleResult, windows: list[TelemetryWindow], names: dict[int, str], build_error: str | None
) -> tuple[str, str | None]:
    if build_error:
        return "regressed", f"it no longer builds: {build_error}"
    if e.errors:
        return "regressed", f"it failed in {len(e.errors)} of {e.runs_tried} runs: {e.errors[0]}"
    gpu_runs = sum(1 for w in windows if w.other_gpu_pids)
    disturbed = (
        e.busy_fraction >= DISTURBED_FRACTION
        or e.throttled_fraction >= DISTURBED_FRACTION
        or (windows and gpu_runs / len(windows) >= DISTURBED_FRACTION)
    )
    unstable = any(c is not None and c > NOISY_CV for c in (e.cv, e.run_cv))
    recorded, ratio = e.recorded_ms, e.ratio
    deviates = (
        recorded is not None
        and ratio is not None
        and abs(ratio - 1) > REGRESS_TOL
        and e.q1_ms is not None
        and e.q3_ms is not None
        and not (e.q1_ms <= recorded <= e.q3_ms)
    )
    if unstable or disturbed:
        # Runs that shared the machine with another busy process (or a throttled GPU) prove nothing
        # either way, even where the figures happen to agree: stable and regressed need a quiet machine.
        return "noisy", _noise_cause(e, windows, names)
    if not deviates or ratio is None:
        return "stable", None
    if e.runs < MIN_RUNS_TO_JUDGE:
        return "noisy", (
            f"re-measured {ms_text(e.remeasured_ms)} vs {ms_text(recorded)} recorded, but {e.runs} run(s) "
            f"are too few to tell a change from noise (use {MIN_RUNS_TO_JUDGE} or more)"
        )
    drift = e.machine_drift
    if (
        drift is not None
        and abs(drift - 1) > DRIFT_TOL
        and e.drift_corrected_ratio is not None
        and abs(e.drift_corrected_ratio - 1) <= REGRESS_TOL
    ):
        return "noisy", (
            f"the machine itself was {pct_text(abs(drift - 1))} {'slower' if drift > 1 else 'faster'} than "
            f"when the figure was recorded (a reference BLAS kernel moved by as much; other tenants of the "
            f"host or clock limits, which no process list shows): re-measured {ms_text(e.remeasured_ms)} vs "
            f"{ms_text(recorded)} recorded is {e.drift_corrected_ratio:.2f}x once that is taken out"
        )
    if ratio > 1 and e.recorded_disturbance:
        # Both ends compared: a figure taken on a busy machine and slower now on a quiet one was
        # optimistic evidence (a fast outlier picked from noisy samples), not a schedule that changed.
        return "noisy", (
            f"the recorded figure was optimistic: measured while {e.recorded_disturbance}; re-measured on a "
            f"quiet machine it is {ms_text(e.remeasured_ms)}, {pct_text(ratio - 1)} slower than the "
            f"{ms_text(recorded)} recorded: the re-measured figure is the one to trust"
        )
    if ratio > 1 and e.rivals:
        return "noisy", (
            f"winner's curse: the session's figure {ms_text(recorded)} was the luckiest of close rivals — "
            f"{e.rivals} other trial(s) of the session measured at or below the {ms_text(e.remeasured_ms)} "
            f"re-measured here ({pct_text(ratio - 1)} slower), and the fastest of several noisy figures "
            "is biased low; the re-measured figure is the one to trust"
        )
    if ratio > 1:
        # without telemetry (runs on RPC servers) nothing says whether the device was quiet
        where = "on a quiet machine" if windows else "(whether the device was quiet is not known)"
        return "regressed", (
            f"re-measured median {ms_text(e.remeasured_ms)} is {pct_text(ratio - 1)} slower than the "
            f"recorded {ms_text(recorded)}, outside the re-measured IQR "
            f"[{ms_text(e.q1_ms)}, {ms_text(e.q3_ms)}], {where}"
        )
    cause = (
        f"the recorded {ms_text(recorded)} is {pct_text(1 - ratio)} slower than every typical re-measurement "
        f"({ms_text(e.remeasured_ms)}): the session's own measurement was probably disturbed"
    )
    stamp = e.recorded_telemetry
    if stamp is not None and stamp.other_busy_pids:
        cause += f" (busy then: pid {', pid '.join(str(p) for p in stamp.other_busy_pids[:3])})"
    elif stamp is not None and stamp.throttled:
        cause += f" (throttled then: {', '.join(stamp.throttle_reasons or ())})"
    return "noisy", cause


def _noise_cause(e: ScheduleResult, windows: list[TelemetryWindow], names: dict[int, str]) -> str:
    """The likeliest reason the runs disagree, from the telemetry; the strongest signal first."""
    n = len(windows) or 1
    causes: list[tuple[float, str]] = []
    busy = Counter(p for w in windows for p in set(w.other_busy_pids))
    if busy:
        frac = sum(1 for w in windows if w.other_busy_pids) / n
        pids = [p for p, _ in busy.most_common(MAX_NAMED)]
        who = "; ".join(f"pid {p}, {names.get(p, 'exited')}" for p in pids)
        more = f" and {len(busy) - MAX_NAMED} more" if len(busy) > MAX_NAMED else ""
        text = (
            f"another process ({who}) was busy on the CPU"
            if len(busy) == 1
            else f"other processes ({who}{more}) were busy on the CPU"
        )
        causes.append((frac, f"{text} during {pct_text(frac)} of the runs"))
    gpu = Counter(p for w in windows for p in set(w.other_gpu_pids))
    if gpu:
        frac = sum(1 for w in windows if w.other_gpu_pids) / n
        who = "; ".join(f"pid {p}, {names.get(p, 'exited')}" for p, _ in gpu.most_common(3))
        causes.append(
            (frac, f"another process ({who}) was using the GPU during {pct_text(frac)} of the runs")
        )
    reasons = Counter(r for w in windows if w.throttled for r in w.throttle_reasons)
    if reasons:
        frac = sum(1 for w in windows if w.throttled) / n
        kinds = [(_THERMAL, "thermal throttling"), (_POWER, "power capping")]
        for names_set, what in kinds:
            seen = sorted(r for r in reasons if r in names_set)
            if seen:
                causes.append((frac, f"{what} ({', '.join(seen)}) during {pct_text(frac)} of the runs"))
        other = sorted(r for r in reasons if not any(r in s for s, _ in kinds))
        if other:
            causes.append((frac, f"clock slowdown ({', '.join(other)}) during {pct_text(frac)} of the runs"))
    if causes:
        causes.sort(key=lambda c: -c[0])
        return "; ".join(text for _, text in causes[:2])
    freqs = [w.cpu_freq_mhz for w in windows if w.cpu_freq_mhz]
    if freqs and min(freqs) < 0.85 * max(freqs):
        return (
            f"the CPU clock varied from {min(freqs):.0f} to {max(freqs):.0f} MHz between runs "
            "(power or thermal limits)"
        )
    first = e.first_sample_ratio
    if first is not None and first >= FIRST_SAMPLE_RATIO:
        return (
            f"first-run JIT/allocation cost: the first timed sample of each fresh process was {first:.1f}x the "
            f"rest (more warm-up runs would hide it)"
        )
    cold = e.cold_ms
    remeasured = e.remeasured_ms
    text = (
        "run-to-run variation with nothing seen in the telemetry"
        if windows
        else "run-to-run variation (no telemetry of the device that ran them: busy or throttle evidence "
        "is not available)"
    )
    if remeasured is not None and remeasured < 0.05:
        text += f" (a {ms_text(remeasured)} kernel is near the timer's and the OS's noise floor)"
    elif cold is not None and remeasured and cold > 3 * remeasured:
        text += f" (the first call of each process took {ms_text(cold)}: first-run allocation cost)"
    return text

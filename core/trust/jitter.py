"""The jitter report: which of six candidate causes explains a kernel's spread, with the numbers.

"A kernel tuned for hours ran fast in the session, then jittered in production." A validation
(:mod:`tunelab.core.trust.remeasure`) re-measures it in N fresh processes, each timing it with its
buffers placed every way :mod:`tunelab.core.measure.placement` knows while a telemetry sampler
watches the machine; the shape check (:mod:`tunelab.core.trust.shapes`) carries it to other shapes;
the bias report (:mod:`tunelab.core.trust.bias`) says where the cost model guessed wrong. This module
reads those figures and gives each candidate cause a *share*: the relative slowdown it accounts for
(0.38: 38 % slower under that cause than without it).

* ``neighbours``: the runs during which telemetry saw another busy process against the runs it did
  not: busy median / other median - 1, naming the pids and process names. When every run was busy,
  the figure the session recorded (if it was recorded on a quiet machine) is the baseline.
* ``clocks``: among the runs without neighbours, throttled runs against the rest; else the slow
  half of the runs by CPU clock against the fast half, when the kernel's time follows the clock
  (correlation below -0.5); else the reference BLAS kernel each process times: when it moved
  between the runs as the kernel did (correlation above 0.5), the machine moved, not the kernel.
* ``first_run``: the first timed sample of each process against the rest of its samples (first-run
  cost leaking into the steady figures). The cold call (module load, thread pool start, first-touch
  allocation) is stated beside it: a once-per-process cost that warm-up hides, not a spread of the
  steady figure, so it does not count towards the share.
* ``placement``: the slowest buffer layout against the layout the session records
  (:data:`~tunelab.core.measure.placement.DEFAULT_LAYOUT`), naming the layout; layouts are whatever
  keys the measurements hold.
* ``shape``: the schedule's efficiency (GFLOP/s) across the shapes measured, fastest / slowest - 1,
  naming the slowest shape.
* ``cost_model``: the cost model's bias per shape (typical predicted / measured latency): how far
  apart it judges the shapes (highest / lowest ratio - 1), naming the shape it misjudges most, whose
  search its guesses steered worst. One shape gives 0: a bias that scales every guess of a shape
  alike changes no ranking. "No predictions" when it made none.

A cause *explains* the spread when its share is beyond its tolerance: :data:`TOLERANCE` (5 %) and
:data:`NOISE_FACTOR` times the run-to-run noise of the quiet runs (the CV of their medians; for
``first_run`` the CV of the samples within a run, for ``placement`` that of the per-run layout
ratios), whichever is larger; ``shape`` and ``cost_model``
have tolerances of their own (:data:`SHAPE_TOL`, :data:`COST_MODEL_TOL`). The headline names the
causes that explain it, largest first, or says the kernel is steady ("5 processes agree within
2.1 %") or that nothing measured explains its spread.

:func:`explain` is the analysis, a pure function of given measurements and figures (no TVM, no
processes); measuring is :func:`tunelab.core.usecases.jitter.jitter_report`. Results are frozen
records with one JSON mapping each. TVM-free.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunelab.core.measure.placement import DEFAULT_LAYOUT
from tunelab.core.stats import coefficient_of_variation, median
from tunelab.core.trust.jitter_records import (
    CAUSES,
    CORRELATED,
    COST_MODEL_TOL,
    MAX_NAMED,
    NOISE_FACTOR,
    SHAPE_TOL,
    STEADY_CV,
    TITLES,
    TOLERANCE,
    JitterCause,
    JitterReport,
    ShapeBias,
    ShapeFigure,
    Spread,
    format_jitter,
    pct,
    signed,
)
from tunelab.core.trust.remeasure.report import Measurement, ms_text

__all__ = [
    "CAUSES",
    "TITLES",
    "TOLERANCE",
    "NOISE_FACTOR",
    "SHAPE_TOL",
    "COST_MODEL_TOL",
    "STEADY_CV",
    "CORRELATED",
    "MAX_NAMED",
    "signed",
    "pct",
    "ShapeFigure",
    "ShapeBias",
    "JitterCause",
    "Spread",
    "JitterReport",
    "explain",
    "format_jitter",
]


# ------------------------------------------------------------------------------------------ helpers


def _med(values: Sequence[float]) -> float:
    value = median(values)
    assert value is not None
    return value


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3 or len(xs) != len(ys):
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant series
        return None


def _beyond(share: float | None, tolerance: float) -> bool:
    return share is not None and share > tolerance


@dataclass(frozen=True, slots=True)
class _Run:
    """One fresh process's measurement of the kernel, in brief."""

    run: int
    pid: int | None
    median_ms: float
    busy: tuple[int, ...]
    names: dict[str, str]
    throttled: bool
    reasons: tuple[str, ...]
    freq: float | None
    reference_ms: float | None
    first_ratio: float | None
    within_cv: float | None
    cold_ms: float | None
    layout_ms: dict[str, float]
    watched: bool  # telemetry covered its window


def _runs(measurements: Sequence[Measurement]) -> list[_Run]:
    out = []
    for m in measurements:
        if not m.ok or not m.samples_ms:
            continue
        samples = list(m.samples_ms)
        rest = samples[1:]
        rest_med = median(rest) if len(samples) >= 3 else None
        w = m.telemetry
        out.append(
            _Run(
                run=m.run,
                pid=m.pid,
                median_ms=_med(samples),
                busy=tuple((w.other_busy_pids + w.other_gpu_pids) if w is not None else ()),
                names=dict(w.names) if w is not None else {},
                throttled=bool(w is not None and w.throttled),
                reasons=tuple(w.throttle_reasons) if w is not None else (),
                freq=w.cpu_freq_mhz if w is not None else None,
                reference_ms=m.reference_ms,
                first_ratio=samples[0] / rest_med if rest_med else None,
                within_cv=coefficient_of_variation(rest) if len(rest) >= 2 else None,
                cold_ms=m.cold_ms,
                layout_ms=dict(m.layout_ms or {}),
                watched=w is not None,
            )
        )
    return out


# ------------------------------------------------------------------------------------------ the causes


def _background(runs: list[_Run]) -> frozenset[int]:
    """The other processes busy during every watched run: no run tells what the kernel does without them."""
    watched = [set(r.busy) for r in runs if r.watched]
    return frozenset(set.intersection(*watched)) if watched else frozenset()


def _who(pids: Sequence[int], names: Mapping[str, str]) -> str:
    text = ", ".join(f"pid {p} ({names.get(str(p), 'exited')})" for p in pids[:MAX_NAMED])
    return text + (f" and {len(pids) - MAX_NAMED} more" if len(pids) > MAX_NAMED else "")


def _were(pids: Sequence[int]) -> str:
    return "was" if len(pids) == 1 else "were"


def _recorded_beside_neighbours(
    runs: list[_Run], tolerance: float, recorded_ms: float | None, recorded_disturbance: str | None
) -> JitterCause | None:
    """The recorded figure was taken while other processes were busy (the confirmation's own telemetry
    says so) and the quiet runs now differ from it beyond ``tolerance``: the neighbours of the recording
    explain the difference (the issue's story: a figure confirmed on a busy machine, then "regressed").
    None when the recording was quiet, or the quiet runs agree with it."""
    busy_parts = [part for part in (recorded_disturbance or "").split("; ") if " busy" in part]
    quiet = [r.median_ms for r in runs if r.watched and not r.busy and not r.throttled]
    if not busy_parts or not recorded_ms or not quiet:
        return None
    now_ms = _med(quiet)
    share = now_ms / recorded_ms - 1
    if abs(share) <= tolerance:
        return None
    what = "optimistic" if share > 0 else "pessimistic"
    sentence = (
        f"the recorded {ms_text(recorded_ms)} was measured while {'; '.join(busy_parts)}; on a quiet machine "
        f"now ({len(quiet)} runs with no other busy process) it runs {ms_text(now_ms)}, "
        f"{pct(abs(share))} {'slower' if share > 0 else 'faster'}: the recorded figure was {what}, and the "
        "quiet figure is the one to trust"
    )
    pids = [int(x) for part in busy_parts for x in re.findall(r"pid (\d+)", part)]
    evidence: dict[str, Any] = {
        "busy_runs": sum(1 for r in runs if r.watched and r.busy),
        "quiet_runs": len(quiet),
        "pids": pids,
        "recorded_disturbance": recorded_disturbance,
        "busy_ms": recorded_ms,
        "quiet_ms": now_ms,
        "baseline": "quiet runs now",
        "groups": [],
    }
    return JitterCause("neighbours", abs(share), tolerance, True, sentence, evidence)


def _neighbours(
    runs: list[_Run],
    tolerance: float,
    recorded_ms: float | None,
    recorded_quiet: bool,
    recorded_disturbance: str | None = None,
) -> JitterCause:
    """Runs split by each other busy process (those busy in the same runs together): the runs it was
    busy in against the watched runs it was not; a process busy in every run against the recorded figure;
    and the recording's own neighbours (:func:`_recorded_beside_neighbours`) when the runs now are quiet."""
    watched = [r for r in runs if r.watched]
    names = {p: n for r in runs for p, n in r.names.items()}
    seen = Counter(p for r in watched for p in set(r.busy))
    evidence: dict[str, Any] = {
        "busy_runs": sum(1 for r in watched if r.busy),
        "quiet_runs": sum(1 for r in watched if not r.busy),
        "pids": [],
        "process_names": {str(p): names.get(str(p), "exited") for p in seen},
        "groups": [],
    }
    if not watched:
        return JitterCause("neighbours", None, tolerance, False, "no telemetry covered the runs", evidence)
    if not seen:
        then = _recorded_beside_neighbours(runs, tolerance, recorded_ms, recorded_disturbance)
        if then is not None:
            return then
        return JitterCause(
            "neighbours",
            0.0,
            tolerance,
            False,
            f"no other process was busy during any of the {len(watched)} runs",
            evidence,
        )
    background = _background(runs)
    by_runs: dict[tuple[int, ...], list[int]] = {}
    for pid, _ in seen.most_common():
        if pid not in background:
            by_runs.setdefault(tuple(r.run for r in watched if pid in r.busy), []).append(pid)
    groups = []  # (share, pids, busy runs, their median, the rest's median)
    for members, pids in by_runs.items():
        with_ = [r.median_ms for r in watched if r.run in members]
        without = [r.median_ms for r in watched if r.run not in members]
        busy_ms, base = _med(with_), _med(without)
        groups.append((busy_ms / base - 1, pids, len(with_), busy_ms, base))
    groups.sort(key=lambda g: -g[0])
    evidence["groups"] = [
        {"pids": pids, "runs": n, "busy_ms": b, "other_ms": o, "share": sh} for sh, pids, n, b, o in groups
    ]
    always = sorted(background, key=lambda p: -seen[p])
    them = "it" if len(always) == 1 else "them"
    always_text = (
        f"{_who(always, names)} {_were(always)} busy during every run, so no run tells what the kernel does "
        f"without {them}"
        if always
        else ""
    )
    if not (groups and groups[0][0] > tolerance) and (
        then := _recorded_beside_neighbours(runs, tolerance, recorded_ms, recorded_disturbance)
    ):
        return then
    if groups and groups[0][0] > tolerance:
        named = [g for g in groups if g[0] > tolerance]
        evidence["pids"] = [p for g in named for p in g[1]]
        share, pids, n, busy_ms, base = named[0]
        evidence.update(busy_ms=busy_ms, quiet_ms=base, baseline="runs without them")
        sentence = (
            f"{_who(pids, names)} {_were(pids)} busy during {n} of {len(watched)} runs: those ran {pct(share)} "
            f"slower ({ms_text(busy_ms)} vs {ms_text(base)} in the {len(watched) - n} without)"
        )
        for sh, more, m, _b, _o in named[1:]:
            sentence += f"; {_who(more, names)} during {m} runs: {pct(sh)} slower"
        if always_text:
            sentence += f"; {always_text}"
        return JitterCause("neighbours", share, tolerance, True, sentence, evidence)
    if always and recorded_ms is not None and recorded_quiet:
        all_ms = _med([r.median_ms for r in watched])
        share = all_ms / recorded_ms - 1
        explains = share > tolerance
        evidence.update(
            pids=always if explains else [], busy_ms=all_ms, quiet_ms=recorded_ms, baseline="recorded"
        )
        sentence = (
            f"{_who(always, names)} {_were(always)} busy during every run, which ran {pct(abs(share))} "
            f"{'slower' if share >= 0 else 'faster'} ({ms_text(all_ms)}) than the {ms_text(recorded_ms)} "
            "the session recorded on a quiet machine"
        )
        if not explains:
            sentence += f", within the {pct(tolerance)} tolerance"
        return JitterCause("neighbours", share, tolerance, explains, sentence, evidence)
    if groups:  # others came and went without slowing the kernel beyond the tolerance
        share, pids, n, busy_ms, base = groups[0]
        sentence = (
            f"{_who(pids, names)} {_were(pids)} busy during {n} of {len(watched)} runs, but those were only "
            f"{pct(share)} slower ({ms_text(busy_ms)} vs {ms_text(base)}), within the {pct(tolerance)} tolerance"
        )
        if always_text:
            sentence += f"; {always_text}"
        return JitterCause("neighbours", max(share, 0.0), tolerance, False, sentence, evidence)
    evidence["baseline"] = None
    return JitterCause(
        "neighbours",
        None,
        tolerance,
        False,
        f"{always_text}, and no figure recorded on a quiet machine is there to compare with: measure again "
        "on a quiet machine",
        evidence,
    )


def _clocks(runs: list[_Run], tolerance: float) -> JitterCause:
    background = _background(runs)
    runs = [r for r in runs if set(r.busy) <= background]  # neighbours that come and go are the other cause's
    evidence: dict[str, Any] = {"runs": len(runs)}
    if len(runs) < 2:
        return JitterCause(
            "clocks", None, tolerance, False, "too few runs without neighbours to judge the clocks", evidence
        )
    findings: list[tuple[float, str]] = []
    throttled = [r for r in runs if r.throttled]
    steady = [r for r in runs if not r.throttled]
    evidence["throttled_runs"] = len(throttled)
    if throttled and steady:
        t_ms, s_ms = _med([r.median_ms for r in throttled]), _med([r.median_ms for r in steady])
        reasons = sorted({x for r in throttled for x in r.reasons})
        share = t_ms / s_ms - 1
        evidence.update(throttled_ms=t_ms, unthrottled_ms=s_ms, throttle_reasons=reasons)
        findings.append(
            (
                share,
                f"the machine throttled ({', '.join(reasons) or 'clock slowdown'}) during {len(throttled)} of "
                f"{len(runs)} runs: those ran {pct(share)} slower ({ms_text(t_ms)} vs {ms_text(s_ms)})",
            )
        )
    clocked = [r for r in runs if r.freq]
    if len(clocked) >= 3:
        freqs = [float(r.freq or 0.0) for r in clocked]
        r_freq = _pearson(freqs, [r.median_ms for r in clocked])
        evidence.update(cpu_freq_mhz_min=min(freqs), cpu_freq_mhz_max=max(freqs), freq_correlation=r_freq)
        if r_freq is not None and r_freq < -CORRELATED:
            by_freq = sorted(clocked, key=lambda r: r.freq or 0.0)
            half = len(by_freq) // 2
            slow, fast = by_freq[:half], by_freq[len(by_freq) - half :]
            share = _med([r.median_ms for r in slow]) / _med([r.median_ms for r in fast]) - 1
            evidence["freq_share"] = share
            findings.append(
                (
                    share,
                    f"the CPU clock varied from {min(freqs):.0f} to {max(freqs):.0f} MHz between runs and the "
                    f"kernel followed it (r = {r_freq:.2f}): the slower-clocked half ran {pct(share)} slower",
                )
            )
    refs = [r for r in runs if r.reference_ms]
    kernel_range = None
    if len(refs) >= 2:
        ref_ms = [float(r.reference_ms or 0.0) for r in refs]
        ker_ms = [r.median_ms for r in refs]
        ref_range, kernel_range = max(ref_ms) / min(ref_ms) - 1, max(ker_ms) / min(ker_ms) - 1
        r_ref = _pearson(ref_ms, ker_ms)
        evidence.update(reference_range=ref_range, kernel_range=kernel_range, reference_correlation=r_ref)
        if r_ref is not None and r_ref > CORRELATED and ref_range >= 0.5 * kernel_range:
            findings.append(
                (
                    min(ref_range, kernel_range),
                    f"the reference BLAS kernel moved by {pct(ref_range)} between runs, as the kernel did "
                    f"({pct(kernel_range)}, r = {r_ref:.2f}): the machine moved, not the kernel",
                )
            )
    if not findings:
        parts = []
        if "reference_range" in evidence:
            parts.append(
                f"the reference BLAS kernel held within {pct(evidence['reference_range'])} across the runs"
            )
        if "cpu_freq_mhz_min" in evidence:
            parts.append(
                f"the CPU clock read {evidence['cpu_freq_mhz_min']:.0f}-{evidence['cpu_freq_mhz_max']:.0f} MHz"
            )
        sentence = "no run throttled" + ("; " + "; ".join(parts) if parts else "")
        return JitterCause("clocks", 0.0, tolerance, False, sentence, evidence)
    findings.sort(key=lambda f: -f[0])
    share, sentence = findings[0]
    explains = _beyond(share, tolerance)
    if not explains:
        sentence += f", within the {pct(tolerance)} tolerance"
    return JitterCause("clocks", share, tolerance, explains, sentence, evidence)


def _first_run(runs: list[_Run], noise_within: float | None) -> JitterCause:
    tolerance = max(TOLERANCE, NOISE_FACTOR * noise_within) if noise_within is not None else TOLERANCE
    ratios = [r.first_ratio for r in runs if r.first_ratio is not None]
    colds = [r.cold_ms for r in runs if r.cold_ms is not None]
    steady = _med([r.median_ms for r in runs])
    cold = median(colds)
    evidence: dict[str, Any] = {
        "first_sample_ratio": median(ratios),
        "cold_ms": cold,
        "steady_ms": steady,
        "cold_ratio": cold / steady if cold is not None and steady else None,
        "within_run_cv": noise_within,
    }
    cold_text = (
        f"the first call of each fresh process took {ms_text(cold)}, {cold / steady:.1f}x the steady "
        f"{ms_text(steady)} (module load, thread pool start, first-touch allocation: once per process, "
        "hidden by warm-up)"
        if cold is not None and steady
        else ""
    )
    if not ratios:
        return JitterCause(
            "first_run",
            None,
            tolerance,
            False,
            "too few samples per run to compare the first with the rest"
            + (f"; {cold_text}" if cold_text else ""),
            evidence,
        )
    first = _med(ratios)
    share = max(first - 1, 0.0)
    explains = _beyond(share, tolerance)
    head = (
        f"the first timed sample of each process was {first:.2f}x the rest: first-run cost leaks into the "
        "steady figures (more warm-up would hide it)"
        if explains
        else f"the first timed sample of each process was {first:.2f}x the rest, within the {pct(tolerance)} tolerance"
    )
    return JitterCause(
        "first_run", share, tolerance, explains, head + (f"; {cold_text}" if cold_text else ""), evidence
    )


def _placement(
    runs: list[_Run],
    quiet: list[_Run],
    recorded_layout: str,
    layout_ms: Mapping[str, float] | None,
) -> tuple[JitterCause, tuple[str, ...], str | None]:
    """Each layout against the recorded one within the same process (what the machine did meanwhile
    cancels out), the median over the quiet runs (every run when none was quiet). Its noise is that of
    those within-process ratios, not of the runs' medians: the tolerance is :data:`NOISE_FACTOR` times
    the CV of the worst layout's per-run ratios, and at least :data:`TOLERANCE`."""
    evidence: dict[str, Any] = {}
    tolerance = TOLERANCE
    per_run: dict[str, list[float]] = {}
    timed = [r for r in (quiet or runs) if len(r.layout_ms) >= 2] or [
        r for r in runs if len(r.layout_ms) >= 2
    ]
    if timed:
        names = list(dict.fromkeys(k for r in timed for k in r.layout_ms))
        recorded = recorded_layout if recorded_layout in names else names[0]
        pairs = [r for r in timed if r.layout_ms.get(recorded)]
        base_ms = _med([r.layout_ms[recorded] for r in pairs]) if pairs else None
        per_run = {
            k: values
            for k in names
            if (values := [r.layout_ms[k] / r.layout_ms[recorded] for r in pairs if k in r.layout_ms])
        }
        ratios = {k: _med(values) for k, values in per_run.items()}
        if base_ms is not None:
            layout_ms = {k: base_ms * ratio for k, ratio in ratios.items()}
            evidence.update(ratios=ratios, runs_compared=len(pairs))
    layout_ms = dict(layout_ms or {})
    layouts = tuple(layout_ms)
    evidence["layout_ms"] = dict(layout_ms)
    if len(layout_ms) < 2:
        return (
            JitterCause(
                "placement",
                None,
                tolerance,
                False,
                "one buffer layout measured (on this device its driver places the buffers)",
                evidence,
            ),
            layouts,
            layouts[0] if layouts else None,
        )
    recorded = recorded_layout if recorded_layout in layout_ms else layouts[0]
    base = layout_ms[recorded]
    worst = max(layout_ms, key=lambda k: layout_ms[k])
    if len(per_run.get(worst, ())) >= 2:
        ratio_cv = coefficient_of_variation(per_run[worst])
        evidence["ratio_cv"] = ratio_cv
        if ratio_cv is not None:
            tolerance = max(TOLERANCE, NOISE_FACTOR * ratio_cv)
    best = min(layout_ms, key=lambda k: layout_ms[k])
    share = layout_ms[worst] / base - 1 if base else None
    evidence.update(recorded_layout=recorded, worst_layout=worst, best_layout=best)
    explains = _beyond(share, tolerance)
    others = ", ".join(f"{k} {ms_text(v)}" for k, v in layout_ms.items() if k != recorded)
    if worst == recorded:
        sentence = (
            f"the recorded layout ({recorded}, {ms_text(base)}) is the slowest of {len(layout_ms)}: {others}"
        )
        if base and layout_ms[best] < base * (1 - tolerance):
            sentence += (
                f"; in production buffers placed as {best} would run {pct(1 - layout_ms[best] / base)} faster"
            )
    elif explains:
        sentence = (
            f"with its buffers laid out {worst} the kernel ran {pct(share)} slower ({ms_text(layout_ms[worst])} vs "
            f"{ms_text(base)} {recorded}, as the session records it): it is placement-sensitive, and an "
            "application's allocator decides where its buffers land"
        )
    else:
        sentence = (
            f"every buffer layout within {pct(share)} of the recorded {recorded} ({ms_text(base)}; {others})"
        )
    return JitterCause("placement", share, tolerance, explains, sentence, evidence), layouts, recorded


def _shape(shapes: Sequence[ShapeFigure]) -> JitterCause:
    tolerance = SHAPE_TOL
    ok = [s for s in shapes if s.gflops]
    failed = [s for s in shapes if not s.gflops]
    evidence: dict[str, Any] = {"shapes": [s.to_json() for s in shapes]}
    fail_text = (
        "; it does not run on " + ", ".join(f"{s.shape_text} ({s.error or 'failed'})" for s in failed)
        if failed
        else ""
    )
    if len(ok) < 2:
        return JitterCause(
            "shape",
            None,
            tolerance,
            False,
            "one shape measured: give other shapes (or tune several) to see how it does across them"
            + fail_text,
            evidence,
        )
    fast = max(ok, key=lambda s: s.gflops or 0.0)
    slow = min(ok, key=lambda s: s.gflops or 0.0)
    share = (fast.gflops or 0.0) / (slow.gflops or 1.0) - 1
    evidence.update(fastest=fast.shape_text, slowest=slow.shape_text)
    explains = _beyond(share, tolerance)
    figures = (
        f"{slow.gflops:.1f} GFLOP/s on {slow.shape_text} ({slow.how}) vs {fast.gflops:.1f} on "
        f"{fast.shape_text} ({fast.how})"
    )
    if explains:
        sentence = (
            f"on {slow.shape_text} the schedule does {pct(share)} more time per FLOP than on "
            f"{fast.shape_text}: {figures}"
        )
    else:
        sentence = f"its efficiency holds across {len(ok)} shapes within {pct(share)}: {figures}"
    return JitterCause("shape", share, tolerance, explains, sentence + fail_text, evidence)


def _cost_model(bias: Sequence[ShapeBias] | None, no_bias_reason: str) -> JitterCause:
    tolerance = COST_MODEL_TOL
    if bias is None:
        return JitterCause("cost_model", None, tolerance, False, no_bias_reason, {})
    judged = [b for b in bias if b.ratio]
    if not judged:
        return JitterCause(
            "cost_model",
            None,
            tolerance,
            False,
            "no predictions: the session's trials were measured before its cost model could predict",
            {"shapes": [b.to_json() for b in bias]},
        )

    def guess(b: ShapeBias) -> str:
        ratio = b.ratio or 1.0
        way = "over" if ratio > 1 else "under"
        return f"{ratio:.2f}x the measured latency on {b.shape_text} ({way}-predicts, n={b.n})"

    figures = "; ".join(guess(b) for b in judged)
    evidence: dict[str, Any] = {"shapes": [b.to_json() for b in judged]}
    if len(judged) < 2:
        # A bias the same for every candidate of a shape leaves their order, and so the winner, as it is.
        return JitterCause(
            "cost_model",
            0.0,
            tolerance,
            False,
            f"the cost model guessed {figures}; with one shape a bias that scales every guess alike changes "
            "no ranking, so it explains no spread",
            evidence,
        )
    high = max(judged, key=lambda b: b.ratio or 1.0)
    low = min(judged, key=lambda b: b.ratio or 1.0)
    share = (high.ratio or 1.0) / (low.ratio or 1.0) - 1
    worst = max(judged, key=lambda b: abs(math.log(b.ratio or 1.0)))
    evidence.update(worst_shape=worst.shape_text, high_shape=high.shape_text, low_shape=low.shape_text)
    explains = _beyond(share, tolerance)
    if explains:
        sentence = (
            f"the cost model judges the shapes {pct(share)} apart — it guessed {figures}: the search for "
            f"{worst.shape_text} was steered by the worst guesses, so its schedule may be further from the "
            "best than the others'"
        )
    else:
        sentence = f"the cost model judges the shapes alike, within {pct(share)} ({figures})"
    return JitterCause("cost_model", share, tolerance, explains, sentence, evidence)


# ------------------------------------------------------------------------------------------ the analysis


def explain(
    measurements: Sequence[Measurement],
    *,
    source: Mapping[str, Any] | None = None,
    label: str = "",
    runs_asked: int | None = None,
    recorded_ms: float | None = None,
    recorded_quiet: bool = True,
    recorded_disturbance: str | None = None,
    recorded_layout: str = DEFAULT_LAYOUT,
    layout_ms: Mapping[str, float] | None = None,
    shapes: Sequence[ShapeFigure] = (),
    bias: Sequence[ShapeBias] | None = None,
    no_bias_reason: str = "no predictions to judge the cost model by",
    validation_id: int | None = None,
) -> JitterReport:
    """The jitter report of one kernel from its fresh-process ``measurements`` (one per run) and, where
    known, its figures on other ``shapes`` and the cost model's ``bias`` per shape (None: not known,
    ``no_bias_reason`` says why; empty: no predictions).

    ``recorded_ms`` (the session's figure, recorded on a quiet machine unless ``recorded_quiet`` is
    false) is the neighbours' baseline when every run was busy; ``recorded_disturbance`` (what disturbed
    the recording, in words, as :func:`tunelab.core.trust.remeasure.verdict.recording_disturbance` says
    it) names the recording's neighbours when the quiet runs now disagree with the recorded figure.
    ``layout_ms`` (layout -> median ms) stands in for the runs' own per-layout figures where they have
    none (a stored validation keeps only these)."""
    runs = _runs(measurements)
    medians = [r.median_ms for r in runs]
    # The runs to take the noise from: no other busy process, or only those busy in every run.
    background = _background(runs)
    quiet = [r for r in runs if r.watched and set(r.busy) <= background and not r.throttled]
    noise = coefficient_of_variation([r.median_ms for r in quiet]) if len(quiet) >= 2 else None
    tolerance = max(TOLERANCE, NOISE_FACTOR * noise) if noise is not None else TOLERANCE
    within = [r.within_cv for r in (quiet or runs) if r.within_cv is not None]
    spread = Spread(
        runs=len(runs),
        run_medians_ms=tuple(medians),
        min_ms=min(medians) if medians else None,
        median_ms=median(medians),
        max_ms=max(medians) if medians else None,
        cv=coefficient_of_variation(medians),
        range=max(medians) / min(medians) - 1 if medians and min(medians) > 0 else None,
        noise=noise,
        quiet_runs=len(quiet),
    )
    source = dict(source or {})
    asked = runs_asked if runs_asked is not None else len(measurements)
    shape_texts = tuple(s.shape_text for s in shapes)
    if not runs:
        errors = sorted({m.error or "no timing" for m in measurements})
        causes = tuple(
            JitterCause(name, None, tolerance, False, "no run gave a timing", {}) for name in CAUSES
        )
        return JitterReport(
            source=source,
            label=label,
            headline=f"no run gave a timing: {'; '.join(errors)[:300]}",
            explaining=(),
            spread=spread,
            causes=causes,
            runs_asked=asked,
            layouts=(),
            recorded_layout=None,
            shapes=shape_texts,
            validation_id=validation_id,
        )
    placement, layouts, recorded = _placement(runs, quiet, recorded_layout, layout_ms)
    causes = (
        _neighbours(runs, tolerance, recorded_ms, recorded_quiet, recorded_disturbance),
        _clocks(runs, tolerance),
        _first_run(runs, median(within)),
        placement,
        _shape(shapes),
        _cost_model(bias, no_bias_reason),
    )
    explaining = tuple(
        c.name for c in sorted((c for c in causes if c.explains), key=lambda c: -(c.share or 0.0))
    )
    return JitterReport(
        source=source,
        label=label,
        headline=_headline(causes, explaining, spread),
        explaining=explaining,
        spread=spread,
        causes=causes,
        runs_asked=asked,
        layouts=layouts,
        recorded_layout=recorded,
        shapes=shape_texts,
        validation_id=validation_id,
    )


def _headline(causes: Sequence[JitterCause], explaining: Sequence[str], spread: Spread) -> str:
    agree = (
        f"{spread.runs} fresh process{'es' if spread.runs != 1 else ''} agree within {pct(spread.range)}"
        f" (median {ms_text(spread.median_ms)})"
    )
    if explaining:
        by_name = {c.name: c for c in causes}
        named = [f"{TITLES[n]} ({signed(by_name[n].share)})" for n in explaining]
        lead = by_name[explaining[0]]
        text = (
            named[0] if len(named) == 1 else ", ".join(named[:-1]) + f" and {named[-1]}"
        ) + f" explain{'s' if len(named) == 1 else ''} the spread"
        return f"{text}: {lead.sentence}"
    if spread.cv is not None and spread.cv > STEADY_CV:
        return (
            f"nothing measured explains the spread: {spread.runs} fresh processes disagree by {pct(spread.range)} "
            f"(CV {pct(spread.cv)}) with no busy neighbour, throttling, first-run cost or placement beyond "
            "its tolerance"
        )
    return f"the kernel is steady: {agree}"

"""The jitter analysis's causes within the machine: ``clocks``, ``first_run`` and ``placement``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.stats import coefficient_of_variation, median
from tunelab.core.trust.jitter_records import CORRELATED, NOISE_FACTOR, TOLERANCE, JitterCause, pct
from tunelab.core.trust.jitter_runs import Run, background_pids, beyond, med_of, pearson
from tunelab.core.trust.remeasure.report import ms_text

# The reference kernel's finding: a correlation with the kernel that at most this share of shuffles of the
# reference reaches is not chance, judged over this many seeded shuffles.
CHANCE_P = 0.05
PERMUTATIONS = 2000


def clocks_cause(runs: list[Run], tolerance: float) -> JitterCause:
    """Throttled runs against the rest, the slow-clocked half against the fast, or the reference kernel
    moving with the kernel: the largest finding, among the runs without neighbours that come and go."""
    background = background_pids(runs)
    runs = [r for r in runs if set(r.busy) <= background]  # neighbours that come and go are the other cause's
    evidence: dict[str, Any] = {"runs": len(runs)}
    if len(runs) < 2:
        return JitterCause(
            "clocks", None, tolerance, False, "too few runs without neighbours to judge the clocks", evidence
        )
    findings: list[tuple[float, str, float]] = []  # share, sentence, the tolerance it is judged by
    throttled = [r for r in runs if r.throttled]
    steady = [r for r in runs if not r.throttled]
    evidence["throttled_runs"] = len(throttled)
    if throttled and steady:
        t_ms, s_ms = med_of([r.median_ms for r in throttled]), med_of([r.median_ms for r in steady])
        reasons = sorted({x for r in throttled for x in r.reasons})
        share = t_ms / s_ms - 1
        evidence.update(throttled_ms=t_ms, unthrottled_ms=s_ms, throttle_reasons=reasons)
        findings.append(
            (
                share,
                f"the machine throttled ({', '.join(reasons) or 'clock slowdown'}) during {len(throttled)} of "
                f"{len(runs)} runs: those ran {pct(share)} slower ({ms_text(t_ms)} vs {ms_text(s_ms)})",
                tolerance,
            )
        )
    clocked = [r for r in runs if r.freq]
    if len(clocked) >= 3:
        freqs = [float(r.freq or 0.0) for r in clocked]
        r_freq = pearson(freqs, [r.median_ms for r in clocked])
        evidence.update(cpu_freq_mhz_min=min(freqs), cpu_freq_mhz_max=max(freqs), freq_correlation=r_freq)
        if r_freq is not None and r_freq < -CORRELATED:
            share = slow_half_share(sorted(clocked, key=lambda r: r.freq or 0.0)[::-1])  # slow-clocked last
            evidence["freq_share"] = share
            findings.append(
                (
                    share,
                    f"the CPU clock varied from {min(freqs):.0f} to {max(freqs):.0f} MHz between runs and the "
                    f"kernel followed it (r = {r_freq:.2f}): the slower-clocked half ran {pct(share)} slower",
                    tolerance,
                )
            )
    refs = [r for r in runs if r.reference_ms]
    again = [r for r in runs if r.again_ms]
    for finding in (
        reference_finding(refs) if len(refs) >= 2 else None,
        episodes_finding(again) if len(again) >= 2 else None,
    ):
        if finding is not None:
            evidence.update(finding.evidence)
            if finding.sentence:
                findings.append((finding.share, finding.sentence, finding.tolerance))
    if not findings:
        parts = []
        if "reference_range" in evidence:
            parts.append(
                f"the reference BLAS kernel held within {pct(evidence['reference_range'])} across the runs"
            )
        if "within_process_share" in evidence:
            parts.append(
                f"each process's two windows of the kernel agreed within {pct(evidence['within_process_share'])}"
            )
        if "cpu_freq_mhz_min" in evidence:
            parts.append(
                f"the CPU clock read {evidence['cpu_freq_mhz_min']:.0f}-{evidence['cpu_freq_mhz_max']:.0f} MHz"
            )
        sentence = "no run throttled" + ("; " + "; ".join(parts) if parts else "")
        return JitterCause("clocks", 0.0, tolerance, False, sentence, evidence)
    findings.sort(key=lambda f: -f[0])
    share, sentence, tolerance = findings[0]
    explains = beyond(share, tolerance)
    if not explains:
        sentence += f", within the {pct(tolerance)} tolerance"
    return JitterCause("clocks", share, tolerance, explains, sentence, evidence)


def slow_half_share(ranked: list[Run]) -> float:
    """The kernel's median over the last half of ``ranked`` (the runs expected slowest) against its median
    over the first half, less 1 (an odd run out in the middle)."""
    half = len(ranked) // 2
    slow, fast = ranked[len(ranked) - half :], ranked[:half]
    return med_of([r.median_ms for r in slow]) / med_of([r.median_ms for r in fast]) - 1


@dataclass(frozen=True, slots=True)
class MachineFinding:
    """What one reading of the machine says of the runs: a sentence when it found the machine moving
    (``share``: how much slower the kernel ran under it, judged by ``tolerance``), and the figures
    either way (an empty sentence: no finding)."""

    share: float
    sentence: str
    evidence: dict[str, Any]
    tolerance: float = TOLERANCE


def reference_finding(refs: list[Run]) -> MachineFinding:
    """The reference BLAS kernel against the kernel, run by run.

    A one-thread reference under a machine slowed in episodes (a VM's vCPU slowed on its host) moves less
    than a multi-thread kernel that waits for its slowest thread, so the ranges are not compared. What is
    asked instead is whether the two move together beyond chance: Pearson's r above :data:`CORRELATED`,
    and above what :data:`PERMUTATIONS` shuffles of the reference give in all but
    :data:`CHANCE_P` of them (a permutation test, seeded: the same runs give the same answer). The share
    is then what the runs where the reference ran slower lost against the rest: the median kernel of
    the slow-reference half over that of the fast half. Its tolerance is :data:`TOLERANCE`, not the
    runs' noise: that noise is the spread this cause would explain."""
    ref_ms = [float(r.reference_ms or 0.0) for r in refs]
    ker_ms = [r.median_ms for r in refs]
    ref_range, kernel_range = max(ref_ms) / min(ref_ms) - 1, max(ker_ms) / min(ker_ms) - 1
    r_ref = pearson(ref_ms, ker_ms)
    evidence: dict[str, Any] = dict(
        reference_range=ref_range, kernel_range=kernel_range, reference_correlation=r_ref
    )
    if r_ref is None or r_ref <= CORRELATED or len(refs) < 4:
        return MachineFinding(0.0, "", evidence)
    chance = _chance_of(ref_ms, ker_ms, r_ref)
    half = len(refs) // 2
    share = slow_half_share(sorted(refs, key=lambda r: float(r.reference_ms or 0.0)))
    evidence.update(reference_chance=chance, reference_share=share)
    if chance >= CHANCE_P:
        return MachineFinding(0.0, "", evidence)
    sentence = (
        f"the reference BLAS kernel moved with the kernel (r = {r_ref:.2f}, by chance in {chance:.1%} of "
        f"shuffles): the {half} runs where it ran slower ran {pct(share)} slower than the {half} where it "
        f"ran faster (the reference moved by {pct(ref_range)}, the kernel by {pct(kernel_range)}): the "
        "machine moved, not the kernel"
    )
    return MachineFinding(share, sentence, evidence)


def episodes_finding(runs: list[Run]) -> MachineFinding:
    """The kernel against itself, moments later, in the same process (each run's second window of the
    recorded layout, timed after its other layouts: 0.3 s later for a 12 ms GEMM).

    What is fixed for a process's life (its memory pages, where its threads were placed, what its
    allocator did) cannot change between two windows of one process; a machine that moves in episodes
    (a VM's vCPUs slowed on a busy host, seconds at a time) does, and then no process list, clock or
    throttle reading need show it, and a one-thread reference kernel can miss what slows a kernel on
    every core. The share is how much slower the processes that changed most ran in their slower window:
    each process's slower window over its faster one, the median over the half of the processes with the
    largest such ratio, less 1 (an episode covers some windows, not all). Two windows of one process
    always differ a little, so its tolerance is :data:`NOISE_FACTOR` times the samples' spread within a
    window (their median CV), and at least :data:`TOLERANCE`; not the runs' spread, which is what it
    would explain."""
    slower = [max(r.median_ms, float(r.again_ms or 0.0)) for r in runs]
    faster = [min(r.median_ms, float(r.again_ms or 0.0)) for r in runs]
    within = median([r.within_cv for r in runs if r.within_cv is not None])
    tolerance = max(TOLERANCE, NOISE_FACTOR * within) if within is not None else TOLERANCE
    ratios = sorted(s / f for s, f in zip(slower, faster, strict=True))
    share = med_of(ratios[len(ratios) // 2 :]) - 1
    moved = sum(r - 1 > tolerance for r in ratios)
    after = median([r.again_after_s for r in runs if r.again_after_s is not None])
    evidence: dict[str, Any] = dict(
        within_process_share=share,
        within_process_moved=moved,
        within_process_after_s=after,
        within_window_cv=within,
    )
    if not beyond(share, tolerance):
        return MachineFinding(0.0, "", evidence, tolerance)
    later = f"{after:.1f} s later" if after is not None else "later"
    sentence = (
        f"the kernel changed speed within its processes: timed again {later} in the same process, "
        f"{moved} of {len(runs)} runs moved beyond {pct(tolerance)}, and the half that changed most ran "
        f"{pct(share)} slower in their slower window: the machine moved in episodes that no process list, "
        "clock or throttle reading here shows"
    )
    return MachineFinding(share, sentence, evidence, tolerance)


def _chance_of(xs: list[float], ys: list[float], r: float) -> float:
    """The share of :data:`PERMUTATIONS` seeded shuffles of ``xs`` whose correlation with ``ys`` is ``r``
    or more (one-sided; the observed order counted, so never 0)."""
    rng = np.random.default_rng(0)
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    shuffled = np.array([rng.permutation(x) for _ in range(PERMUTATIONS)])
    sx = shuffled - shuffled.mean(axis=1, keepdims=True)
    dy = y - y.mean()
    rs = (sx @ dy) / (np.sqrt((sx**2).sum(axis=1)) * np.sqrt((dy**2).sum()))
    return float((np.sum(rs >= r - 1e-12) + 1) / (PERMUTATIONS + 1))


def first_run_cause(runs: list[Run], noise_within: float | None) -> JitterCause:
    """Each process's first timed sample against the rest of its samples; the cold call stated beside it."""
    tolerance = max(TOLERANCE, NOISE_FACTOR * noise_within) if noise_within is not None else TOLERANCE
    ratios = [r.first_ratio for r in runs if r.first_ratio is not None]
    colds = [r.cold_ms for r in runs if r.cold_ms is not None]
    steady = med_of([r.median_ms for r in runs])
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
    first = med_of(ratios)
    share = max(first - 1, 0.0)
    explains = beyond(share, tolerance)
    head = (
        f"the first timed sample of each process was {first:.2f}x the rest: first-run cost leaks into the "
        "steady figures (more warm-up would hide it)"
        if explains
        else f"the first timed sample of each process was {first:.2f}x the rest, within the {pct(tolerance)} tolerance"
    )
    return JitterCause(
        "first_run", share, tolerance, explains, head + (f"; {cold_text}" if cold_text else ""), evidence
    )


def placement_cause(
    runs: list[Run],
    quiet: list[Run],
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
        base_ms = med_of([r.layout_ms[recorded] for r in pairs]) if pairs else None
        per_run = {
            k: values
            for k in names
            if (values := [r.layout_ms[k] / r.layout_ms[recorded] for r in pairs if k in r.layout_ms])
        }
        ratios = {k: med_of(values) for k, values in per_run.items()}
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
    explains = beyond(share, tolerance)
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

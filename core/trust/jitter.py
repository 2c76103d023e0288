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
* ``clocks``: among the runs without neighbours, the largest of four findings. Throttled runs against
  the rest. The slow half of the runs by CPU clock against the fast half, when the kernel's time
  follows the clock (correlation below -0.5). The reference BLAS kernel each process times right
  before and after the kernel's window: when it moved with the kernel beyond chance (correlation above
  0.5, reached by under 5 % of shuffles of the reference), the machine moved, not the kernel; its
  share is what the runs where the reference ran slower lost against the rest, judged against
  :data:`TOLERANCE` alone (the runs' noise is the spread it would explain). The kernel against itself:
  each process times it again after its other layouts, and when it changed speed within processes
  (the half that changed most, slower window over faster, beyond :data:`NOISE_FACTOR` times the
  spread within a window), the machine moved in episodes that no reading shows.
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

from collections.abc import Mapping, Sequence
from typing import Any

from tunelab.core.measure.placement import DEFAULT_LAYOUT
from tunelab.core.stats import coefficient_of_variation, median
from tunelab.core.trust.jitter_figures import cost_model_cause, shape_cause
from tunelab.core.trust.jitter_machine import clocks_cause, first_run_cause, placement_cause
from tunelab.core.trust.jitter_neighbours import neighbours_cause
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
from tunelab.core.trust.jitter_runs import Run, background_pids, runs_of
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
    runs = runs_of(measurements)
    # The runs to take the noise from: no other busy process, or only those busy in every run.
    background = background_pids(runs)
    quiet = [r for r in runs if r.watched and set(r.busy) <= background and not r.throttled]
    spread = _spread(runs, quiet)
    tolerance = max(TOLERANCE, NOISE_FACTOR * spread.noise) if spread.noise is not None else TOLERANCE
    layouts: tuple[str, ...] = ()
    recorded: str | None = None
    if not runs:
        errors = sorted({m.error or "no timing" for m in measurements})
        causes = tuple(
            JitterCause(name, None, tolerance, False, "no run gave a timing", {}) for name in CAUSES
        )
        explaining: tuple[str, ...] = ()
        headline = f"no run gave a timing: {'; '.join(errors)[:300]}"
    else:
        within = [r.within_cv for r in (quiet or runs) if r.within_cv is not None]
        placement, layouts, recorded = placement_cause(runs, quiet, recorded_layout, layout_ms)
        causes = (
            neighbours_cause(runs, tolerance, recorded_ms, recorded_quiet, recorded_disturbance),
            clocks_cause(runs, tolerance),
            first_run_cause(runs, median(within)),
            placement,
            shape_cause(shapes),
            cost_model_cause(bias, no_bias_reason),
        )
        explaining = tuple(
            c.name for c in sorted((c for c in causes if c.explains), key=lambda c: -(c.share or 0.0))
        )
        headline = _headline(causes, explaining, spread)
    return JitterReport(
        source=dict(source or {}),
        label=label,
        headline=headline,
        explaining=explaining,
        spread=spread,
        causes=causes,
        runs_asked=runs_asked if runs_asked is not None else len(measurements),
        layouts=layouts,
        recorded_layout=recorded,
        shapes=tuple(s.shape_text for s in shapes),
        validation_id=validation_id,
    )


def _spread(runs: list[Run], quiet: list[Run]) -> Spread:
    """The runs' medians in brief; the noise is the CV of the quiet runs' medians (None below two)."""
    medians = [r.median_ms for r in runs]
    return Spread(
        runs=len(runs),
        run_medians_ms=tuple(medians),
        min_ms=min(medians) if medians else None,
        median_ms=median(medians),
        max_ms=max(medians) if medians else None,
        cv=coefficient_of_variation(medians),
        range=max(medians) / min(medians) - 1 if medians and min(medians) > 0 else None,
        noise=coefficient_of_variation([r.median_ms for r in quiet]) if len(quiet) >= 2 else None,
        quiet_runs=len(quiet),
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

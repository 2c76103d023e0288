"""The jitter analysis's causes from figures beyond the runs: the input ``shape`` and the ``cost_model``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tunelab.core.trust.jitter_records import (
    COST_MODEL_TOL,
    SHAPE_TOL,
    JitterCause,
    ShapeBias,
    ShapeFigure,
    pct,
)
from tunelab.core.trust.jitter_runs import beyond


def shape_cause(shapes: Sequence[ShapeFigure]) -> JitterCause:
    """The schedule's efficiency on its fastest shape against its slowest."""
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
    explains = beyond(share, tolerance)
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


def cost_model_cause(bias: Sequence[ShapeBias] | None, no_bias_reason: str) -> JitterCause:
    """How far apart the cost model judges the shapes: its highest bias against its lowest."""
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
    explains = beyond(share, tolerance)
    if explains:
        sentence = (
            f"the cost model judges the shapes {pct(share)} apart — it guessed {figures}: the search for "
            f"{worst.shape_text} was steered by the worst guesses, so its schedule may be further from the "
            "best than the others'"
        )
    else:
        sentence = f"the cost model judges the shapes alike, within {pct(share)} ({figures})"
    return JitterCause("cost_model", share, tolerance, explains, sentence, evidence)

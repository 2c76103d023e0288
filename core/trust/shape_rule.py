"""The falls-off rule of the shape check: when a carried-over schedule falls off a shape, in words."""

from __future__ import annotations

from collections.abc import Sequence

from tunelab.core.trust.shape_report import FallsOffRule, ShapeRow

MAX_RATIO = 1.25  # slower than the shape's own tuned schedule by more than this: falls off


MIN_GFLOPS_FRACTION = 0.5  # below this fraction of the tuned shape's GFLOP/s: falls off


def falls_off_rule() -> FallsOffRule:
    """The limits :func:`judge` applies, as :func:`across_shapes` reports them (``rule``)."""
    return FallsOffRule(max_ratio_to_tuned=MAX_RATIO, min_gflops_fraction=MIN_GFLOPS_FRACTION)


def judge(
    ratio_to_tuned: float | None, gflops: float | None, reference_gflops: float | None, status: str = "ok"
) -> tuple[bool, list[str]]:
    """(falls_off, reasons) for one shape under the module's rule.

    A failed shape (status other than "ok") always falls off. Otherwise it falls off when
    ``ratio_to_tuned > MAX_RATIO`` or ``gflops < MIN_GFLOPS_FRACTION * reference_gflops``
    (the tuned shape's GFLOP/s); a missing number skips its test.
    """
    if status != "ok":
        return True, [f"the schedule does not work here ({status})"]
    reasons = []
    if ratio_to_tuned is not None and ratio_to_tuned > MAX_RATIO:
        reasons.append(f"{ratio_to_tuned:.2f}x slower than the schedule tuned for this shape")
    if gflops is not None and reference_gflops and gflops < MIN_GFLOPS_FRACTION * reference_gflops:
        reasons.append(
            f"{gflops:.1f} GFLOP/s is {gflops / reference_gflops:.0%} of the "
            f"{reference_gflops:.1f} GFLOP/s on the tuned shape"
        )
    return bool(reasons), reasons


def summarize(rows: Sequence[ShapeRow], source_shape_text: str, reference_gflops: float | None = None) -> str:
    """One sentence: which shapes fall off (and why, briefly)."""
    if not rows:
        return f"No shapes were checked against the schedule tuned for {source_shape_text}."
    off = [r for r in rows if r.falls_off]
    if not off:
        return f"The schedule tuned for {source_shape_text} holds up on all {len(rows)} shape(s)."

    def why(r: ShapeRow) -> str:
        if r.status != "ok":
            return f"{r.shape_text} ({r.status})"
        if r.ratio_to_tuned is not None and r.ratio_to_tuned > MAX_RATIO:
            return f"{r.shape_text} ({r.ratio_to_tuned:.2f}x its tuned schedule)"
        gflops = r.gflops or 0.0
        share = f", {gflops / reference_gflops:.0%} of the tuned shape's" if reference_gflops else ""
        return f"{r.shape_text} ({gflops:.1f} GFLOP/s{share})"

    held = len(rows) - len(off)
    tail = f"; it holds up on the other {held}" if held else ""
    return (
        f"The schedule tuned for {source_shape_text} falls off on {len(off)} of {len(rows)} shape(s): "
        + ", ".join(why(r) for r in off)
        + tail
        + "."
    )

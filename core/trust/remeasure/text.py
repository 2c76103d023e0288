"""Times and fractions as a validation's sentences and tables write them."""

from __future__ import annotations


def pct_text(fraction: float) -> str:
    """0.123 -> "12%"."""
    return f"{round(100 * fraction)}%"


def ms_text(value: float | None) -> str:
    """A time for people, always in ms as every table shows it ("0.0123 ms", "1.234 ms"), "-" for none:
    one unit, so a sentence and the table beside it read alike."""
    if value is None:
        return "-"
    return f"{value:.4g} ms"

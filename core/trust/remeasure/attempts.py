"""Measure again while a result is not yet evidence, within a time cap: the loop behind a confirmation's
patience (:mod:`tunelab.core.trust.confirm`) and the deployment gate's (:mod:`tunelab.core.trust.remeasure.gate`).

TVM-free: it only calls what it is given."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def measure_until(
    measure: Callable[[], T],
    why_again: Callable[[T], str | None],
    *,
    max_s: float,
    on_again: Callable[[str, int, float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[tuple[T, str | None]]:
    """Every attempt, in order, with why it is measured again (None: it is evidence). Another attempt is
    made while ``why_again`` names a reason and it fits in ``max_s`` seconds from the start (judged by the
    last attempt's length); ``on_again(reason, next attempt's number, seconds left)`` hears each one. The
    last attempt is the first that is evidence, or the last that fitted."""
    started = clock()
    attempts: list[tuple[T, str | None]] = []
    while True:
        t0 = clock()
        result = measure()
        why = why_again(result)
        attempts.append((result, why))
        if why is None:
            return attempts
        spent, last = clock() - started, clock() - t0
        if spent + last > max_s:
            return attempts
        if on_again is not None:
            on_again(why, len(attempts) + 1, max_s - spent)

"""The first valid schedules a real template space samples, for the tests that measure given kernels."""

from __future__ import annotations

import numpy as np


def valid_schedules(space, count: int) -> list:
    """The first ``count`` schedules of ``space`` sampled from a generator seeded 0, invalid points skipped."""
    rng = np.random.default_rng(0)
    schedules = []
    while len(schedules) < count:
        try:
            schedules.append(space.schedule(space.sample(rng)))
        except Exception:  # noqa: BLE001 - an invalid point of the template: sample another
            continue
    return schedules

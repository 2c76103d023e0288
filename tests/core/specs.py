"""Small real session specs for the engine tests."""

from __future__ import annotations

from tunelab.core.records import MeasureOptions, SessionSpec

FAST_MEASURE = MeasureOptions(
    number=1, repeat=2, min_repeat_ms=1, warmup=1, timeout_s=30, cooldown_s=0.5, confirm_runs=0
)  # tunelab.core.trust.confirm has its own tests


def small_spec(**changes) -> SessionSpec:
    base = dict(
        workload="gemm",
        shape={"M": 32, "N": 32, "K": 32},
        target="llvm",
        space_kind="template",
        tuner="random",
        trials=8,
        batch=4,
        seed=0,
        measure=FAST_MEASURE,
    )
    base.update(changes)
    return SessionSpec(**base)

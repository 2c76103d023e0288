"""Small real session specs for the engine tests."""

from __future__ import annotations

from tunelab.core.records import MeasureOptions, SessionSpec

FAST_MEASURE = MeasureOptions(
    number=1, repeat=2, min_repeat_ms=1, warmup=1, timeout_s=30, cooldown_s=0.5, confirm_runs=0
)  # tunelab.core.trust.confirm has its own tests

# FAST_MEASURE as `tunelab tune` flags, with no cool-down: a command-line test runs one short session
# and waits for it, so a pause between its batches only adds to the wait.
FAST_MEASURE_ARGS = (
    "--number",
    str(FAST_MEASURE.number),
    "--repeat",
    str(FAST_MEASURE.repeat),
    "--min-repeat-ms",
    str(FAST_MEASURE.min_repeat_ms),
    "--cooldown",
    "0",
    "--confirm-runs",
    str(FAST_MEASURE.confirm_runs),
)


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

"""Small real session specs for the engine tests."""

from __future__ import annotations

from dataclasses import replace

from tunelab.core.records import MeasureOptions, SessionSpec

FAST_MEASURE = MeasureOptions(
    number=1, repeat=2, min_repeat_ms=1, warmup=1, timeout_s=30, cooldown_s=0.5, confirm_runs=0
)  # tunelab.core.trust.confirm has its own tests

# FAST_MEASURE with no cool-down wait before a batch (the app tests' sessions): on a shared test machine another
# process is nearly always busy, and waiting up to the cool-down per batch would only slow the suite.
QUICK_MEASURE = replace(FAST_MEASURE, cooldown_s=0)

# Every measurement option away from its default, except where it measures (the RPC tracker's fields):
# what a spec file, the CLI and the New-session dialog must all carry through unchanged.
CHANGED_MEASURE = dict(
    number=2,
    repeat=4,
    min_repeat_ms=7,
    warmup=3,
    timeout_s=12.5,
    cache_flush=True,
    check_correctness=False,
    target_cv=0.02,
    max_repeat=20,
    leader_band=2.5,
    cooldown_s=1.5,
    confirm_runs=4,
    confirm_top=5,
    confirm_max_s=30.0,
    fail_fast=6,
    l2_flush="on",
    lock_clocks=True,
)

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
    """The tests' small real session: gemm 32^3 on LLVM, template space, 8 random trials in batches of 4."""
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


def quick_spec(**changes) -> SessionSpec:
    """`small_spec` measured with QUICK_MEASURE (no cool-down), unless `changes` say otherwise."""
    return small_spec(**{"measure": QUICK_MEASURE, **changes})

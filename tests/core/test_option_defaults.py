"""A session option's default is written once, in its record: the command line shows that one."""

from __future__ import annotations

from tunelab.core.cli.parser import _parser
from tunelab.core.records import _MEASURE_RANGES, SPEC_DEFAULTS, MeasureOptions


def test_the_tune_commands_defaults_are_the_records() -> None:
    args = vars(_parser().parse_args(["tune", "gemm"]))
    measure = MeasureOptions()
    for field, option, *_ in _MEASURE_RANGES:  # every bounded measurement number and its flag
        assert args[option.replace("-", "_")] == getattr(measure, field), option
    for name in ("trials", "batch", "seed", "early_stop"):
        assert args[name] == SPEC_DEFAULTS[name], name
    assert (args["l2_flush"], args["rpc_key"], args["rpc_workers"]) == (
        measure.l2_flush,
        measure.rpc_key,
        measure.rpc_workers,
    )

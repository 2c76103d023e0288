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


def test_every_command_is_built_from_the_one_option_table() -> None:
    """The parser adds each command's options from `options.COMMANDS` in their order, and nothing else:
    an option two commands share (--json, --db, --shapes, a session id) is one entry of the table."""
    import argparse

    from tunelab.core.cli.options import COMMANDS, JSON, OneOf

    parser = _parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(commands.choices) == [command.name for command in COMMANDS]
    for command in COMMANDS:
        table: list[tuple[str, ...]] = []
        for entry in command.options:
            table.extend(o.flags for o in entry.options) if isinstance(entry, OneOf) else table.append(
                entry.flags
            )
        built = [tuple(a.option_strings) or (a.dest,) for a in commands.choices[command.name]._actions]
        assert built == [("-h", "--help"), *table], command.name
    # --json is one entry, shared by every command that offers it
    assert sum(JSON in command.options for command in COMMANDS) == 16

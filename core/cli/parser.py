"""The `tunelab` command line's grammar: argparse built from the one option table (`options`)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from tunelab.core.cli.options import COMMANDS, Command, OneOf, Option, trial_number_arg
from tunelab.core.errors import TunelabError

__all__ = ["trial_number_arg", "_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise TunelabError(
            f"{message} (see tunelab {self.prog.split()[-1]} --help)"
            if " " in self.prog
            else f"{message} (see tunelab --help)"
        )


def _add(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup, entry: Option | OneOf) -> None:
    if isinstance(entry, OneOf):
        group = parser.add_mutually_exclusive_group()
        for choice in entry.options:
            _add(group, choice)
    else:
        parser.add_argument(*entry.flags, **entry.settings)


def _command(sub: argparse._SubParsersAction, command: Command) -> None:
    parser = sub.add_parser(command.name, help=command.help)
    for entry in command.options:
        _add(parser, entry)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tunelab", description="A desktop lab for TVM kernel tuning. Without a command: the GUI."
    )
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    for command in COMMANDS:
        _command(sub, command)
    return p

"""`tunelab` on the command line (the contract in shared/DESIGN.md).

`--json` prints one JSON document on stdout and nothing else there; progress goes to stderr.
Bad input exits 2 with one line on stderr and no traceback, and changes nothing stored. Other exit codes:
3 when the store or its disk fails underneath (disk full, I/O error: :class:`tunelab.core.errors.StoreFailure`),
4 when a session ends without a single measured trial because every config was rejected, or with every
trial's values other than the reference's (the line names the reference), 130 on Ctrl-C.


`tunelab tune` exits 0 when the session ends (finished, or stopped by its budget or early
stopping); 2 for bad input, including `--resume` of a session another live process is tuning
(the line names its pid); 1 with one line when the session crashed (`--resume` continues it).
SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`, systemd, the desktop app's Stop) and SIGHUP (its terminal
closed) stop it cleanly, whether sent to the process or to its whole process group: the session ends
`cancelled`, a trial the stop cut short is not stored (a resumed session measures it again), no
traceback, and the exit status is 128 + the signal's number as a shell reports a signal: 130 for
SIGINT, 143 for SIGTERM, 129 for SIGHUP. `--resume N` takes no option that would change the session
(its budget, measurement, confirmation): one is refused in one line, never ignored.

Given ``--events-fd N`` (`tune`, `bias`), a command also reports its progress, its error and its end as
JSON lines on that descriptor, for the process that started it (tunelab.core.cli.protocol).

This module parses the command line and hands it to its command: the grammar is `parser`, the commands
live by job in `tuning`, `compiling` (compile), `inspection` (workloads, sessions, show, compare,
devices), `trust` (validate, jitter, bias, baseline, roofline, models) and `export` (export, import);
what they share (the store, files, JSON of records, tables) in `common`.
"""

from __future__ import annotations

import argparse
import sys

from tunelab.core.cli.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_STORE_FAILURE, say_error
from tunelab.core.cli.compiling import cmd_compile
from tunelab.core.cli.export import cmd_export, cmd_import
from tunelab.core.cli.inspection import (
    cmd_compare,
    cmd_devices,
    cmd_sessions,
    cmd_show,
    cmd_tuners,
    cmd_workloads,
)
from tunelab.core.cli.parser import _parser
from tunelab.core.cli.protocol import NO_EVENTS, open_events
from tunelab.core.cli.trust import cmd_baseline, cmd_bias, cmd_jitter, cmd_models, cmd_roofline, cmd_validate
from tunelab.core.cli.tuning import cmd_tune
from tunelab.core.errors import Cancelled, StoreFailure, TunelabError


def cmd_gui(args: argparse.Namespace) -> int:
    # The `tunelab` entry point (tunelab.__main__) opens the GUI before this parser sees `gui`; the
    # command line itself never imports the desktop app.
    raise TunelabError(
        "the desktop app starts as `tunelab` (no command) or `tunelab gui`, not from this module"
    )


COMMANDS = {
    "workloads": cmd_workloads,
    "tuners": cmd_tuners,
    "tune": cmd_tune,
    "sessions": cmd_sessions,
    "show": cmd_show,
    "compare": cmd_compare,
    "export": cmd_export,
    "import": cmd_import,
    "bias": cmd_bias,
    "gui": cmd_gui,
    "validate": cmd_validate,
    "jitter": cmd_jitter,
    "baseline": cmd_baseline,
    "roofline": cmd_roofline,
    "devices": cmd_devices,
    "models": cmd_models,
    "compile": cmd_compile,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import sqlite3

    from tunelab.core.usecases.process import prepare_process

    prepare_process()  # TVM's default pool is half the CPUs on x86: kernels would run on half the cores

    events = NO_EVENTS  # until the command line names a descriptor (--events-fd)
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            _parser().print_help(sys.stderr)
            return EXIT_BAD_INPUT
        events = args.events = open_events(getattr(args, "events_fd", None))
        exit_code = COMMANDS[args.command](args)
    except StoreFailure as exc:
        exit_code = say_error(events, f"the store failed: {exc}", EXIT_STORE_FAILURE)
    except TunelabError as exc:
        flag = f"--{exc.option.replace('_', '-')}: " if exc.option else ""
        exit_code = say_error(events, f"{flag}{exc}", EXIT_BAD_INPUT)
    except Cancelled as exc:  # a person stopped it: said, but neither bad input nor a failure
        print(f"tunelab: {exc}", file=sys.stderr)
        exit_code = EXIT_INTERRUPTED
    except sqlite3.Error as exc:  # a read that met a failing disk (or a damaged file) outside Store's checks
        from tunelab.core.store import is_store_failure

        failure = is_store_failure(exc)
        exit_code = say_error(
            events,
            f"{'the store failed' if failure else 'the database is damaged'}: {exc}",
            EXIT_STORE_FAILURE if failure else EXIT_BAD_INPUT,
        )
    except KeyboardInterrupt:  # Ctrl-C before a command installed its own handling
        print("tunelab: interrupted", file=sys.stderr)
        exit_code = 130
    except BrokenPipeError:
        exit_code = 0
    events.done(exit_code)
    events.close()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())

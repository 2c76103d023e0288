"""`tunelab compile`: a workload's space built for a target (a GPU this machine lacks included), nothing
measured; the sources, PTX or assembly and a report go into a folder (tunelab.core.usecases.compile)."""

from __future__ import annotations

import argparse
import json
import sys

from tunelab.core.cli.common import EXIT_NOTHING_MEASURED, _custom_and_space


def cmd_compile(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.compile import compile_space

    custom_source, space_data = _custom_and_space(args, "compile")
    report = compile_space(
        "custom" if custom_source else args.workload,
        shape=args.shape,
        dtype=args.dtype,
        target=args.target,
        space_kind=args.space,
        space_data=space_data,
        samples=args.samples,
        seed=args.seed,
        out_dir=args.out,
        force=args.force,
        custom_source=custom_source,
        on_progress=None if args.json else lambda text: print(text, file=sys.stderr),
    )
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(report.summary())
    # nothing built is not bad input (every part of it was accepted), but a script must see it
    return 0 if report.built else EXIT_NOTHING_MEASURED

"""`tunelab validate`, `jitter`, `bias`, `baseline` and `roofline`: how far a session's figures can be trusted."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tunelab.core.cli.common import EXIT_GATE_FAILED, _open_store, _print_table
from tunelab.core.errors import TunelabError
from tunelab.core.records import MeasureOptions, figure_text


def cmd_bias(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.bias import session_bias

    if args.top_k < 1:  # before the store is opened
        raise TunelabError("--top-k must be at least 1")
    store = _open_store(args.db, create=False)
    report = session_bias(store, args.sessions, top_k=args.top_k, model=args.model, by_task=args.by_task)
    if args.json:
        print(json.dumps(report.to_json(), default=str))
        return 0
    print(report.summary)
    rows = [
        [
            g.dimension,
            g.label,
            str(g.n),
            figure_text(g.residual_mean, 3),
            figure_text(g.residual_std, 3),
            figure_text(g.spearman, 2),
            figure_text(g.topk_recall, 2),
            "FLAG" if g.flagged else "",
        ]
        for g in report.groups
    ]
    if rows:
        _print_table(rows, ["group", "value", "n", "resid mean", "resid std", "spearman", "top-k", ""])
    return 0


def _progress_line(done: int, total: int, message: str) -> None:
    print(f"[{done}/{total}] {message}", file=sys.stderr, flush=True)


def cmd_validate(args: argparse.Namespace) -> int:

    from tunelab.core.usecases.validation import (
        format_report,
        parse_source,
        validate_and_store,
        validate_schedule_file,
    )

    def on_shapes(_shapes: list[dict[str, int]], _rule: Any) -> None:
        _progress_line(args.repeats, args.repeats, f"measuring the best schedule on the shapes {args.shapes}")

    source = parse_source(args.source)
    if args.gate is not None:
        return _validate_gate(args, source)
    if args.gate_wait is not None:
        raise TunelabError("--gate-wait is the patience of a --gate; give --gate PCT too", option="gate-wait")
    if isinstance(source, int):
        store = _open_store(args.db, create=False, write=True)
        report = validate_and_store(
            store,
            source,
            top_k=args.top,
            runs=args.repeats,
            shapes=args.shapes,
            task=args.task,
            against=args.against,
            on_progress=_progress_line,
            on_shapes=on_shapes,
        ).report
    else:
        if args.shapes is not None or args.task:
            raise TunelabError("--shapes and --task need a SESSION, not a schedule file")
        # Checked and measured before the store is opened: a bad file leaves nothing behind.
        report = validate_schedule_file(
            source, runs=args.repeats, on_progress=_progress_line, trust_custom=args.trust_custom
        )
        report = _stored(args, report)
    assert report is not None  # re-measured, and nothing here cancels it
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(format_report(report))
    return 0


def _stored(args: argparse.Namespace, report: Any) -> Any:
    """A schedule file's validation, stored (the store opened, or created, only now: a bad file was refused
    before it), with its id."""
    from dataclasses import replace

    store = _open_store(args.db, create=True, write=True)
    return replace(report, id=store.add_validation(report.to_json()))


def _validate_gate(args: argparse.Namespace, source: int | Path) -> int:
    """`validate SCHEDULE_FILE --gate PCT`: 0 within PCT of the file's figure, 5 slower, 2 not judged here
    (a session, a file whose figure cannot be held to or whose target cannot run here: one line, before
    the store is opened). A failure beside busy processes is measured again for up to --gate-wait seconds.
    The re-measurement judged is stored as any file's validation."""

    from tunelab.core.usecases.validation import gate_schedule_file

    report, gate = gate_schedule_file(
        source,
        pct=args.gate,
        runs=args.repeats,
        trust_custom=args.trust_custom,
        shapes=args.shapes,
        task=args.task,
        wait_s=MeasureOptions().confirm_max_s if args.gate_wait is None else args.gate_wait,
        on_progress=_progress_line,
        on_stage=lambda text: print(f"gate: {text}", file=sys.stderr, flush=True),
    )
    report = _stored(args, report)
    if args.json:
        print(json.dumps({**report.to_json(), "gate": gate.to_json()}))
    else:
        print(gate.line())
    return 0 if gate.passed else EXIT_GATE_FAILED


def cmd_jitter(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.jitter import check_source, format_jitter, jitter_report, parse_source

    if args.runs < 1:
        raise TunelabError(
            f"the number of fresh processes must be at least 1, not {args.runs}", option="runs"
        )
    source = parse_source(args.source)
    # A bad file (missing, corrupt, untrusted code, a target this machine cannot run) or shapes for a
    # file: one line before the store is opened, so nothing is left behind.
    check_source(source, shapes=args.shapes, trust_custom=args.trust_custom)
    store = _open_store(args.db, create=not isinstance(source, int), write=True)
    report = jitter_report(
        store,
        source,
        runs=args.runs,
        shapes=args.shapes,
        trust_custom=args.trust_custom,
        on_progress=_progress_line,
    )
    print(json.dumps(report.to_json()) if args.json else format_jitter(report))
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.figures import vendor_figure

    store = _open_store(args.db, create=False)
    record = store.session(args.session)
    result = vendor_figure(store, args.session, remeasure=args.remeasure)
    if args.json:
        print(json.dumps(None if result is None else result.to_json()))
        return 0
    if result is None:
        print(f"session {record.id}: no vendor library for {record.workload} on {record.target_kind} here")
        return 0
    x = result.x_of_vendor
    vendor = result.baseline
    print(
        f"session {record.id}: {record.workload} {record.shape} {record.dtype}\n"
        f"  vendor   {vendor.library} ({vendor.method}): {figure_text(vendor.median_ms)} ms = "
        f"{figure_text(vendor.gflops)} GFLOP/s{'' if vendor.correct else '  (WRONG RESULT)'}\n"
        f"  session  {figure_text(record.best_ms)} ms = {figure_text(record.best_gflops)} GFLOP/s"
        + (f"  -> {x:.2f}x of vendor" if x else "")
    )
    if result.doubt:
        print(f"  warning: {result.doubt} (tunelab baseline {record.id} --remeasure)")
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.figures import machine_figure, roofline_figure

    if args.session is None:
        if args.target not in ("llvm", "cuda"):
            raise TunelabError(f"--target must be llvm or cuda, not {args.target!r}")
        store = _open_store(args.db, create=True)
        profile = machine_figure(store, args.target, remeasure=args.remeasure)
        if args.json:
            print(json.dumps(None if profile is None else profile.to_json()))
        elif profile is None:
            print(f"no way to profile a {args.target} machine here (needs PyTorch or CuPy and a GPU)")
        else:
            peaks = ", ".join(f"{d} {figure_text(g)} GFLOP/s" for d, g in profile.peak_gflops.items())
            print(
                f"{profile.hostname} ({args.target}): peak {peaks}; bandwidth {figure_text(profile.bandwidth_gbs)} GB/s"
                f"\n  {profile.kernel or ''}"
            )
        return 0
    store = _open_store(args.db, create=False)
    roof = roofline_figure(store, args.session, remeasure=args.remeasure)
    if args.json:
        print(json.dumps(roof.to_json()))
        return 0
    print(
        f"session {args.session}: intensity {figure_text(roof.intensity)} FLOP/byte; "
        f"peak {figure_text(roof.peak_gflops)} GFLOP/s, bandwidth {figure_text(roof.bandwidth_gbs)} GB/s "
        f"-> bound {figure_text(roof.bound_gflops)} GFLOP/s "
        f"({roof.bound_by or '-'})\n  best {figure_text(roof.achieved_gflops)} GFLOP/s = "
        + (f"{100 * roof.fraction:.1f}% of the roofline" if roof.fraction is not None else "-")
        + (f"\n  {roof.schedule_sentence()}" if roof.schedule_sentence() else "")
        + (f"\n  note: {roof.note}" if roof.note else "")
    )
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """`tunelab models SID...`: would another cost model have ranked these schedules better?"""
    from tunelab.core.usecases.model_compare import compare_models

    names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else None
    store = _open_store(args.db, create=False)
    scores = compare_models(store, args.sessions, names)
    if args.json:
        print(json.dumps([s.to_json() for s in scores]))
        return 0
    shown = None
    for s in scores:
        where = (s.session_id, json.dumps(s.shape))
        if where != shown:
            shape = ",".join(f"{k}={v}" for k, v in s.shape.items())
            print(f"session {s.session_id}, {shape}:")
            shown = where
        print(f"  {s.sentence()}")
    return 0

"""What every `tunelab` command shares: exit codes, opening the store, reading a named file, records as
JSON and as tables, and saying an error (one line on stderr, and an event for a controlling process)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tunelab.core.cli.protocol import EventWriter
from tunelab.core.errors import StoreError, TunelabError
from tunelab.core.records import figure_text

EXIT_BAD_INPUT = 2
EXIT_CRASHED = 1
EXIT_STORE_FAILURE = 3  # the store or its disk failed (not the input)
EXIT_NOTHING_MEASURED = 4  # a session ended with 0 trials: every config it tried was rejected
EXIT_GATE_FAILED = 5  # `validate --gate`: the kernel runs slower than its file states, beyond the gate
EXIT_INTERRUPTED = 130


def _open_store(path: str | None, *, create: bool, write: bool = False) -> Any:
    """The store the user named; ``write``: refused at once (one line) when it cannot be written, before
    any work whose result would be lost."""
    from tunelab.core.store import Store, default_db_path

    db = path or os.environ.get("TUNELAB_DB") or str(default_db_path())
    store = Store(db, create=create)
    if write:
        try:
            store.require_writable()
        except StoreError:
            store.close()
            raise
    return store


def _read_text(path: str, what: str) -> str:
    """A file the user named, as UTF-8 text; a missing, unreadable or non-UTF-8 file is one line."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise TunelabError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TunelabError(
            f"cannot read {what} {path}: it is not UTF-8 text (byte {exc.object[exc.start]:#04x} "
            f"at position {exc.start})"
        ) from None


def _read_json(path: str, what: str, meant: str) -> Any:
    """The JSON in a file the user named (``what``: "spec file"); a file :func:`_read_text` refuses, bad
    JSON or nesting too deep to be ``meant`` ("a session spec") is one line."""
    text = _read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TunelabError(f"{what} {path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise TunelabError(f"{what} {path} is nested too deeply to be {meant}") from None


def _session_json(r: Any, stated: Any = None) -> dict[str, Any]:
    """A session as JSON. ``stated``: its StatedBest (tunelab.core.export.stated), the one "best" every
    view states: ``best_ms`` / ``best_gflops`` are that figure, ``best`` says its kind, and
    ``session_best_ms`` keeps the session's own measurement of its fastest trial."""
    doc = {
        "id": r.id,
        "name": r.name,
        "status": r.status,
        "workload": r.workload,
        "shape": r.shape,
        "dtype": r.dtype,
        "target": r.target,
        "target_kind": r.target_kind,
        "space": r.space_kind,
        "tuner": r.tuner,
        "shadow_models": list(r.shadow_models),
        "trials": r.n_trials,
        "failed": r.n_failed,
        "budget": r.trials_budget,
        "best_ms": r.best_ms,
        "best_gflops": r.best_gflops,
        "best_trial_id": r.best_trial_id,
        "best_trial_number": r.best_trial_number,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "error": r.error,
        "tvm_version": r.tvm_version,
    }
    doc["session_best_ms"] = r.best_ms
    doc["best"] = stated.to_json() if stated is not None else None
    if stated is not None:
        doc["best_ms"], doc["best_gflops"] = stated.ms, stated.gflops
    return doc


def _stated_best(store: Any, r: Any) -> Any:
    """The session's one stated best (tunelab.core.export.stated), or None while it has none."""
    from tunelab.core.usecases.export import stated_best

    return stated_best(store, r)


def _best_text(stated: Any) -> str:
    """'0.04238 confirmed' / '0.05909 untrusted' / '0.06012 session': a table cell with the figure's kind."""
    return "-" if stated is None else f"{figure_text(stated.ms)} {stated.kind}"


def _trial_json(t: Any) -> dict[str, Any]:
    from tunelab.core.stats import sample_stats

    stats = sample_stats(t.samples_ms)
    return {
        "cv": stats.cv if stats else None,
        "iqr_ms": stats.iqr if stats else None,
        "outliers": stats.outliers if stats else None,
        "id": t.id,
        "number": t.number,
        "index": t.index,
        "round": t.round,
        "status": t.status,
        "error": t.error,
        "latency_ms": t.latency_ms,
        "mean_ms": t.mean_ms,
        "std_ms": t.std_ms,
        "min_ms": t.min_ms,
        "max_ms": t.max_ms,
        "predicted_ms": t.predicted_ms,
        "device": t.device,  # the RPC server that measured it; null: this machine
        "config": t.config,
        "samples_ms": list(t.samples_ms),
    }


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    for row in [header, *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)).rstrip())


def say_error(events: EventWriter, message: str, exit_code: int) -> int:
    """Print ``tunelab: error: <message>`` on stderr, report it as an ``error`` event, and return
    `exit_code` (for ``return say_error(...)``)."""
    print(f"tunelab: error: {message}", file=sys.stderr)
    events.error(message, exit_code)
    return exit_code


def _custom_and_space(args: Any, command: str) -> tuple[str | None, Any]:
    """(the custom workload's source, the edited space's data) that ``--custom`` and ``--space-file``
    name, for the commands that take a workload (tune, compile); bad input is one TunelabError."""
    if not args.workload:
        raise TunelabError(f"{command} needs a workload (see tunelab workloads)")
    custom_source = None
    if args.custom or args.workload == "custom":
        if not args.custom:
            raise TunelabError("workload custom needs --custom FILE")
        custom_source = _read_text(args.custom, "workload file")
    space_data = _read_json(args.space_file, "space file", "a search space") if args.space_file else None
    return custom_source, space_data

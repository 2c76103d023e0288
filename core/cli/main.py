"""`tunelab` on the command line (the contract in shared/DESIGN.md).

`--json` prints one JSON document on stdout and nothing else there; progress goes to stderr.
Bad input exits 2 with one line on stderr and no traceback, and changes nothing stored. Other exit codes:
3 when the store or its disk fails underneath (disk full, I/O error: :class:`tunelab.core.errors.StoreFailure`),
4 when a session ends without a single measured trial because every config was rejected, 130 on Ctrl-C.


`tunelab tune` exits 0 when the session ends (finished, or stopped by its budget or early
stopping); 2 for bad input, including `--resume` of a session another live process is tuning
(the line names its pid); 1 with one line when the session crashed (`--resume` continues it).
SIGINT (Ctrl-C) and SIGTERM (`kill`, `timeout`, systemd, the desktop app's Stop) stop it cleanly,
whether sent to the process or to its whole process group: the session ends `cancelled`, a trial
the stop cut short is not stored (a resumed session measures it again), no traceback, and the exit
status is 128 + the signal's number as a shell reports a signal: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from tunelab.core.errors import Cancelled, SessionBusyError, StoreError, StoreFailure, TunelabError

EXIT_BAD_INPUT = 2
EXIT_CRASHED = 1
EXIT_STORE_FAILURE = 3  # the store or its disk failed (not the input)
EXIT_NOTHING_MEASURED = 4  # a session ended with 0 trials: every config it tried was rejected
EXIT_INTERRUPTED = 130
CONTROL_READY = "control signals ready (SIGUSR1 pause, SIGUSR2 resume, SIGTERM stop)"
STAGE_MARK = (
    "tunelab stage: "  # prefixes, on stderr, what a session does besides trials (a controller shows it)
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise TunelabError(
            f"{message} (see tunelab {self.prog.split()[-1]} --help)"
            if " " in self.prog
            else f"{message} (see tunelab --help)"
        )


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tunelab", description="A desktop lab for TVM kernel tuning. Without a command: the GUI."
    )
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    def with_db(q: argparse.ArgumentParser) -> None:
        q.add_argument("--db", help="SQLite store (default: $TUNELAB_DB or the user data folder)")

    g = sub.add_parser("gui", help="launch the desktop app")
    with_db(g)
    w = sub.add_parser("workloads", help="the catalog of operators with their parameters")
    w.add_argument("--json", action="store_true")

    t = sub.add_parser("tune", help="run a tuning session")
    t.add_argument(
        "workload", nargs="?", help="a name from `tunelab workloads`, or custom with --custom FILE"
    )
    t.add_argument(
        "--shape",
        default=None,
        help="K=V,... naming every parameter, or a preset (without --shape: the workload's default "
        "shape); several shapes separated by ';' are tuned together as tasks sharing the budget",
    )
    t.add_argument("--dtype", default=None)
    t.add_argument("--target", default="auto", help="auto | llvm | cuda | a JSON target dict")
    t.add_argument("--space", default="template", help="template | auto")
    t.add_argument("--space-file", help="an edited search space (JSON), as the GUI's editor saves it")
    t.add_argument(
        "--tuner", default=None, help="grid | random | genetic | xgb | evolutionary (default: recommended)"
    )
    t.add_argument("--tuner-option", action="append", default=[], metavar="K=V", help="e.g. pop_size=16")
    t.add_argument("--trials", type=int, default=64)
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--early-stop", type=int, default=None, help="stop after N trials without improvement")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--number", type=int, default=3, help="runs averaged into one sample")
    t.add_argument("--repeat", type=int, default=3, help="samples kept per trial")
    t.add_argument("--min-repeat-ms", type=int, default=20)
    t.add_argument("--warmup", type=int, default=1)
    t.add_argument("--timeout", type=float, default=30.0, help="seconds per build and per run")
    t.add_argument("--cache-flush", action="store_true", help="flush CPU caches between samples")
    t.add_argument("--no-check", action="store_true", help="skip the NumPy correctness check")
    t.add_argument(
        "--target-cv", type=float, default=0.05, help="sample on until the spread (CV) is this small"
    )
    t.add_argument("--max-repeat", type=int, default=12, help="cap on samples per trial")
    t.add_argument(
        "--cooldown", type=float, default=5.0, help="seconds to wait while the machine is hot or busy"
    )
    t.add_argument(
        "--confirm-runs",
        type=int,
        default=3,
        metavar="N",
        help="when finished, re-measure the fastest trials in N fresh processes (0: off)",
    )
    t.add_argument(
        "--confirm-top", type=int, default=3, metavar="K", help="how many of the fastest to confirm"
    )
    t.add_argument(
        "--fail-fast",
        type=int,
        default=16,
        metavar="N",
        help="stop (status failed, exit 1) when the first N trials all fail the same way (0: off)",
    )
    t.add_argument("--custom", help="a Python file with a TE compute (workload custom)")
    t.add_argument("--name", default="")
    t.add_argument("--resume", type=int, default=None, metavar="SESSION", help="continue a stored session")
    t.add_argument(
        "--spec",
        metavar="FILE",
        help="a whole session as JSON (SessionSpec.to_json, what the desktop app writes) instead of "
        "the workload and the options above",
    )
    t.add_argument("--json", action="store_true")
    with_db(t)

    s = sub.add_parser("sessions", help="list stored sessions")
    s.add_argument("--json", action="store_true")
    with_db(s)
    sh = sub.add_parser("show", help="one session: summary, best trial, rounds")
    sh.add_argument("session", type=int)
    sh.add_argument("--trials", action="store_true", help="include every trial")
    sh.add_argument("--json", action="store_true")
    with_db(sh)
    c = sub.add_parser("compare", help="sessions side by side")
    c.add_argument("sessions", type=int, nargs="+")
    c.add_argument("--json", action="store_true")
    with_db(c)
    b = sub.add_parser(
        "bias", help="where the cost model is wrong: residuals per shape, knob region and sketch"
    )
    b.add_argument("sessions", type=int, nargs="+")
    b.add_argument("--top-k", type=int, default=5)
    b.add_argument(
        "--by-task",
        action="store_true",
        help="a shape group per task of a several-shape session, and the points for plots (--json)",
    )
    b.add_argument("--json", action="store_true")
    with_db(b)
    e = sub.add_parser(
        "export", help="write the best (or a chosen) trial's schedule, TVMScript, library and database"
    )
    e.add_argument("session", type=int)
    e.add_argument("--trial", type=int, default=None)
    e.add_argument("--out", required=True)
    e.add_argument("--force", action="store_true", help="overwrite an export already in the --out folder")
    e.add_argument("--json", action="store_true")
    with_db(e)
    v = sub.add_parser(
        "validate", help="re-measure a session's top schedules (or a schedule file) in fresh processes"
    )
    v.add_argument(
        "source", metavar="SCHEDULE_FILE|SESSION", help="an exported *.schedule.json or a session id"
    )
    v.add_argument(
        "--repeats",
        type=int,
        default=5,
        metavar="N",
        help="fresh-process runs, each measuring every schedule once (default 5)",
    )
    v.add_argument("--top", type=int, default=3, metavar="K", help="a session's K fastest trials (default 3)")
    v.add_argument(
        "--shapes", default=None, help="also carry the best schedule to these shapes, e.g. M=16,32,64"
    )
    v.add_argument(
        "--task", type=int, default=0, help="which shape of a several-shape session (default 0, the first)"
    )
    v.add_argument(
        "--against",
        choices=("confirmed", "session"),
        default="confirmed",
        help="judge a session's trials against their confirmed figures where they have one (default) "
        "or the figures the session measured",
    )
    v.add_argument(
        "--trust-custom",
        action="store_true",
        help="run the workload code a schedule file carries (custom_source); without it such a "
        "file is refused, since its code would run in this process",
    )
    v.add_argument("--json", action="store_true")
    with_db(v)
    b = sub.add_parser(
        "baseline", help="the session's operator through the vendor library (NumPy BLAS, cuBLAS)"
    )
    b.add_argument("session", type=int)
    b.add_argument(
        "--remeasure", action="store_true", help="measure again instead of using the stored baseline"
    )
    b.add_argument("--json", action="store_true")
    with_db(b)
    r = sub.add_parser(
        "roofline", help="this machine's peak FLOP/s and bandwidth, and a session's best under them"
    )
    r.add_argument("session", type=int, nargs="?", default=None)
    r.add_argument("--target", default="llvm", help="llvm | cuda: the machine profile without a session")
    r.add_argument("--remeasure", action="store_true", help="run the micro-benchmarks again")
    r.add_argument("--json", action="store_true")
    with_db(r)
    return p


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


def _session_json(r: Any) -> dict[str, Any]:
    return {
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
        "trials": r.n_trials,
        "failed": r.n_failed,
        "budget": r.trials_budget,
        "best_ms": r.best_ms,
        "best_gflops": r.best_gflops,
        "best_trial_id": r.best_trial_id,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "error": r.error,
        "tvm_version": r.tvm_version,
    }


def _trial_json(t: Any) -> dict[str, Any]:
    from tunelab.core.stats import sample_stats

    stats = sample_stats(t.samples_ms)
    return {
        "cv": stats.cv if stats else None,
        "iqr_ms": stats.iqr if stats else None,
        "outliers": stats.outliers if stats else None,
        "id": t.id,
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
        "config": t.config,
        "samples_ms": list(t.samples_ms),
    }


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    for row in [header, *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)).rstrip())


# ---- commands -----------------------------------------------------------------------------------
def cmd_workloads(args: argparse.Namespace) -> int:
    from tunelab.core.workloads.catalog import list_workloads

    items = list_workloads()
    if args.json:
        print(json.dumps([w.to_json() for w in items]))
        return 0
    for w in items:
        params = ", ".join(f"{p.name}={p.default}" for p in w.params)
        print(f"{w.name:18s} {w.title}\n{'':18s} params: {params}; dtypes: {', '.join(w.dtypes)}")
    print("custom             your own TE compute: tunelab tune custom --custom my_op.py")
    return 0


def _options(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TunelabError(f"--tuner-option {item!r} is not K=V")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
        except RecursionError:
            raise TunelabError(f"--tuner-option {key}: the value is nested too deeply") from None
    return out


class _Progress:
    """A one-line progress bar with ETA on stderr."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.start_done, self.started = total, done, time.time()
        self.tty = sys.stderr.isatty()

    def update(self, done: int, best: float | None, failed: int) -> None:
        frac = done / self.total if self.total else 1.0
        rate = (time.time() - self.started) / max(done - self.start_done, 1)
        eta = rate * (self.total - done)
        bar = "#" * int(frac * 30)
        line = (
            f"[{bar:<30s}] {done}/{self.total} trials  best {_fmt(best)} ms  failed {failed}  "
            f"ETA {int(eta // 60)}:{int(eta % 60):02d}"
        )
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


class _StopSignals:
    """SIGINT and SIGTERM stop a tune cooperatively: the handler only sets the session's cancel flag.

    Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread happens to
    be: inside a TVM call (MetaSchedule's runner is called through TVM's FFI) it surfaced as a bare
    ``RuntimeError`` that crashed the session, and while the build pool's threads were still reading
    from workers the same signal had killed, the pool's shutdown raced them and hung the process. A
    stop that comes before the session exists is remembered and applied once it does."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self) -> None:
        import signal
        import threading

        self.signum: int | None = None
        self._session: Any = None
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers belong to the main thread; an embedding caller keeps its own
        for name in self.SIGNALS:
            signum = getattr(signal, name, None)
            if signum is not None:
                self._previous[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if self._session is not None:
            self._session.cancel()

    def attach(self, session: Any) -> None:
        self._session = session
        if self.signum is not None:
            session.cancel()

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or 0)

    def name(self) -> str:
        from tunelab.core.faults import signal_name

        return signal_name(int(self.signum or 0))

    def restore(self) -> None:
        import signal

        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


def cmd_tune(args: argparse.Namespace) -> int:
    stops = _StopSignals()
    try:
        return _tune(args, stops)
    finally:
        stops.restore()


def _tune(args: argparse.Namespace, stops: _StopSignals) -> int:
    from tunelab.core.search.tuners.registry import get_tuner_class, recommend_tuner, resolve_options
    from tunelab.core.session.loop import TuningSession, create_session, validate_spec

    if args.spec is not None:
        _check_spec_alone(args)
    if args.resume is not None:
        store = _open_store(args.db, create=False, write=True)
        # Refused before anything is built: a second runner would measure the same configs again.
        # (TuningSession.run claims the session atomically too, for two resumes started together.)
        store.refuse_if_running(args.resume)
        record = store.session(args.resume)
        if record.status == "finished" and record.n_trials >= record.trials_budget:
            raise TunelabError(f"session {args.resume} already finished its {record.trials_budget} trials")
        session = TuningSession(store, args.resume)
    else:
        spec = _load_spec(args.spec) if args.spec is not None else _spec_from_args(args)
        validated = validate_spec(spec)  # all input checked before the store is opened or created
        workload, shape, space = validated[0], validated[1], validated[-1]
        if args.spec is None and args.tuner is None:
            spec = _replace(spec, tuner=recommend_tuner(space.kind, space.size))
            resolve_options(get_tuner_class(spec.tuner), spec.tuner_options)  # options checked for that tuner
        if stops.signum is not None:
            print(f"tunelab: stopped by {stops.name()} before the session was stored", file=sys.stderr)
            return stops.exit_code
        store = _open_store(args.db, create=True, write=True)
        try:
            session = create_session(store, spec, validated=validated)
        except TunelabError:
            if stops.signum is None:
                raise
            # e.g. the target self-check's child got the group's signal too: not the target's fault
            print(f"tunelab: stopped by {stops.name()} before the session was stored", file=sys.stderr)
            return stops.exit_code
        from tunelab.core.workloads.base import format_shape

        default = " (the default shape)" if not spec.shape and shape == workload.default_shape() else ""
        more = f" +{len(spec.shapes)} shapes" if spec.shapes else ""
        print(
            f"session {session.session_id}: {spec.workload} {format_shape(shape)}{default}{more} on "
            f"{session.target.description}, {spec.space_kind} space of {session.space.size:,} configs, "
            f"tuner {spec.tuner}",
            file=sys.stderr,
        )
        if session.target.note:
            print(f"note: {session.target.note}", file=sys.stderr)
    from tunelab.core.usecases.tuning import confirm_when_finished

    confirm_when_finished(session)
    stops.attach(session)
    _control_by_signals(session)
    record = store.session(session.session_id)
    progress = _Progress(record.trials_budget, record.n_trials)
    session.on_stage.append(lambda text: print(f"\n{STAGE_MARK}{text}", file=sys.stderr, flush=True))
    done, failed, best = record.n_trials, record.n_failed, record.best_ms
    interrupted = False
    runner = session.run()
    try:
        for trial in runner:
            done += 1
            if not trial.ok:
                failed += 1
            elif best is None or trial.latency_ms < best:
                best = trial.latency_ms
            progress.update(done, best, failed)
    except KeyboardInterrupt:  # only where no handler could be installed (not the main thread)
        interrupted = True
        runner.close()
    except TunelabError as exc:
        progress.close()
        if isinstance(exc, SessionBusyError):
            raise  # refused: another process runs it (nothing was written)
        if session.crash is None and stops.signum is not None:
            # Stopped before it began measuring (the self-check's child got the signal too).
            print(
                f"tunelab: session {session.session_id} stopped by {stops.name()} before it started",
                file=sys.stderr,
            )
            return stops.exit_code
        if session.crash is None:
            raise
        if isinstance(exc, StoreFailure):  # the store or its disk failed underneath: not the input
            kept = _count_trials(store, session.session_id)
            print(
                f"tunelab: error: session {session.session_id} crashed: the store failed: {exc} The {kept} trial(s) "
                f"stored before are kept; tunelab tune --resume {session.session_id} continues once the cause is "
                f"fixed.",
                file=sys.stderr,
            )
            return EXIT_STORE_FAILURE
        print(
            f"tunelab: error: session {session.session_id} crashed: {exc} "
            f"(tunelab tune --resume {session.session_id} continues it)",
            file=sys.stderr,
        )
        return EXIT_CRASHED
    progress.close()
    record = store.session(session.session_id)
    summary = {
        "session_id": record.id,
        "status": record.status,
        "trials": record.n_trials,
        "measured": record.n_trials - record.n_failed,
        "failed": record.n_failed,
        "rejected": session.rejected,
        "best_ms": record.best_ms,
        "best_gflops": record.best_gflops,
        "best_trial_id": record.best_trial_id,
        "target": record.target,
        "tuner": record.tuner,
        "confirmations": [_confirmation_json(r) for r in session.confirmations],
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"session {record.id} {record.status}: {record.n_trials} trials ({record.n_failed} failed), "
            f"best {_fmt(record.best_ms)} ms = {_fmt(record.best_gflops)} GFLOP/s"
        )
        if session.confirmations:
            from tunelab.core.trust.confirm import format_confirmations

            print(format_confirmations(session.confirmations))
    if record.status == "failed":
        print(f"tunelab: session {record.id} failed: {record.error}", file=sys.stderr)
        return 1
    if stops.signum is not None:
        return stops.exit_code
    if interrupted:
        return EXIT_INTERRUPTED
    if record.n_trials == 0 and session.rejected:
        print(
            f"tunelab: error: session {record.id} measured nothing: all {session.rejected} configs it tried were "
            f"rejected before measuring (first: {session.first_rejection})",
            file=sys.stderr,
        )
        return EXIT_NOTHING_MEASURED
    return 0


def _count_trials(store: Any, session_id: int) -> int | str:
    try:
        return store.session(session_id).n_trials
    except Exception:  # noqa: BLE001 - the store failed: say so without a number
        return "earlier"


def _spec_from_args(args: argparse.Namespace) -> Any:
    """The SessionSpec the workload argument and the options describe (not checked yet)."""
    from tunelab.core.records import MeasureOptions, SessionSpec

    if not args.workload:
        raise TunelabError("tune needs a workload (see tunelab workloads)")
    custom_source = None
    if args.custom or args.workload == "custom":
        if not args.custom:
            raise TunelabError("workload custom needs --custom FILE")
        custom_source = _read_text(args.custom, "workload file")
    space_data = None
    if args.space_file:
        text = _read_text(args.space_file, "space file")
        try:
            space_data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TunelabError(f"space file {args.space_file} is not valid JSON: {exc}") from None
        except RecursionError:
            raise TunelabError(
                f"space file {args.space_file} is nested too deeply to be a search space"
            ) from None
    measure = MeasureOptions(
        number=args.number,
        repeat=args.repeat,
        min_repeat_ms=args.min_repeat_ms,
        warmup=args.warmup,
        timeout_s=args.timeout,
        cache_flush=args.cache_flush,
        check_correctness=not args.no_check,
        target_cv=args.target_cv,
        max_repeat=args.max_repeat,
        cooldown_s=args.cooldown,
        confirm_runs=args.confirm_runs,
        confirm_top=args.confirm_top,
        fail_fast=args.fail_fast,
    )
    shapes = [x for x in (args.shape or "").split(";") if x.strip()] or [None]
    spec = SessionSpec(
        workload="custom" if custom_source else args.workload,
        shape=shapes[0],  # type: ignore[arg-type]
        shapes=tuple(shapes[1:]),
        dtype=args.dtype or "",
        target=args.target,
        space_kind=args.space,
        space=space_data,
        tuner=args.tuner or "random",
        tuner_options=_options(args.tuner_option),
        trials=args.trials,
        batch=args.batch,
        early_stop=args.early_stop,
        seed=args.seed,
        measure=measure,
        name=args.name,
        custom_source=custom_source,
    )
    return spec


def _check_spec_alone(args: argparse.Namespace) -> None:
    """--spec holds the whole session: a workload, --resume or another session option beside it would be
    silently ignored, so it is an error."""
    defaults = vars(_parser().parse_args(["tune"]))
    given = [
        k
        for k, v in vars(args).items()
        if k not in ("command", "spec", "db", "json") and v != defaults.get(k)
    ]
    if given:
        names = ["a workload argument" if k == "workload" else "--" + k.replace("_", "-") for k in given]
        raise TunelabError(
            f"--spec FILE holds the whole session; it cannot be combined with {', '.join(names)}"
        )


def _load_spec(path: str) -> Any:
    """The SessionSpec in a JSON file (`SessionSpec.to_json`); a missing file, bad JSON, an unknown key or a
    value of the wrong type is a TunelabError (one line)."""
    from tunelab.core.records import SessionSpec

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise TunelabError(f"cannot read spec file {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TunelabError(f"spec file {path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise TunelabError(f"spec file {path} is nested too deeply to be a session spec") from None
    try:
        return SessionSpec.from_json(data)
    except TunelabError as exc:
        raise TunelabError(f"spec file {path}: {exc}") from None


def _confirmation_json(report: Any) -> dict[str, Any]:
    """A confirmation (a ValidationReport, tunelab.core.trust.confirm) in brief."""
    return {
        "validation_id": report.id,
        "task": report.source.task,
        "verdict": report.verdict,
        "runs": report.runs,
        "schedules": [
            {
                "trial_id": s.trial_id,
                "recorded_ms": s.recorded_ms,
                "remeasured_ms": s.remeasured_ms,
                "ratio": s.ratio,
                "cv": s.cv,
                "runs": s.runs,
                "verdict": s.verdict,
            }
            for s in report.schedules
        ],
    }


def _control_by_signals(session: Any) -> None:
    """Let another process steer this session (the desktop app runs sessions as `tunelab tune`
    child processes): SIGUSR1 pauses, SIGUSR2 resumes; SIGTERM (like SIGINT, see _StopSignals)
    stops it, dropping the trial it cut short."""
    import signal

    if not hasattr(signal, "SIGUSR1"):  # not POSIX
        return
    signal.signal(signal.SIGUSR1, lambda *_: session.pause())
    signal.signal(signal.SIGUSR2, lambda *_: session.resume())
    # Until this line a signal would kill the process: a controller waits for it.
    print(f"session {session.session_id}: {CONTROL_READY}", file=sys.stderr, flush=True)


def _replace(spec: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(spec, **changes)


def cmd_sessions(args: argparse.Namespace) -> int:
    store = _open_store(args.db, create=False)
    records = store.sessions()
    if args.json:
        print(json.dumps([_session_json(r) for r in records]))
        return 0
    rows = [
        [
            str(r.id),
            r.status,
            r.name,
            r.target_kind,
            r.space_kind,
            r.tuner,
            f"{r.n_trials}/{r.trials_budget}",
            _fmt(r.best_ms),
            _fmt(r.best_gflops),
        ]
        for r in records
    ]
    _print_table(rows, ["id", "status", "name", "target", "space", "tuner", "trials", "best ms", "GFLOP/s"])
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    store = _open_store(args.db, create=False)
    r = store.session(args.session)
    best = store.best_trial(args.session)
    rounds = store.rounds(args.session)
    doc = _session_json(r)
    doc["tasks"] = [
        {
            "id": t.id,
            "shape": t.shape,
            "flops": t.flops,
            "trials": t.n_trials,
            "failed": t.n_failed,
            "best_ms": t.best_ms,
            "best_gflops": t.best_gflops,
            "best_trial_id": t.best_trial_id,
        }
        for t in store.tasks(args.session)
    ]
    doc.update(
        {
            "space_json": r.space,
            "tuner_options": r.tuner_options,
            "measure": r.measure,
            "best_trial": _trial_json(store.trial(best.id)) if best else None,
            "rounds": [
                {"round": x.round, "n": x.n, "spearman": x.spearman, "best_ms": x.best_ms} for x in rounds
            ],
        }
    )
    from tunelab.core.trust.confirmed import confirmations

    confirmed = confirmations(store, args.session)
    doc["confirmed"] = [
        {
            "trial_id": k,
            "median_ms": v.median_ms,
            "session_ms": v.session_ms,
            "runs": v.runs,
            "cv": v.cv,
            "verdict": v.verdict,
            "validation_id": v.validation_id,
        }
        for k, v in sorted(confirmed.items(), key=lambda kv: kv[1].median_ms)
    ]
    if args.trials:
        doc["trials_list"] = [_trial_json(t) for t in store.trials(args.session, with_samples=True)]
    if args.json:
        print(json.dumps(doc))
        return 0
    print(f"session {r.id}: {r.name} [{r.status}]")
    print(f"  {r.workload} {r.shape} {r.dtype} on {r.target_kind} ({json.dumps(r.target)})")
    print(
        f"  {r.space_kind} space, tuner {r.tuner}, {r.n_trials}/{r.trials_budget} trials, {r.n_failed} failed"
    )
    if best:
        best_doc = doc["best_trial"]
        print(
            f"  best: trial {best.id}  median {_fmt(best.latency_ms)} ms (CV {_fmt(best_doc['cv'], 2)}, "
            f"IQR {_fmt(best_doc['iqr_ms'])} ms, {best_doc['outliers']} outliers)  "
            f"{_fmt(r.best_gflops)} GFLOP/s\n  config: {json.dumps(best.config)}"
        )
    for c in doc["confirmed"][:3]:
        print(
            f"  confirmed: trial {c['trial_id']}  {_fmt(c['median_ms'])} ms in {c['runs']} fresh processes "
            f"(session {_fmt(c['session_ms'])} ms)"
        )
    if len(doc["tasks"]) > 1:
        for t in doc["tasks"]:
            print(
                f"  shape {t['shape']}: {t['trials']} trials, best {_fmt(t['best_ms'])} ms "
                f"({_fmt(t['best_gflops'])} GFLOP/s)"
            )
    rhos = [x.spearman for x in rounds if x.spearman is not None]
    if rhos:
        print(f"  cost model rank correlation per round: {' '.join(f'{x:.2f}' for x in rhos)}")
    if r.error:
        print(f"  error: {r.error}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    store = _open_store(args.db, create=False)
    records = [store.session(i) for i in args.sessions]
    docs = []
    for r in records:
        best = store.best_trial(r.id)
        doc = _session_json(r)
        doc["best_config"] = best.config if best else None
        docs.append(doc)
    fastest = min((d["best_ms"] for d in docs if d["best_ms"]), default=None)
    for d in docs:
        d["speedup_vs_fastest"] = (d["best_ms"] / fastest) if (fastest and d["best_ms"]) else None
    if args.json:
        print(json.dumps({"sessions": docs, "fastest_ms": fastest}))
        return 0
    rows = [
        [
            str(d["id"]),
            d["name"],
            d["tuner"],
            d["space"],
            str(d["trials"]),
            _fmt(d["best_ms"]),
            _fmt(d["best_gflops"]),
            _fmt(d["speedup_vs_fastest"], 3),
        ]
        for d in docs
    ]
    _print_table(rows, ["id", "name", "tuner", "space", "trials", "best ms", "GFLOP/s", "x fastest"])
    return 0


def cmd_bias(args: argparse.Namespace) -> int:
    from tunelab.core.trust.bias import bias_report, bias_report_by_task

    if args.top_k < 1:
        raise TunelabError("--top-k must be at least 1")
    store = _open_store(args.db, create=False)
    report = (bias_report_by_task if args.by_task else bias_report)(store, args.sessions, k=args.top_k)
    if args.json:
        print(json.dumps(report.to_json(), default=str))
        return 0
    print(report.summary)
    rows = [
        [
            g.dimension,
            g.label,
            str(g.n),
            _fmt(g.residual_mean, 3),
            _fmt(g.residual_std, 3),
            _fmt(g.spearman, 2),
            _fmt(g.topk_recall, 2),
            "FLAG" if g.flagged else "",
        ]
        for g in report.groups
    ]
    if rows:
        _print_table(rows, ["group", "value", "n", "resid mean", "resid std", "spearman", "top-k", ""])
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tunelab.core.export.files import export_trial

    store = _open_store(args.db, create=False)
    written = export_trial(store, args.session, args.trial, out_dir=args.out, force=args.force)
    if args.json:
        print(json.dumps(written))
    else:
        for kind, path in written.items():
            print(f"{kind:10s} {path}")
    return 0


def _progress_line(done: int, total: int, message: str) -> None:
    print(f"[{done}/{total}] {message}", file=sys.stderr, flush=True)


def cmd_validate(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from tunelab.core.trust.remeasure.api import parse_source, validate_schedule_file
    from tunelab.core.trust.remeasure.report import format_report
    from tunelab.core.usecases.validation import validate_and_store

    def on_shapes(_shapes: list[dict[str, int]], _rule: Any) -> None:
        _progress_line(args.repeats, args.repeats, f"measuring the best schedule on the shapes {args.shapes}")

    source = parse_source(args.source)
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
        store = _open_store(args.db, create=True, write=True)
        report = replace(report, id=store.add_validation(report.to_json()))
    assert report is not None  # re-measured, and nothing here cancels it
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(format_report(report))
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    from tunelab.core.trust.baselines import baseline_for

    store = _open_store(args.db, create=False)
    record = store.session(args.session)
    result = baseline_for(store, record, remeasure=args.remeasure)
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
        f"  vendor   {vendor.library} ({vendor.method}): {_fmt(vendor.median_ms)} ms = "
        f"{_fmt(vendor.gflops)} GFLOP/s{'' if vendor.correct else '  (WRONG RESULT)'}\n"
        f"  session  {_fmt(record.best_ms)} ms = {_fmt(record.best_gflops)} GFLOP/s"
        + (f"  -> {x:.2f}x of vendor" if x else "")
    )
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    from tunelab.core.trust.roofline import machine_profile, roofline_for

    if args.session is None:
        if args.target not in ("llvm", "cuda"):
            raise TunelabError(f"--target must be llvm or cuda, not {args.target!r}")
        store = _open_store(args.db, create=True)
        profile = machine_profile(store, args.target, remeasure=args.remeasure)
        if args.json:
            print(json.dumps(None if profile is None else profile.to_json()))
        elif profile is None:
            print(f"no way to profile a {args.target} machine here (needs PyTorch or CuPy and a GPU)")
        else:
            peaks = ", ".join(f"{d} {_fmt(g)} GFLOP/s" for d, g in profile.peak_gflops.items())
            print(
                f"{profile.hostname} ({args.target}): peak {peaks}; bandwidth {_fmt(profile.bandwidth_gbs)} GB/s"
                f"\n  {profile.kernel or ''}"
            )
        return 0
    store = _open_store(args.db, create=False)
    roof = roofline_for(store, store.session(args.session), remeasure=args.remeasure)
    if args.json:
        print(json.dumps(roof.to_json()))
        return 0
    print(
        f"session {args.session}: intensity {_fmt(roof.intensity)} FLOP/byte; peak {_fmt(roof.peak_gflops)} "
        f"GFLOP/s, bandwidth {_fmt(roof.bandwidth_gbs)} GB/s -> bound {_fmt(roof.bound_gflops)} GFLOP/s "
        f"({roof.bound_by or '-'})\n  best {_fmt(roof.achieved_gflops)} GFLOP/s = "
        + (f"{100 * roof.fraction:.1f}% of the roofline" if roof.fraction is not None else "-")
        + (f"\n  note: {roof.note}" if roof.note else "")
    )
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    # The `tunelab` entry point (tunelab.__main__) opens the GUI before this parser sees `gui`; the
    # command line itself never imports the desktop app.
    raise TunelabError(
        "the desktop app starts as `tunelab` (no command) or `tunelab gui`, not from this module"
    )


COMMANDS = {
    "workloads": cmd_workloads,
    "tune": cmd_tune,
    "sessions": cmd_sessions,
    "show": cmd_show,
    "compare": cmd_compare,
    "export": cmd_export,
    "bias": cmd_bias,
    "gui": cmd_gui,
    "validate": cmd_validate,
    "baseline": cmd_baseline,
    "roofline": cmd_roofline,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import sqlite3

    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            _parser().print_help(sys.stderr)
            return EXIT_BAD_INPUT
        return COMMANDS[args.command](args)
    except StoreFailure as exc:
        print(f"tunelab: error: the store failed: {exc}", file=sys.stderr)
        return EXIT_STORE_FAILURE
    except TunelabError as exc:
        flag = f"--{exc.option.replace('_', '-')}: " if getattr(exc, "option", None) else ""
        print(f"tunelab: error: {flag}{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Cancelled as exc:  # a person stopped it: said, but neither bad input nor a failure
        print(f"tunelab: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except sqlite3.Error as exc:  # a read that met a failing disk (or a damaged file) outside Store's checks
        from tunelab.core.store import is_store_failure

        failure = is_store_failure(exc)
        print(
            f"tunelab: error: {'the store failed' if failure else 'the database is damaged'}: {exc}",
            file=sys.stderr,
        )
        return EXIT_STORE_FAILURE if failure else EXIT_BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C before a command installed its own handling
        print("tunelab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())

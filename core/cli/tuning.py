"""`tunelab tune`: a session from the options, a spec file or a stored session, run to its end with a
progress bar on stderr, steered by signals (SIGINT/SIGTERM stop it; SIGUSR1/SIGUSR2 pause and resume it), reporting its
progress as events (tunelab.core.cli.protocol) to a controlling process that asks for them."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from tunelab.core.cli.common import (
    EXIT_CRASHED,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_MEASURED,
    EXIT_STORE_FAILURE,
    _custom_and_space,
    _open_store,
    _read_json,
    say_error,
)
from tunelab.core.cli.parser import _parser
from tunelab.core.cli.protocol import EventWriter
from tunelab.core.errors import SessionBusyError, StoreFailure, TunelabError, shown
from tunelab.core.faults import OutOfSpace
from tunelab.core.records import figure_text

CONTROL_READY = "control signals ready (SIGUSR1 pause, SIGUSR2 resume, SIGTERM stop)"
# For people reading stderr; a controlling process reads the "ready" and "stage" events instead.
STAGE_MARK = "tunelab stage: "  # prefixes, on stderr, what a session does besides trials


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
            f"[{bar:<30s}] {done}/{self.total} trials  best {figure_text(best)} ms  failed {failed}  "
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

    # SIGHUP: the terminal the session ran in was closed; it stops like SIGTERM (resumable), not dead.
    SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

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
    """Open (or resume) the session, run it with progress, say how it ended; the exit code."""
    events: EventWriter = args.events
    if args.spec is not None:
        _check_spec_alone(args)
    opened = _resume(args) if args.resume is not None else _start(args, stops)
    if isinstance(opened, int):
        return opened  # stopped by a signal before the session was stored
    store, session = opened
    events.session(session.session_id)
    stops.attach(session)
    _control_by_signals(session, events)

    def on_stage(text: str) -> None:
        print(f"\n{STAGE_MARK}{text}", file=sys.stderr, flush=True)
        events.stage(text)

    session.on_stage.append(on_stage)
    from tunelab.core.usecases.tuning import tune_summary, vendor_before_round_zero

    vendor_before_round_zero(session)  # on a GPU: the measurer's yardstick from the first batch
    ran = _run_with_progress(store, session, events, stops)
    if isinstance(ran, int):
        return ran  # crashed, or stopped before it began
    summary = tune_summary(store, session)
    if args.json:
        print(json.dumps(summary.to_json()))
    else:
        print("\n".join(summary.words()))
    return _exit_code(args, store, summary, stops, interrupted=ran.interrupted)


def _resume(args: argparse.Namespace) -> tuple[Any, Any]:
    from tunelab.core.usecases.tuning import resume_session

    _check_resume_alone(args)
    store = _open_store(args.db, create=False, write=True)
    _patient(store)
    return store, resume_session(store, args.resume)


def _start(args: argparse.Namespace, stops: _StopSignals) -> tuple[Any, Any] | int:
    """A new session from --spec or the options, checked before the store is opened or created; an exit
    code where a stop came before it was stored."""
    from tunelab.core.usecases.tuning import plan_session, start_session, start_words

    spec = _load_spec(args.spec) if args.spec is not None else _spec_from_args(args)
    # --tuner-option without --tuner is for the tuner recommended for the space, known once it is built
    recommend = args.spec is None and args.tuner is None and not (args.warm_start or args.cost_model)
    planned = plan_session(spec, recommend=recommend)
    if stops.signum is not None:
        return _stopped_before_stored(stops)
    new_file = not _store_exists(args.db)
    store = _open_store(args.db, create=True, write=True)
    _patient(store)
    try:
        session = start_session(store, planned)
    except TunelabError as exc:
        if new_file and not isinstance(exc, StoreFailure):
            _remove_new_store(store)  # a refused start leaves no empty database behind
        if stops.signum is None:
            raise
        # e.g. the target self-check's child got the group's signal too: not the target's fault
        return _stopped_before_stored(stops)
    for line in start_words(session, planned):
        print(line, file=sys.stderr)
    return store, session


def _stopped_before_stored(stops: _StopSignals) -> int:
    print(f"tunelab: stopped by {stops.name()} before the session was stored", file=sys.stderr)
    return stops.exit_code


@dataclass(frozen=True)
class _Ran:
    interrupted: bool  # by KeyboardInterrupt, where no signal handler could be installed


def _run_with_progress(store: Any, session: Any, events: EventWriter, stops: _StopSignals) -> _Ran | int:
    """Run the session to its end, a progress bar on stderr and a trial event each; an exit code where it
    crashed or was stopped before it began."""
    record = store.session(session.session_id)
    progress = _Progress(record.trials_budget, record.n_trials)
    done, failed, best = record.n_trials, record.n_failed, record.best_ms
    runner = session.run()
    try:
        for trial in runner:
            done += 1
            if not trial.ok:
                failed += 1
            elif best is None or trial.latency_ms < best:
                best = trial.latency_ms
            progress.update(done, best, failed)
            events.trial(trial.id, ok=trial.ok, done=done, total=progress.total)
    except KeyboardInterrupt:  # only where no handler could be installed (not the main thread)
        runner.close()
        progress.close()
        return _Ran(interrupted=True)
    except TunelabError as exc:
        progress.close()
        return _crashed(store, session, exc, events, stops)
    progress.close()
    return _Ran(interrupted=False)


def _crashed(store: Any, session: Any, exc: TunelabError, events: EventWriter, stops: _StopSignals) -> int:
    """The exit code and line for a session that raised while it ran (re-raised where it is not a crash)."""
    if isinstance(exc, SessionBusyError):
        raise exc  # refused: another process runs it (nothing was written)
    if session.crash is None and stops.signum is not None:
        # Stopped before it began measuring (the self-check's child got the signal too).
        print(
            f"tunelab: session {session.session_id} stopped by {stops.name()} before it started",
            file=sys.stderr,
        )
        return stops.exit_code
    if session.crash is None:
        raise exc
    if isinstance(exc, StoreFailure):  # the store or its disk failed underneath: not the input
        kept = _count_trials(store, session.session_id)
        return say_error(
            events,
            f"session {session.session_id} crashed: "
            + ("" if isinstance(exc, OutOfSpace) else "the store failed: ")  # a full disk names itself
            + f"{exc} The {kept} trial(s) "
            f"stored before are kept; tunelab tune --resume {session.session_id} continues once the cause is "
            f"fixed.",
            EXIT_STORE_FAILURE,
        )
    return say_error(
        events,
        f"session {session.session_id} crashed: {exc} (tunelab tune --resume {session.session_id} continues it)",
        EXIT_CRASHED,
    )


def _exit_code(
    args: argparse.Namespace, store: Any, summary: Any, stops: _StopSignals, *, interrupted: bool
) -> int:
    from tunelab.core.usecases.tuning import all_wrong

    events: EventWriter = args.events
    record = summary.record
    if stops.signum is None and not interrupted:
        wrong = all_wrong(store, record, args.custom)
        if wrong:
            return say_error(events, wrong, EXIT_NOTHING_MEASURED)
    if record.status == "failed":
        print(f"tunelab: session {record.id} failed: {record.error}", file=sys.stderr)
        events.error(f"session {record.id} failed: {record.error}", EXIT_CRASHED)
        return 1
    if stops.signum is not None:
        return stops.exit_code
    if interrupted:
        return EXIT_INTERRUPTED
    nothing = summary.measured_nothing()
    return say_error(events, nothing, EXIT_NOTHING_MEASURED) if nothing else 0


def _store_exists(path: str | None) -> bool:
    import os

    from tunelab.core.store import default_db_path

    return os.path.exists(path or os.environ.get("TUNELAB_DB") or str(default_db_path()))


def _remove_new_store(store: Any) -> None:
    """Remove the database this start created, when nothing was stored in it (another process could have
    written a session meanwhile: then it stays)."""
    import os

    try:
        empty = not store.sessions()
    except Exception:  # noqa: BLE001 - unreadable: not ours to remove
        empty = False
    store.close()
    if empty:
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(f"{store.path}{suffix}")
            except OSError:
                pass


def _patient(store: Any) -> None:
    """A session's writes, its first included, wait for another process's write lock as long as the README
    promises (TUNELAB_WRITE_PATIENCE_S, 120 s by default), not the busy timeout alone."""
    from tunelab.core.store import session_write_patience

    store.write_patience_s = session_write_patience()


def _count_trials(store: Any, session_id: int) -> int | str:
    try:
        return store.session(session_id).n_trials
    except Exception:  # noqa: BLE001 - the store failed: say so without a number
        return "earlier"


def _rpc_options(args: argparse.Namespace) -> dict[str, Any]:
    from tunelab.core.usecases.tuning import remote_measure_fields

    return remote_measure_fields(args.rpc, args.rpc_key, args.rpc_workers)


def _spec_from_args(args: argparse.Namespace) -> Any:
    """The SessionSpec the workload argument and the options describe (not checked yet)."""
    from tunelab.core.records import MeasureOptions, SessionSpec

    custom_source, space_data = _custom_and_space(args, "tune")
    _check_space_kind(args.space_file, space_data, args.space)
    measure = MeasureOptions(
        number=args.number,
        repeat=args.repeat,
        min_repeat_ms=args.min_repeat_ms,
        warmup=args.warmup,
        timeout_s=args.timeout,
        cache_flush=args.cache_flush,
        l2_flush=args.l2_flush,
        lock_clocks=args.lock_clocks,
        check_correctness=not args.no_check,
        target_cv=args.target_cv,
        max_repeat=args.max_repeat,
        leader_band=args.leader_band,
        cooldown_s=args.cooldown,
        confirm_runs=args.confirm_runs,
        confirm_top=args.confirm_top,
        confirm_max_s=args.confirm_max_s,
        fail_fast=args.fail_fast,
        **_rpc_options(args),
    )
    # Shape text ("M=64,N=64" or a preset; None: the defaults) until check_spec parses it.
    shapes: list[Any] = [x for x in (args.shape or "").split(";") if x.strip()] or [None]
    spec = SessionSpec(
        workload="custom" if custom_source else args.workload,
        shape=shapes[0],
        shapes=tuple(shapes[1:]),
        dtype=_dtype_arg(args.dtype),
        target=args.target,
        space_kind=args.space,
        space=space_data,
        # A warm start and a choice of cost model are the xgb tuner's (the tuner whose model steers).
        tuner=args.tuner or ("xgb" if args.warm_start or args.cost_model else "random"),
        tuner_options={
            **_options(args.tuner_option),
            **({"warm_start": args.warm_start} if args.warm_start else {}),
            **({"model": args.cost_model} if args.cost_model else {}),
        },
        trials=args.trials,
        batch=args.batch,
        early_stop=args.early_stop,
        seed=args.seed,
        measure=measure,
        name=args.name,
        custom_source=custom_source,
        shadow_models=tuple(m.strip() for m in args.shadow_models.split(",") if m.strip()),
    )
    return spec


def _check_space_kind(path: str | None, data: Any, space: str) -> None:
    """A space file says what it is ("kind"); tuning it as the other kind read its knobs as if they were
    that kind's (a file saying auto, with template knobs, was tuned as a template)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind is not None and kind != space:
        named = kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 20 else shown(kind)
        raise TunelabError(
            f"space file {path} says its kind is {named}, but the session tunes the {space} space: pass "
            f'--space {named} or fix the file\'s "kind"'
        )


def _dtype_arg(text: str | None) -> str:
    """--dtype as given ("": the workload's first); an empty or blank value is a mistake, not the default."""
    if text is None:
        return ""
    if not text.strip():
        raise TunelabError("--dtype is empty: name a dtype (see tunelab workloads) or leave the option out")
    return text


def _check_spec_alone(args: argparse.Namespace) -> None:
    """--spec holds the whole session: a workload, --resume or another session option beside it would be
    silently ignored, so it is an error."""
    defaults = vars(_parser().parse_args(["tune"]))
    given = [
        k
        for k, v in vars(args).items()
        if k not in ("command", "spec", "db", "json", "events_fd", "events") and v != defaults.get(k)
    ]
    if given:
        names = ["a workload argument" if k == "workload" else "--" + k.replace("_", "-") for k in given]
        raise TunelabError(
            f"--spec FILE holds the whole session; it cannot be combined with {', '.join(names)}"
        )


# What a resume may be given besides the session: how to report, not what to tune.
_RESUME_KEEPS = ("command", "resume", "db", "json", "events_fd", "events")


def _check_resume_alone(args: argparse.Namespace) -> None:
    """--resume continues a session as it was created (its budget, measurement, confirmation): an option
    that would change it is refused rather than silently ignored."""
    defaults = vars(_parser().parse_args(["tune"]))
    given = [k for k, v in vars(args).items() if k not in _RESUME_KEEPS and v != defaults.get(k)]
    if given:
        names = ["a workload argument" if k == "workload" else "--" + k.replace("_", "-") for k in given]
        raise TunelabError(
            f"--resume {args.resume} continues the session as it was created (its budget, measurement and "
            f"confirmation); it cannot be combined with {', '.join(names)}"
        )


def _load_spec(path: str) -> Any:
    """The SessionSpec in a JSON file (`SessionSpec.to_json`); a missing file, bad JSON, an unknown key or a
    value of the wrong type is a TunelabError (one line)."""
    from tunelab.core.records import SessionSpec

    data = _read_json(path, "spec file", "a session spec")
    try:
        return SessionSpec.from_json(data)
    except TunelabError as exc:
        raise TunelabError(f"spec file {path}: {exc}") from None


def _control_by_signals(session: Any, events: EventWriter) -> None:
    """Let another process steer this session (the desktop app runs sessions as `tunelab tune`
    child processes): SIGUSR1 pauses, SIGUSR2 resumes; SIGTERM (like SIGINT, see _StopSignals)
    stops it, dropping the trial it cut short. Says so on stderr and as the ``ready`` event."""
    import signal

    if not hasattr(signal, "SIGUSR1"):  # not POSIX
        return
    signal.signal(signal.SIGUSR1, lambda *_: session.pause())
    signal.signal(signal.SIGUSR2, lambda *_: session.resume())
    # Until this line a signal would kill the process: a controller waits for it.
    print(f"session {session.session_id}: {CONTROL_READY}", file=sys.stderr, flush=True)
    events.ready(session.session_id)

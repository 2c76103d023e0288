"""`tunelab tune`: a session from the options, a spec file or a stored session, run to its end with a
progress bar on stderr, steered by signals (SIGINT/SIGTERM stop it; SIGUSR1/SIGUSR2 pause and resume it), reporting its
progress as events (tunelab.core.cli.protocol) to a controlling process that asks for them."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from tunelab.core.cli.common import (
    EXIT_CRASHED,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_MEASURED,
    EXIT_STORE_FAILURE,
    _custom_and_space,
    _fmt,
    _open_store,
    _stated_best,
    say_error,
)
from tunelab.core.cli.parser import _parser
from tunelab.core.cli.protocol import EventWriter
from tunelab.core.errors import SessionBusyError, StoreFailure, TunelabError, shown
from tunelab.core.faults import OutOfSpace
from tunelab.core.records import trial_label

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
    from tunelab.core.records import check_numbers
    from tunelab.core.search.tuners.registry import get_tuner_class, recommend_tuner, resolve_options
    from tunelab.core.session.loop import TuningSession, check_spec, create_session

    events: EventWriter = args.events
    if args.spec is not None:
        _check_spec_alone(args)
    if args.resume is not None:
        _check_resume_alone(args)
        store = _open_store(args.db, create=False, write=True)
        _patient(store)
        # Refused before anything is built: a second runner would measure the same configs again.
        # (TuningSession.run claims the session atomically too, for two resumes started together.)
        store.refuse_if_running(args.resume)
        record = store.session(args.resume)
        if record.status == "finished" and record.n_trials >= record.trials_budget:
            raise TunelabError(f"session {args.resume} already finished its {record.trials_budget} trials")
        session = TuningSession(store, args.resume)
    else:
        spec = _load_spec(args.spec) if args.spec is not None else _spec_from_args(args)
        check_numbers(spec)  # each number named by its option, before anything is built
        recommended = args.spec is None and args.tuner is None and not (args.warm_start or args.cost_model)
        # --tuner-option without --tuner is for the tuner recommended for the space, known once it is built
        options, spec = (spec.tuner_options, _replace(spec, tuner_options={})) if recommended else ({}, spec)
        validated = check_spec(spec)  # all input checked before the store is opened or created
        workload, shape, space = validated.workload, validated.shape, validated.space
        if recommended:
            spec = _replace(spec, tuner=recommend_tuner(space.kind, space.size), tuner_options=options)
            try:
                resolve_options(get_tuner_class(spec.tuner), spec.tuner_options)
            except TunelabError as exc:
                raise TunelabError(
                    f"{exc} ({spec.tuner} is the tuner recommended for this space; --tuner picks another)"
                ) from None
        if stops.signum is not None:
            print(f"tunelab: stopped by {stops.name()} before the session was stored", file=sys.stderr)
            return stops.exit_code
        new_file = not _store_exists(args.db)
        store = _open_store(args.db, create=True, write=True)
        _patient(store)
        try:
            session = create_session(store, spec, validated=validated)
        except TunelabError as exc:
            if new_file and not isinstance(exc, StoreFailure):
                _remove_new_store(store)  # a refused start leaves no empty database behind
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
    events.session(session.session_id)
    stops.attach(session)
    _control_by_signals(session, events)
    record = store.session(session.session_id)
    progress = _Progress(record.trials_budget, record.n_trials)

    def on_stage(text: str) -> None:
        print(f"\n{STAGE_MARK}{text}", file=sys.stderr, flush=True)
        events.stage(text)

    session.on_stage.append(on_stage)
    from tunelab.core.usecases.tuning import vendor_before_round_zero

    vendor_before_round_zero(session)  # on a GPU: the measurer's yardstick from the first batch
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
            events.trial(trial.id, ok=trial.ok, done=done, total=progress.total)
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
            f"session {session.session_id} crashed: {exc} "
            f"(tunelab tune --resume {session.session_id} continues it)",
            EXIT_CRASHED,
        )
    progress.close()
    record = store.session(session.session_id)
    stated = _stated_best(store, record)
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
        "best_trial_number": record.best_trial_number,
        "target": record.target,
        "tuner": record.tuner,
        "confirmations": [_confirmation_json(r) for r in session.confirmations],
        "best": stated.to_json() if stated is not None else None,  # the one best every view states
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"session {record.id} {record.status}: {record.n_trials} trials ({record.n_failed} failed), "
            f"best {_fmt(record.best_ms)} ms = {_fmt(record.best_gflops)} GFLOP/s"
            + (
                f" (trial {trial_label(record.best_trial_number, trial_id=record.best_trial_id)})"
                if record.best_trial_number is not None
                else ""
            )
        )
        if session.confirmations:
            from tunelab.core.trust.confirm import format_confirmations

            print(format_confirmations(session.confirmations))
        if stated is not None:
            print(f"stated best ({stated.kind}): {stated.words()}")
    if stops.signum is None and not interrupted:
        wrong = _all_wrong(store, record, args.custom)
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
    if record.n_trials == 0 and session.rejected:
        return say_error(
            events,
            f"session {record.id} measured nothing: all {session.rejected} configs it tried were "
            f"rejected before measuring (first: {session.first_rejection})",
            EXIT_NOTHING_MEASURED,
        )
    return 0


def _all_wrong(store: Any, record: Any, custom: str | None) -> str:
    """Why a session with trials measured nothing right ("": it did): when every trial computed other
    values than the reference, the reference is the likelier culprit (a custom file's above all), and
    the session must not read as finished."""
    if record.n_trials == 0 or record.n_trials != record.n_failed:
        return ""
    trials = store.trials(record.id)
    if not trials or any(t.status != "wrong_result" for t in trials):
        return ""
    if record.workload == "custom":
        where = f"the custom file {custom}" if custom else "the session's custom file"
        culprit = f"its reference() is likely wrong: check reference() in {where} against compute()"
    else:
        culprit = f"the {record.workload} reference disagrees with every kernel"
    return (
        f"session {record.id} measured nothing right: all {len(trials)} trials computed other values than "
        f"the reference (wrong_result); {culprit}"
    )


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
    """MeasureOptions' RPC fields from --rpc/--rpc-key/--rpc-workers. The tracker's environment variables
    count only with --rpc-key, so a shell that exports them for other tools still tunes here."""
    from tunelab.core.measure.remote import TrackerAddress

    tracker = TrackerAddress.parse(args.rpc) if args.rpc else None
    if tracker is None and args.rpc_key:
        tracker = TrackerAddress.from_env()
        if tracker is None:
            raise TunelabError("--rpc-key needs --rpc HOST:PORT (or TVM_TRACKER_HOST and TVM_TRACKER_PORT)")
    if tracker is None:
        if args.rpc_workers != 1:
            raise TunelabError("--rpc-workers needs --rpc HOST:PORT and --rpc-key")
        return {}
    return {"rpc_tracker": str(tracker), "rpc_key": args.rpc_key, "rpc_workers": args.rpc_workers}


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
                "label": s.label,
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


def _replace(spec: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(spec, **changes)

"""A tuning session: ask -> predict -> build -> run -> store -> tell, as a generator of finished trials.

The store is the single source of truth: a session object holds its id, a store and the live
pieces (space, tuner, cost model, measurer), and rebuilds all of them from the store on resume,
so a resumed session measures nothing twice and its tuner continues from where it stopped.

Stopping is cooperative (Optuna's stop flag, superqt's abort_requested): `pause()`, `cancel()`,
the budget and early stopping are checked between batches and between trials; threads are
never killed. A trial whose measurement a cancel cut short (SIGTERM or Ctrl-C reach the build and
run workers too, and kill them) is not a measurement: it is not stored, and a resumed session asks
for it again.

A session has one runner: `run()` claims it in the store (`Store.claim_session`), which refuses
while another live process runs it. Its writes wait out another process's write lock for up to
`tunelab.core.store.SESSION_WRITE_PATIENCE_S`; a lock held longer ends the session as crashed (resumable).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tunelab.core.errors import Cancelled, SpaceError, StoreError, TargetError, TunelabError
from tunelab.core.records import MeasureOptions, NewTrial, SessionRecord, SessionSpec, TrialRecord
from tunelab.core.search.costmodel import spearman
from tunelab.core.search.models import make_cost_model
from tunelab.core.search.space.base import SearchSpace, config_key
from tunelab.core.search.space.factory import make_space, space_for_session, space_for_task, task_space
from tunelab.core.search.space.records import RECORDS_KIND, not_tunable
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.search.tuners.base import Observation
from tunelab.core.search.tuners.registry import get_tuner_class, make_tuner, resolve_options
from tunelab.core.store import Store, session_write_patience
from tunelab.core.target.info import REMOTE_TARGET, TargetInfo, resolve_target, target_from_json
from tunelab.core.workloads.base import format_shape
from tunelab.core.workloads.catalog import get_workload
from tunelab.core.workloads.tir import TIR_NAME

PAUSED_HEARTBEAT_S = 30.0  # a paused session still marks itself alive (tunelab.core.store.HEARTBEAT_STALE_S)
MAX_REJECTED_ASKS = 20  # ask rounds in a row that yield only invalid or known configs: the space is spent


@dataclass(frozen=True, slots=True)
class CheckedSpec:
    """What :func:`check_spec` built while it checked a spec: the parts a session is made of."""

    workload: Any  # tunelab.core.workloads.base.Workload
    shape: dict[str, int]  # complete: every parameter named
    dtype: str  # the workload's first where the spec named none
    target: TargetInfo
    space: SearchSpace  # of the first shape


def check_spec(spec: SessionSpec, target: TargetInfo | None = None) -> CheckedSpec:
    """Check every part of a spec before anything is stored; bad input raises a TunelabError.

    ``target``: the spec's target as the caller already resolved it (the New-session dialog asked a
    server for ``remote`` in a thread), so that the check does not ask the network again."""
    if spec.workload == TIR_NAME or spec.space_kind == RECORDS_KIND:
        raise not_tunable(f"workload {spec.workload}")
    if spec.workload == "custom" and isinstance(spec.custom_source, str):
        from tunelab.core.workloads.custom import vet_custom

        # One child process loads the person's file and builds this shape before any of it runs here.
        vet_custom(spec.custom_source, build=True, shape=spec.shape, dtype=spec.dtype or None)
    workload = get_workload(spec.workload, spec.custom_source)
    shape = workload.parse_shape(spec.shape, complete=True)
    dtype = workload.check_dtype(spec.dtype or None)  # none given: the workload's first
    others = extra_shapes(workload, shape, spec.shapes)
    for s in (shape, *others):  # before any space is built: a shape that cannot fit is refused at once
        workload.check_memory(s, dtype)
    target = session_target(spec) if target is None else target
    if spec.trials < 1:
        raise TunelabError(f"the trial budget must be at least 1, not {spec.trials}", option="trials")
    if spec.batch < 1:
        raise TunelabError(f"the batch size must be at least 1, not {spec.batch}", option="batch")
    if spec.early_stop is not None and spec.early_stop < 1:
        raise TunelabError(f"early stopping needs at least 1 trial, not {spec.early_stop}")
    m = spec.measure
    if (
        m.number < 1
        or m.repeat < 1
        or m.min_repeat_ms < 0
        or m.warmup < 0
        or m.timeout_s <= 0
        or m.target_cv < 0
        or m.max_repeat < 1
        or m.cooldown_s < 0
    ):
        raise TunelabError(
            "measurement options must be positive (number, repeat, max repeat >= 1; timeout > 0)"
        )
    if m.leader_band != 0 and not 1 < m.leader_band <= 100:
        raise TunelabError(
            f"the leader band must be 0 (time every candidate fully) or a factor above 1, not "
            f"{m.leader_band}",
            option="leader-band",
        )
    if m.fail_fast < 0:
        raise TunelabError(f"fail-fast needs 0 (off) or a number of trials, not {m.fail_fast}")
    if not 0 <= m.confirm_runs <= 32 or not 0 <= m.confirm_top <= 32:
        raise TunelabError(
            f"confirmation needs 0..32 fresh processes and 0..32 schedules, not "
            f"{m.confirm_runs} and {m.confirm_top} (0 turns it off)"
        )
    if m.remote:
        from tunelab.core.measure.remote import TrackerAddress

        TrackerAddress.parse(m.rpc_tracker)
        if not m.rpc_key:
            raise TunelabError(
                "--rpc needs --rpc-key: the key the servers registered under", option="rpc-key"
            )
        if not 1 <= m.rpc_workers <= 256:
            raise TunelabError(
                f"--rpc-workers must be 1..256 candidates in flight, not {m.rpc_workers}",
                option="rpc-workers",
            )
    from tunelab.core.measure.l2_flush import L2_FLUSH_MODES

    if m.l2_flush not in L2_FLUSH_MODES:
        raise TunelabError(
            f"the L2 flush must be one of {', '.join(L2_FLUSH_MODES)}, not {m.l2_flush!r}", option="l2-flush"
        )
    if not 0 <= m.confirm_max_s <= 86400:
        raise TunelabError(
            f"the confirmation's time cap must be 0..86400 seconds, not {m.confirm_max_s}",
            option="confirm-max-s",
        )
    resolve_options(get_tuner_class(spec.tuner), spec.tuner_options)
    if len(set(spec.shadow_models)) != len(spec.shadow_models):
        raise TunelabError(f"--shadow-models names a model twice: {','.join(spec.shadow_models)}")
    for name in spec.shadow_models:
        make_cost_model(name)  # an unknown name: one line listing the models
    for s in (shape, *others):  # a person's compute and reference at these shapes, in a child first
        workload.vet(s, dtype)
    space = make_space(workload, shape, dtype, target, spec.space_kind, spec.space)
    if space.size < 1:
        raise SpaceError("the search space is empty")
    check_schedulable(space)
    # The tuner checks its options' ranges when it is made: made once here, a bad value is refused
    # before the session is stored (not when its run begins).
    make_tuner(spec.tuner, space, seed=spec.seed, **spec.tuner_options).close()
    return CheckedSpec(workload, shape, dtype, target, space)


# The probe draws as MetaSchedule's evolutionary search samples its first population on CUDA: many random
# draws, each checked by the space's postprocessors, until one is legal. On sm_90 about 94-97 % of random
# auto-space configs of a GEMM 4096^3 or a ResNet conv fail VerifyGPUCode, so a handful of draws said
# "cannot schedule" of spaces that schedule (a count of 8 refused 3 of 4 H200 sessions); the draws are
# bounded by time and by count instead (7-30 ms a draw on 2 cores: a legal config within about 1 s there).
SCHEDULABLE_PROBE_S = 15.0
SCHEDULABLE_PROBE_DRAWS = 4096


def check_schedulable(
    space: SearchSpace,
    *,
    budget_s: float = SCHEDULABLE_PROBE_S,
    max_draws: int = SCHEDULABLE_PROBE_DRAWS,
) -> int:
    """How many configs were drawn before one made a legal schedule (the space's first config, then
    random draws); SpaceError, in one line, when none did within ``budget_s`` seconds or ``max_draws``
    draws (every config would be rejected and the session would measure nothing)."""
    rng = np.random.default_rng(0)
    reasons: collections.Counter[str] = collections.Counter()
    start = time.monotonic()
    draws = 0
    while draws < min(max_draws, space.size):
        config = space.point(0) if draws == 0 else space.sample(rng)
        draws += 1
        try:
            space.schedule(config)
            return draws
        except InvalidSchedule as exc:
            reasons[str(exc).splitlines()[0] if str(exc) else type(exc).__name__] += 1
        if time.monotonic() - start >= budget_s:
            break
    seconds = time.monotonic() - start
    why = "; ".join(f"{reason} ({n})" for reason, n in reasons.most_common(2))
    raise SpaceError(
        f"the {space.kind} space cannot schedule this compute: none of {draws} configs drawn in "
        f"{seconds:.1f} s made a legal schedule ({why})"
    )


def search_overlaps_measuring(target: TargetInfo, options: MeasureOptions) -> bool:
    """Whether the next batch is proposed while this one is measured: where the kernels run on a GPU of
    this machine. There the search's threads do not share the device the kernels are timed on (on the
    H200 the search between rounds took 30-45 s of a 90 s session); on a CPU they would disturb every
    timing, and an RPC server's CPU may be this one."""
    return target.kind == "cuda" and not options.remote


def extra_shapes(workload: Any, shape: dict[str, int], shapes: Any) -> list[dict[str, int]]:
    """The session's other shapes (tasks), parsed; a repeated shape is an error."""
    parsed = [workload.parse_shape(s, complete=True) for s in shapes or ()]
    seen = [shape]
    for other in parsed:
        if other in seen:
            raise TunelabError(f"shape {format_shape(other)} is listed twice")
        seen.append(other)
    return parsed


def create_session(store: Store, spec: SessionSpec, *, validated: CheckedSpec | None = None) -> TuningSession:
    """Validate a spec, store a new session and return it ready to run. ``validated`` is what
    :func:`check_spec` already returned for this very spec (the CLI checks input before it opens
    the store), so the space is not built twice."""
    import tvm

    checked = validated if validated is not None else check_spec(spec)
    workload, shape, dtype, target, space = (
        checked.workload,
        checked.shape,
        checked.dtype,
        checked.target,
        checked.space,
    )
    store.check_intact()  # nothing is written to a damaged file
    if not target.can_run and not spec.measure.remote:
        raise TargetError(
            f"{target.description}: kernels for this target can be built here but not measured"
            + (f" ({target.why_not})" if target.why_not else "")
        )
    check_measurable(target, spec.measure)  # a target whose kernels die is refused before anything is stored
    _check_warm_start(store, spec, workload, dtype, target, space)
    others = extra_shapes(workload, shape, spec.shapes)
    other_spaces = [task_space(workload, s, dtype, target, spec.space_kind, spec.space) for s in others]
    # A default name is the problem's, made distinct in the store ("gemm M=64,N=64,K=64 #2"): sessions
    # of one problem were listed under one name, told apart only by their ids.
    base = f"{workload.name} {format_shape(shape)}" + (f" +{len(others)} shapes" if others else "")
    taken = set() if spec.name else {r.name for r in store.sessions()}
    name = spec.name or next(
        n for n in (base, *(f"{base} #{i}" for i in range(2, len(taken) + 3))) if n not in taken
    )
    spec = replace(spec, shape=shape, shapes=tuple(others), dtype=dtype, name=name)
    space_json = space.to_json()
    if other_spaces:
        space_json["task_spaces"] = [s.to_json() for s in other_spaces]
    tasks = [(s, float(workload.flops(s))) for s in [shape, *others]]
    session_id = store.create_session(
        spec,
        target_json=target.json,
        target_kind=target.kind,
        space_json=space_json,
        tvm_version=tvm.__version__,
        flops=float(workload.flops(shape)),
        tasks=tasks,
    )
    return TuningSession(store, session_id, _prepared=(workload, shape, dtype, target, space))


def _check_warm_start(
    store: Store, spec: SessionSpec, workload: Any, dtype: str, target: Any, space: Any
) -> None:
    """Named warm-start sessions that do not exist or tuned something else are refused now, before
    the session is stored (``auto`` takes whatever matches, possibly nothing)."""
    from tunelab.core.session.warm_start import parse_warm_start, source_sessions

    choice = parse_warm_start(str(spec.tuner_options.get("warm_start", "")))
    if isinstance(choice, tuple):
        source_sessions(
            store, choice, workload=workload.name, dtype=dtype, space_kind=space.kind, target=target.json
        )


def session_target(spec: SessionSpec) -> TargetInfo:
    """The target a spec tunes for. Measured through an RPC tracker, the kernels run on its servers:
    they are built here for the target as given (another architecture cross-compiled), and ``remote``
    is the CPU of a server under the key, as that server's own TVM reports it."""
    if not spec.measure.remote:
        if spec.target == REMOTE_TARGET:
            raise TargetError(
                f"--target {REMOTE_TARGET} means a server's CPU: it needs --rpc HOST:PORT and --rpc-key"
            )
        return resolve_target(spec.target)
    if spec.target == REMOTE_TARGET:
        from tunelab.core.measure.remote import TrackerAddress, remote_target

        return remote_target(TrackerAddress.parse(spec.measure.rpc_tracker), spec.measure.rpc_key)
    return resolve_target(spec.target, elsewhere=True)


def check_measurable(target: Any, options: MeasureOptions) -> None:
    """Raise before anything is stored or measured when the session's kernels cannot run where it
    measures: here, a target whose kernels die on this CPU (tunelab.core.target.selfcheck); through an
    RPC tracker, a tracker that does not answer or has no server under the key."""
    if options.remote:
        from tunelab.core.measure.remote import TrackerAddress, remote_self_check, require_servers

        tracker = TrackerAddress.parse(options.rpc_tracker)
        require_servers(tracker, options.rpc_key)
        remote_self_check(target, tracker, options.rpc_key)
        return
    from tunelab.core.target.selfcheck import self_check

    self_check(target)  # cached per target and machine


def _fail_fast_reason(tasks: list[Any], limit: int, before: int, after: int) -> str:
    """Why the session should stop now, when its first `limit` trials all failed alike; else ""."""
    from tunelab.core.faults import failure_class

    if limit <= 0 or not before < limit <= after:
        return ""
    trials = sorted((t for task in tasks for t in task.history), key=lambda t: t.id)[:limit]
    if len(trials) < limit or any(t.ok for t in trials):
        return ""
    classes = {failure_class(t.status, t.error) for t in trials}
    if len(classes) != 1:
        return ""
    sample = (trials[-1].error or trials[-1].status).strip().splitlines()[0][:300]
    return f"the first {limit} trials all failed with {classes.pop()}: {sample}"


class TuningSession:
    """Runs one stored session. Create with `create_session`, or `TuningSession(store, id)` to resume."""

    def __init__(self, store: Store, session_id: int, *, _prepared: tuple | None = None) -> None:
        self.store = store
        self.session_id = session_id
        record = store.session(session_id)
        if _prepared is None:
            if record.space_kind == RECORDS_KIND:
                raise not_tunable(f"session {session_id}")
            store.check_intact()  # a resumed session: nothing is written to a damaged file (create_session checks)
            workload = get_workload(record.workload, record.custom_source)
            target = target_from_json(record.target)
            space = space_for_session(record)
            _prepared = (workload, record.shape, record.dtype, target, space)
        self.workload, self.shape, self.dtype, self.target, self.space = _prepared
        self._pause = threading.Event()
        self._cancel = threading.Event()
        self.telemetry_status = ""
        self.rejected = 0  # configs the space could not turn into a legal schedule (never measured)
        self.first_rejection: str | None = None  # why the first of them was rejected
        self.on_trial: list[Callable[[TrialRecord], None]] = []
        self.on_stage: list[Callable[[str], None]] = []  # what the session does besides trials, in words
        # Run, in order, when the session finished (before its status says so); see _before_finish.
        self.before_finish: list[Callable[[TuningSession], None]] = []
        # the reports (ValidationReport) of tunelab.core.trust.confirm once finished; a layer above this one
        self.confirmations: list[Any] = []
        self.crash: str | None = None  # "Type: message" of what ended the last run as crashed

    # ---- control (safe from any thread) ---------------------------------------------------------
    def pause(self) -> None:
        self._pause.set()

    def resume(self) -> None:
        self._pause.clear()

    def cancel(self) -> None:
        self._cancel.set()
        self._pause.clear()

    @property
    def record(self) -> SessionRecord:
        return self.store.session(self.session_id)

    # ---- the loop -------------------------------------------------------------------------------
    def run(self) -> Generator[TrialRecord, None, None]:
        """Tune until the budget is spent, the space is exhausted, early stopping or cancel.

        A session with several shapes (tasks) spends one budget on all of them: every task gets a
        batch in turn at first; after that each batch goes to the task whose best latency improved
        most (relatively) in its last batch, ties to the task with the fewest trials, so the
        budget flows to the shapes where tuning still pays (Ansor's task scheduler, simplified).
        """
        from tunelab.core.measure.runner import Measurer, stored_vendor_ms
        from tunelab.core.telemetry.sampler import TelemetrySampler

        record = self.store.session(self.session_id)
        if not self.target.can_run and not MeasureOptions.from_json(record.measure).remote:
            raise TargetError(
                f"{self.target.description}: this machine cannot run kernels for the session's target"
                + (f" ({self.target.why_not})" if self.target.why_not else "")
            )
        check_measurable(self.target, MeasureOptions.from_json(record.measure))  # before the first batch
        saved_patience, saved_on_wait = self.store.write_patience_s, self.store.on_lock_wait
        self.store.write_patience_s = session_write_patience()
        self.store.on_lock_wait = lambda limit: self._stage(
            f"the database is locked by another process; waiting up to {limit:g} s to write"
        )
        try:
            # One runner per session: refused (nothing written) while another live process runs it;
            # from here on this process owns it, so the history read below stays complete.
            self.store.claim_session(self.session_id)
        except BaseException:
            self.store.write_patience_s, self.store.on_lock_wait = saved_patience, saved_on_wait
            raise
        self.crash = None
        options = MeasureOptions.from_json(record.measure)
        history = self.store.trials(self.session_id)
        task_records = self.store.tasks(self.session_id)
        multi = len(task_records) > 1
        state = self.store.tuner_state(self.session_id) or {}
        tasks = []
        for task_record in task_records:
            space = self.space if task_record.index == 0 else space_for_task(record, task_record)
            mine = [
                t for t in history if t.task_id in (task_record.id, None if task_record.index == 0 else -1)
            ]
            tasks.append(
                _Task(
                    task_record,
                    space,
                    mine,
                    multi,
                    record,
                    state.get(str(task_record.index)) if multi else state,
                )
            )
        for task in tasks:
            if hasattr(task.tuner, "report"):  # a tuner that says why it chose (ucb): on the stage line
                task.tuner.report = self._stage
        self._warm_start(record, tasks)
        rounds = self.store.rounds(self.session_id)
        round_index = (rounds[-1].round + 1) if rounds else (max((t.round for t in history), default=-1) + 1)
        n_done = len(history)

        # Fail fast: the first `fail_fast` trials of a session all failing the same way (every kernel
        # dies of SIGILL, every build fails) say the setup is wrong; the rest of the budget would
        # only repeat it. Checked once, when the n-th trial arrives in this run.
        fail_fast = options.fail_fast
        overlap = search_overlaps_measuring(self.target, options)
        # The sampler thread only reads the hardware; this thread writes its samples between
        # batches, so the session keeps a single writing connection.
        sampler = TelemetrySampler()
        sampler.start()
        clock_lock = None
        if options.lock_clocks and self.target.kind == "cuda":
            from tunelab.core.telemetry.clock_lock import ClockLock

            clock_lock = ClockLock(0).__enter__()  # released in the finally below, whatever ends the run
            self._stage(clock_lock.message)
        elif options.lock_clocks:
            self._stage(f"GPU clocks not locked: the target is {self.target.kind}, not a GPU")
        self._sampler_started = time.time()
        self.telemetry_status = sampler.gpu_status
        telemetry_until = time.time()
        final_status = "finished"
        try:
            while n_done < record.trials_budget:
                if self._wait_while_paused():
                    final_status = "cancelled"
                    break
                round_start = time.monotonic()  # the round's wall time and its search's (RoundRecord)
                live = [
                    t
                    for t in tasks
                    if not t.exhausted and (record.early_stop is None or t.since_best < record.early_stop)
                ]
                if not live:
                    break
                task = min(live, key=lambda t: t.priority())
                want = min(record.batch, record.trials_budget - n_done)
                search_start = time.monotonic()
                batch = self._ask_valid(task, want)
                search_s = time.monotonic() - search_start
                if not batch:
                    task.exhausted = True
                    continue
                if task.measurer is None:
                    task.measurer = Measurer(
                        self.workload,
                        task.record.shape,
                        self.dtype,
                        self.target,
                        options,
                        seed=record.seed,
                        custom_source=record.custom_source,
                        vendor_ms=stored_vendor_ms(
                            self.store, self.workload.name, task.record.shape, self.dtype, self.target.kind
                        ),
                    )
                # This machine's load says nothing about a remote device's (its kernels run there).
                warning = None if options.remote else self._cool_down(sampler, options.cooldown_s)
                configs = [c for c, _ in batch]
                ranking_start = time.monotonic()  # the session's own predictions are the search's too
                features = task.space.features(configs)
                predicted = task.cost_model.predict(features) if task.cost_model.trained else None
                shadow = task.shadow_predict(features)  # {model: predictions}, before anything is measured
                search_s += time.monotonic() - ranking_start
                next_want = min(record.batch, record.trials_budget - n_done - len(batch))
                if overlap and not multi and next_want > 0:
                    task.tuner.prefetch(next_want)  # waited for (and timed as search) when told
                # Only the trials measured before a cancel come back: the rest were cut short.
                results = task.measurer.measure(
                    [sch for _, sch in batch], stop=self._cancel.is_set, best_ms=task.best
                )
                while task.measurer.lost_servers:  # said once per server lost
                    self._stage(
                        f"RPC server {task.measurer.lost_servers.pop(0)} was lost while it measured a "
                        "candidate; measured it again on another server"
                    )
                cut_short = len(results) < len(batch)
                trials = []
                best_before = task.best
                for i, (config, result) in enumerate(zip(configs[: len(results)], results, strict=True)):
                    trial = self.store.add_trial(
                        self.session_id,
                        NewTrial(
                            round=round_index,
                            config=config,
                            status=result.status,
                            error=result.error,
                            samples_ms=result.samples_ms,
                            predicted_ms=float(predicted[i]) if predicted is not None else None,
                            build_s=result.build_s,
                            run_s=result.run_s,
                            started_at=result.started_at,
                            finished_at=result.finished_at,
                            device=result.device,
                            shadow_predictions={m: float(p[i]) for m, p in shadow.items()} or None,
                        ),
                        task.key(config),
                        task_id=task.record.id,
                    )
                    stamp = sampler.summary_between(
                        trial.finished_at - (result.run_s or 0.0), trial.finished_at
                    )
                    if warning:
                        stamp["warning"] = warning
                    if result.device:  # this machine's readings, while a remote device ran the kernel
                        stamp["remote_device"] = result.device
                    self.store.stamp_trial(trial.id, stamp)
                    task.add(trial)
                    trials.append(trial)
                    n_done += 1
                    for callback in self.on_trial:
                        callback(trial)
                    yield trial
                if trials:
                    told_start = time.monotonic()
                    task.tell(trials, best_before)
                    search_s += time.monotonic() - told_start
                    rho = None
                    if predicted is not None:
                        pairs = [
                            (t.predicted_ms, t.latency_ms)
                            for t in trials
                            if t.ok and t.predicted_ms is not None
                        ]
                        rho = spearman([p for p, _ in pairs], [m for _, m in pairs]) if pairs else None
                    self.store.add_round(
                        self.session_id,
                        round_index,
                        len(trials),
                        rho,
                        task.best,
                        search_s=search_s,
                        wall_s=time.monotonic() - round_start,
                    )
                if task.measurer.disk_full:  # the machine's fault: the candidate it hit is measured on resume
                    from tunelab.core.faults import OutOfSpace

                    raise OutOfSpace(task.measurer.disk_full)
                if not cut_short:
                    # After a cut-short batch the state of the last whole batch stays: its tuner asked
                    # for configs that were never measured, and a resumed session asks for them again.
                    tuner_state = (
                        {str(t.record.index): _jsonable(t.tuner.state_dict()) for t in tasks}
                        if multi
                        else _jsonable(tasks[0].tuner.state_dict())
                    )
                    self.store.save_tuner_state(self.session_id, tuner_state)
                now = time.time()
                self.store.add_telemetry(self.session_id, sampler.samples_between(telemetry_until, now))
                telemetry_until = now
                self.store.heartbeat(self.session_id)
                round_index += 1
                failing = _fail_fast_reason(tasks, fail_fast, n_done - len(trials), n_done)
                if failing:
                    final_status = "failed"
                    self.store.set_status(self.session_id, "failed", error=failing)
                    self._stage(f"stopped: {failing}")
                    break
                if self._cancel.is_set() or cut_short:
                    final_status = "cancelled"
                    break
        except (GeneratorExit, KeyboardInterrupt):
            # The consumer stopped iterating (a GUI closing, Ctrl-C in the CLI): not a crash.
            final_status = "cancelled"
            raise
        except BaseException as exc:
            final_status = "crashed"
            self.crash = f"{type(exc).__name__}: {exc}"
            try:
                self.store.set_status(self.session_id, "crashed", error=self.crash)
            except StoreError:
                # The write lock that ended the session may still be held: the file then still says
                # running, which reads as crashed as soon as this process is gone.
                pass
            raise
        finally:
            try:
                if clock_lock is not None and clock_lock.locked:
                    clock_lock.release()
                    self._stage(clock_lock.message)
                sampler.stop()
                try:
                    self.store.add_telemetry(
                        self.session_id, sampler.samples_between(telemetry_until, time.time())
                    )
                except Exception:  # noqa: BLE001 - telemetry never decides a session's outcome
                    pass
                for task in tasks:
                    task.close()
                if final_status == "finished":
                    self._before_finish()
                if final_status not in ("crashed", "failed"):
                    self.store.set_status(self.session_id, final_status)
            finally:
                self.store.write_patience_s, self.store.on_lock_wait = saved_patience, saved_on_wait

    def _warm_start(self, record: SessionRecord, tasks: list[_Task]) -> None:
        """Start each task's cost models from earlier sessions' trials, when the tuner's ``warm_start``
        option asks for it (tunelab.core.session.warm_start); said as a stage, kept in the tuner state."""
        from tunelab.core.session.warm_start import (
            PRIOR_WEIGHT,
            load_prior,
            parse_warm_start,
            source_sessions,
        )

        choice = parse_warm_start(str(record.tuner_options.get("warm_start", "")))
        if choice is None:
            return
        sources = source_sessions(
            self.store,
            choice,
            workload=record.workload,
            dtype=record.dtype,
            space_kind=record.space_kind,
            target=record.target,
            exclude=record.id,
        )
        sources = [s for s in sources if s.id < record.id]  # earlier sessions: a later one is not "before"
        for task in tasks:
            n_features = task.space.features([task.space.point(0)]).shape[1]
            prior = load_prior(self.store, sources, n_features)
            self._stage(prior.sentence())
            if not prior.n or not hasattr(task.tuner, "use_prior"):
                continue
            gflop = task.record.flops / 1e9
            task.tuner.use_prior(  # the xgb tuner's (hasattr above)
                prior.X, prior.ms_per_gflop, gflop=gflop, weight=PRIOR_WEIGHT, sessions=prior.session_ids
            )
            task.cost_model.set_prior(prior.X, prior.ms_per_gflop, gflop=gflop, weight=PRIOR_WEIGHT)
            task.fit()

    def cancel_requested(self) -> bool:
        """True once cancel() was called (steps that run long, such as a confirmation, poll it)."""
        return self._cancel.is_set()

    def report_stage(self, text: str) -> None:
        """Tell the on_stage listeners what the session does besides trials, in words."""
        self._stage(text)

    def _stage(self, text: str) -> None:
        for callback in self.on_stage:
            callback(text)

    def _before_finish(self) -> None:
        """The steps a caller added to a session that finished (core.usecases.tuning adds the
        confirmation of its winners in fresh processes); none changes how the session ended."""
        for step in self.before_finish:
            try:
                step(self)
            except Cancelled:
                self._stage("confirmation stopped; the session's own figures stand")
            except Exception as exc:  # noqa: BLE001 - a failed step is reported, the tuned results are kept
                self._stage(
                    f"confirmation failed ({type(exc).__name__}: {exc}); the session's own figures stand"
                )

    def _cool_down(self, sampler: Any, limit_s: float) -> str | None:
        """Wait (up to `limit_s`) while the machine is hot or busy; the reason if it stays so."""
        # The sampler knows which other processes are busy only after two process scans (~1 s).
        settle = self._sampler_started + 1.2 - time.time()
        if limit_s > 0 and settle > 0:
            time.sleep(min(settle, limit_s))
        deadline = time.time() + limit_s
        while True:
            reason = busy_reason(sampler.latest())
            if reason is None or time.time() >= deadline or self._cancel.is_set():
                return reason
            time.sleep(0.25)

    def _wait_while_paused(self) -> bool:
        """Block while paused; True when cancelled."""
        if self._pause.is_set():
            self.store.set_status(self.session_id, "paused")
            beat = time.monotonic()
            while self._pause.is_set() and not self._cancel.is_set():
                time.sleep(0.05)
                if time.monotonic() - beat > PAUSED_HEARTBEAT_S:  # still its runner, seen from other hosts
                    self.store.heartbeat(self.session_id)
                    beat = time.monotonic()
            if not self._cancel.is_set():
                self.store.set_status(self.session_id, "running")
        return self._cancel.is_set()

    def _ask_valid(self, task: _Task, want: int) -> list[tuple[dict, Any]]:
        """Up to `want` new configs with their schedules. Configs the space cannot schedule are told
        to the tuner as failures and never measured."""
        batch: list[tuple[dict, Any]] = []
        keys: set[str] = set()
        empty_asks = 0
        while len(batch) < want and empty_asks < MAX_REJECTED_ASKS:
            proposals = task.tuner.ask(want - len(batch))
            if not proposals:
                break
            added = 0
            rejected = []
            for config in proposals:
                key = task.key(config)
                if key in task.measured or key in keys:
                    continue
                try:
                    schedule = task.space.schedule(config)
                except InvalidSchedule as exc:
                    self.rejected += 1
                    self.first_rejection = self.first_rejection or f"InvalidSchedule: {exc}"
                    rejected.append(Observation(config, None))
                    continue
                keys.add(key)
                batch.append((config, schedule))
                added += 1
            if rejected:
                task.tuner.tell(rejected)
            empty_asks = 0 if added else empty_asks + 1
        return batch


class _Task:
    """One shape of a session with its own space, tuner, cost model and measurement workers."""

    def __init__(
        self,
        record: Any,
        space: SearchSpace,
        history: list[TrialRecord],
        multi: bool,
        session: SessionRecord,
        tuner_state: dict[str, Any] | None,
    ) -> None:
        self.record = record
        self.space = space
        self.multi = multi
        self.tuner = make_tuner(
            session.tuner, space, seed=session.seed + record.index, **session.tuner_options
        )
        # The session's own model (its predictions are stored before measuring): the tuner's choice of
        # model where it has one, so the residuals shown are those of the model that steered.
        self.cost_model = make_cost_model(
            str(session.tuner_options.get("model", "xgb")), seed=session.seed, nthread=1, space=space
        )  # one thread: the CPU is busy measuring
        # Models that predict without steering (the session's shadow_models), refit with the own one.
        self.shadow_models = {
            name: make_cost_model(name, seed=session.seed, nthread=1, space=space)
            for name in session.shadow_models
        }
        self.measurer: Any = None
        self.exhausted = False
        self.history: list[TrialRecord] = []
        self.measured: set[str] = set()
        self.best: float | None = None
        self.since_best = 0
        self.last_gain = float("inf")  # untried tasks go first
        if tuner_state:
            self.tuner.load_state_dict(tuner_state)
        for trial in history:
            self.add(trial)
        if history:
            self.tuner.tell([Observation(t.config, t.latency_ms) for t in history])
            self.fit()
            self.last_gain = 0.0

    def key(self, config: dict) -> str:
        """Unique within the session: with several shapes the same config is a different trial."""
        return f"t{self.record.index}:{config_key(config)}" if self.multi else config_key(config)

    def add(self, trial: TrialRecord) -> None:
        self.history.append(trial)
        self.measured.add(self.key(trial.config))
        if trial.ok and trial.latency_ms is not None and (self.best is None or trial.latency_ms < self.best):
            self.best, self.since_best = trial.latency_ms, 0
        else:
            self.since_best += 1

    def tell(self, trials: list[TrialRecord], best_before: float | None) -> None:
        self.tuner.tell([Observation(t.config, t.latency_ms) for t in trials])
        self.fit()
        if best_before is None:
            self.last_gain = 1.0 if self.best is not None else 0.0
        elif self.best is not None:
            self.last_gain = (best_before - self.best) / best_before

    def priority(self) -> tuple[float, int]:
        return (-self.last_gain, len(self.history))

    def fit(self) -> None:
        """Refit the session's cost model (the one whose predictions are stored) and its shadow models on
        the task's trials, and on a warm start's earlier trials, from the first batch on."""
        ok = [t for t in self.history if t.ok and t.latency_ms]
        features = None
        for model in (self.cost_model, *self.shadow_models.values()):
            if len(ok) >= model.min_samples or (model.n_prior and ok):
                if features is None:
                    features = self.space.features([t.config for t in ok])
                model.fit(features, np.array([t.latency_ms for t in ok]))
            elif model.n_prior:
                model.fit(np.zeros((0, 0)), np.zeros(0))  # the prior alone

    def shadow_predict(self, features: np.ndarray) -> dict[str, np.ndarray]:
        """The trained shadow models' predictions of these candidates (ms), by model."""
        out = {}
        for name, model in self.shadow_models.items():
            predicted = model.predict(features) if model.trained else None
            if predicted is not None:
                out[name] = predicted
        return out

    def close(self) -> None:
        if self.measurer is not None:
            self.measurer.close()
        self.tuner.close()


GPU_HOT_C = 85.0


def busy_reason(sample: Any) -> str | None:
    """Why measuring now would be unfair (another busy process, throttling, a hot GPU), or None."""
    if sample is None:
        return None
    if sample.other_busy_procs:
        pids = ", ".join(str(p) for p in sample.other_busy_pids[:3])
        return f"measured while {sample.other_busy_procs} other process(es) were busy on the CPU (pid {pids})"
    if sample.other_gpu_procs:
        return f"measured while {sample.other_gpu_procs} other process(es) used the GPU"
    if sample.throttled:
        return f"measured while the GPU was throttled ({', '.join(sample.throttle_reasons)})"
    if sample.gpu_temp_c is not None and sample.gpu_temp_c >= GPU_HOT_C:
        return f"measured while the GPU was hot ({sample.gpu_temp_c:.0f} C)"
    return None


def _jsonable(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))

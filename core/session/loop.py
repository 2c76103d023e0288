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

import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from tunelab.core.errors import Cancelled, StoreError, TargetError
from tunelab.core.records import MeasureOptions, SessionRecord, SessionSpec, TrialRecord
from tunelab.core.search.space.factory import make_space, space_for_session, space_for_task
from tunelab.core.search.space.records import RECORDS_KIND, not_tunable
from tunelab.core.session.create import store_session
from tunelab.core.session.machine_load import GPU_HOT_C, busy_reason, cool_down
from tunelab.core.session.recording import new_trial, round_spearman, trial_stamp
from tunelab.core.session.scheduling import fail_fast_reason, next_task
from tunelab.core.session.spec_check import (
    SCHEDULABLE_PROBE_DRAWS,
    SCHEDULABLE_PROBE_S,
    CheckedSpec,
    check_measurable,
    check_schedulable,
    check_spec,
    extra_shapes,
    session_target,
)
from tunelab.core.session.task import TuningTask, tuner_state
from tunelab.core.store import Store, session_write_patience
from tunelab.core.target.info import TargetInfo, target_from_json
from tunelab.core.workloads.catalog import get_workload
from tunelab.core.workloads.shape_text import format_shape

# Names other packages import from here (their homes: spec_check, task, machine_load, the space factory).
__all__ = [
    "GPU_HOT_C",
    "PAUSED_HEARTBEAT_S",
    "SCHEDULABLE_PROBE_DRAWS",
    "SCHEDULABLE_PROBE_S",
    "CheckedSpec",
    "TuningSession",
    "busy_reason",
    "check_measurable",
    "check_schedulable",
    "check_spec",
    "create_session",
    "extra_shapes",
    "make_space",
    "search_overlaps_measuring",
    "session_target",
]

PAUSED_HEARTBEAT_S = 30.0  # a paused session still marks itself alive (tunelab.core.store.HEARTBEAT_STALE_S)


def search_overlaps_measuring(target: TargetInfo, options: MeasureOptions) -> bool:
    """Whether the next batch is proposed while this one is measured: where the kernels run on a GPU of
    this machine. There the search's threads do not share the device the kernels are timed on (on the
    H200 the search between rounds took 30-45 s of a 90 s session); on a CPU they would disturb every
    timing, and an RPC server's CPU may be this one."""
    return target.kind == "cuda" and not options.remote


def create_session(store: Store, spec: SessionSpec, *, validated: CheckedSpec | None = None) -> TuningSession:
    """Validate a spec, store a new session and return it ready to run. ``validated`` is what
    :func:`check_spec` already returned for this very spec (the CLI checks input before it opens
    the store), so the space is not built twice."""
    checked = validated if validated is not None else check_spec(spec)
    session_id = store_session(store, spec, checked)
    prepared = (checked.workload, checked.shape, checked.dtype, checked.target, checked.space)
    return TuningSession(store, session_id, _prepared=prepared)


@dataclass
class _Run:
    """One run() of a session: what it read from the store when it began, and where it stands now."""

    record: SessionRecord
    options: MeasureOptions
    tasks: list[TuningTask]
    round_index: int
    n_done: int
    saved_patience: tuple[Any, Any]  # the store's write patience and lock-wait listener, restored at the end
    overlap: bool = False  # the next batch is proposed while this one is measured
    sampler: Any = None  # tunelab.core.telemetry.sampler.TelemetrySampler
    clock_lock: Any = None
    telemetry_until: float = 0.0
    status: str = "finished"

    @property
    def multi(self) -> bool:
        return len(self.tasks) > 1

    @property
    def left(self) -> int:
        return self.record.trials_budget - self.n_done


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
        self.spent: list[str] = []  # why a task stopped before the budget: its tuner had no more to give
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

        Each round is the same steps: propose a batch, build (ready the measurer), run it, store
        its trials, learn from them; a session that finished is confirmed before it says so.
        """
        run = self._start()
        try:
            while run.n_done < run.record.trials_budget:
                if self._wait_while_paused():
                    run.status = "cancelled"
                    break
                round_start = time.monotonic()  # the round's wall time and its search's (RoundRecord)
                task = next_task(run.tasks, run.record.early_stop)
                if task is None:
                    break
                batch, search_s = self._propose(task, min(run.record.batch, run.left))
                if not batch:
                    task.exhausted = True
                    where = f" for {format_shape(task.record.shape)}" if run.multi else ""
                    self.spent.append(f"tuning stopped{where} after {len(task.history)} trials: {task.spent}")
                    self._stage(self.spent[-1])
                    continue
                warning = self._build(run, task)
                configs = [c for c, _ in batch]
                predicted, shadow, ranking_s = self._predict(task, configs)
                search_s += ranking_s
                results = self._run_batch(run, task, batch)
                best_before = task.best
                trials = yield from self._store(run, task, configs, results, predicted, shadow, warning)
                if trials:
                    search_s += self._learn(task, trials, best_before)
                    self._store_round(run, task, trials, predicted, search_s, round_start)
                if self._end_round(run, task, trials, cut_short=len(results) < len(batch)):
                    break
        except (GeneratorExit, KeyboardInterrupt):
            # The consumer stopped iterating (a GUI closing, Ctrl-C in the CLI): not a crash.
            run.status = "cancelled"
            raise
        except BaseException as exc:
            run.status = "crashed"
            self.crash = f"{type(exc).__name__}: {exc}"
            try:
                self.store.set_status(self.session_id, "crashed", error=self.crash)
            except StoreError:
                # The write lock that ended the session may still be held: the file then still says
                # running, which reads as crashed as soon as this process is gone.
                pass
            raise
        finally:
            self._finish(run)

    def _start(self) -> _Run:
        """Claim the session and rebuild its tasks from the store; start the telemetry (and lock the
        GPU's clocks when asked). Refused, with nothing written, when its kernels cannot run."""
        record = self.store.session(self.session_id)
        if not self.target.can_run and not MeasureOptions.from_json(record.measure).remote:
            raise TargetError(
                f"{self.target.description}: this machine cannot run kernels for the session's target"
                + (f" ({self.target.why_not})" if self.target.why_not else "")
            )
        check_measurable(self.target, MeasureOptions.from_json(record.measure))  # before the first batch
        saved = self.store.write_patience_s, self.store.on_lock_wait
        self.store.write_patience_s = session_write_patience()
        self.store.on_lock_wait = lambda limit: self._stage(
            f"the database is locked by another process; waiting up to {limit:g} s to write"
        )
        try:
            # One runner per session: refused (nothing written) while another live process runs it;
            # from here on this process owns it, so the history read below stays complete.
            self.store.claim_session(self.session_id)
        except BaseException:
            self.store.write_patience_s, self.store.on_lock_wait = saved
            raise
        self.crash = None
        run = self._load_tasks(record, saved)
        self._start_telemetry(run)
        return run

    def _load_tasks(self, record: SessionRecord, saved: tuple[Any, Any]) -> _Run:
        """The session's tasks with their trials so far and their tuners' state, warm-started."""
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
            own_state = state.get(str(task_record.index)) if multi else state
            tasks.append(TuningTask(task_record, space, mine, multi, record, own_state))
        for task in tasks:
            if hasattr(task.tuner, "report"):  # a tuner that says why it chose (ucb): on the stage line
                task.tuner.report = self._stage
        from tunelab.core.session.warm_start import warm_start_tasks

        warm_start_tasks(self.store, record, tasks, self._stage)
        rounds = self.store.rounds(self.session_id)
        round_index = (rounds[-1].round + 1) if rounds else (max((t.round for t in history), default=-1) + 1)
        overlap = search_overlaps_measuring(self.target, options)
        return _Run(record, options, tasks, round_index, len(history), saved, overlap)

    def _start_telemetry(self, run: _Run) -> None:
        """Start sampling the machine (and lock the GPU's clocks when the options ask for it)."""
        from tunelab.core.telemetry.sampler import TelemetrySampler

        # The sampler thread only reads the hardware; this thread writes its samples between
        # batches, so the session keeps a single writing connection.
        run.sampler = TelemetrySampler()
        run.sampler.start()
        if run.options.lock_clocks and self.target.kind == "cuda":
            from tunelab.core.telemetry.clock_lock import ClockLock

            run.clock_lock = ClockLock(0).__enter__()  # released by _finish, whatever ends the run
            self._stage(run.clock_lock.message)
        elif run.options.lock_clocks:
            self._stage(f"GPU clocks not locked: the target is {self.target.kind}, not a GPU")
        self._sampler_started = time.time()
        self.telemetry_status = run.sampler.gpu_status
        run.telemetry_until = time.time()

    def _propose(self, task: TuningTask, want: int) -> tuple[list[tuple[dict, Any]], float]:
        """Up to `want` new configs with their schedules, and the seconds the search took."""
        search_start = time.monotonic()
        batch = task.ask_valid(want, self._rejected)
        return batch, time.monotonic() - search_start

    def _rejected(self, why: str) -> None:
        self.rejected += 1
        self.first_rejection = self.first_rejection or why

    def _build(self, run: _Run, task: TuningTask) -> str | None:
        """Ready the task's measurer (it builds and runs the kernels) and wait for a quiet machine;
        the reason the machine is not quiet, if it stays so."""
        from tunelab.core.measure.runner import Measurer, Problem, stored_vendor_ms

        if task.measurer is None:
            task.measurer = Measurer(
                Problem(self.workload, task.record.shape, self.dtype, self.target),
                run.options,
                seed=run.record.seed,
                vendor_ms=stored_vendor_ms(
                    self.store, self.workload.name, task.record.shape, self.dtype, self.target.kind
                ),
            )
        # This machine's load says nothing about a remote device's (its kernels run there).
        if run.options.remote:
            return None
        return cool_down(run.sampler, run.options.cooldown_s, self._sampler_started, self._cancel.is_set)

    def _predict(self, task: TuningTask, configs: list[dict]) -> tuple[Any, dict[str, Any], float]:
        """The session's own model's predictions (None while untrained), the shadow models', and the
        seconds they took (the session's own predictions are the search's too)."""
        ranking_start = time.monotonic()
        features = task.space.features(configs)
        predicted = task.cost_model.predict(features) if task.cost_model.trained else None
        shadow = task.shadow_predict(features)  # {model: predictions}, before anything is measured
        return predicted, shadow, time.monotonic() - ranking_start

    def _run_batch(self, run: _Run, task: TuningTask, batch: list[tuple[dict, Any]]) -> list[Any]:
        """Measure the batch (proposing the next one meanwhile where that is fair); only the trials
        measured before a cancel come back: the rest were cut short."""
        next_want = min(run.record.batch, run.left - len(batch))
        if run.overlap and not run.multi and next_want > 0:
            task.tuner.prefetch(next_want)  # waited for (and timed as search) when told
        results = task.measurer.measure(
            [sch for _, sch in batch], stop=self._cancel.is_set, best_ms=task.best
        )
        while task.measurer.lost_servers:  # said once per server lost
            self._stage(
                f"RPC server {task.measurer.lost_servers.pop(0)} was lost while it measured a "
                "candidate; measured it again on another server"
            )
        return results

    def _store(
        self,
        run: _Run,
        task: TuningTask,
        configs: list[dict],
        results: list[Any],
        predicted: Any,
        shadow: dict[str, Any],
        warning: str | None,
    ) -> Generator[TrialRecord, None, list[TrialRecord]]:
        """Store each measured trial with the machine's state while it ran, and yield it."""
        trials = []
        for i, (config, result) in enumerate(zip(configs[: len(results)], results, strict=True)):
            measured = new_trial(run.round_index, config, result, i, predicted, shadow)
            trial = self.store.add_trial(self.session_id, measured, task.key(config), task_id=task.record.id)
            self.store.stamp_trial(trial.id, trial_stamp(run.sampler, trial, result, warning))
            task.add(trial)
            trials.append(trial)
            run.n_done += 1
            for callback in self.on_trial:
                callback(trial)
            yield trial
        return trials

    def _learn(self, task: TuningTask, trials: list[TrialRecord], best_before: float | None) -> float:
        """Tell the tuner and refit the cost models; the seconds it took (search time)."""
        told_start = time.monotonic()
        task.tell(trials, best_before)
        return time.monotonic() - told_start

    def _store_round(
        self,
        run: _Run,
        task: TuningTask,
        trials: list[TrialRecord],
        predicted: Any,
        search_s: float,
        round_start: float,
    ) -> None:
        """Record the round: its trials, how well the model ranked them, the best so far, its times."""
        self.store.add_round(
            self.session_id,
            run.round_index,
            len(trials),
            round_spearman(trials, predicted),
            task.best,
            search_s=search_s,
            wall_s=time.monotonic() - round_start,
        )

    def _end_round(self, run: _Run, task: TuningTask, trials: list[TrialRecord], cut_short: bool) -> bool:
        """Save the tuners' state and the telemetry, beat the heart; True when the session stops here
        (its first trials all failed alike, a cancel, a batch cut short)."""
        if task.measurer.disk_full:  # the machine's fault: the candidate it hit is measured on resume
            from tunelab.core.faults import OutOfSpace

            raise OutOfSpace(task.measurer.disk_full)
        if not cut_short:
            # After a cut-short batch the state of the last whole batch stays: its tuner asked
            # for configs that were never measured, and a resumed session asks for them again.
            self.store.save_tuner_state(self.session_id, tuner_state(run.tasks, run.multi))
        now = time.time()
        self.store.add_telemetry(self.session_id, run.sampler.samples_between(run.telemetry_until, now))
        run.telemetry_until = now
        self.store.heartbeat(self.session_id)
        run.round_index += 1
        # Fail fast: the first `fail_fast` trials of a session all failing the same way (every kernel
        # dies of SIGILL, every build fails) say the setup is wrong; the rest of the budget would
        # only repeat it. Checked once, when the n-th trial arrives in this run.
        failing = fail_fast_reason(run.tasks, run.options.fail_fast, run.n_done - len(trials), run.n_done)
        if failing:
            run.status = "failed"
            self.store.set_status(self.session_id, "failed", error=failing)
            self._stage(f"stopped: {failing}")
            return True
        if self._cancel.is_set() or cut_short:
            run.status = "cancelled"
            return True
        return False

    def _finish(self, run: _Run) -> None:
        """Release the clocks, store the last telemetry, close the tasks; confirm a finished session
        and say how it ended (a crash or a failure said so already); restore the store's patience."""
        try:
            if run.clock_lock is not None and run.clock_lock.locked:
                run.clock_lock.release()
                self._stage(run.clock_lock.message)
            run.sampler.stop()
            try:
                self.store.add_telemetry(
                    self.session_id, run.sampler.samples_between(run.telemetry_until, time.time())
                )
            except Exception:  # noqa: BLE001 - telemetry never decides a session's outcome
                pass
            for task in run.tasks:
                task.close()
            if run.status == "finished":
                self._confirm()
            if run.status not in ("crashed", "failed"):
                self.store.set_status(self.session_id, run.status)
        finally:
            self.store.write_patience_s, self.store.on_lock_wait = run.saved_patience

    def cancel_requested(self) -> bool:
        """True once cancel() was called (steps that run long, such as a confirmation, poll it)."""
        return self._cancel.is_set()

    def report_stage(self, text: str) -> None:
        """Tell the on_stage listeners what the session does besides trials, in words."""
        self._stage(text)

    def _stage(self, text: str) -> None:
        for callback in self.on_stage:
            callback(text)

    def _confirm(self) -> None:
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

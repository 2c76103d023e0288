"""A tuning session: ask -> predict -> build -> run -> store -> tell, as a generator of finished trials.

The store is the single source of truth: a session object holds its id, a store and the live
pieces (space, tuner, cost model, measurer), and rebuilds all of them from the store on resume,
so a resumed session measures nothing twice and its tuner continues from where it stopped.

Stopping is cooperative (Optuna's stop flag, superqt's abort_requested): `pause()`, `cancel()`,
the budget and early stopping are checked between batches and between trials; threads are
never killed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from core.costmodel import CostModel, spearman
from core.errors import SpaceError, TargetError, TunelabError
from core.records import MeasureOptions, NewTrial, SessionRecord, SessionSpec, TrialRecord
from core.space.base import SearchSpace, config_key
from core.space.tvm_context import InvalidSchedule
from core.store import Store
from core.target import TargetInfo, resolve_target, target_from_json
from core.tuners.base import Observation, Tuner
from core.tuners.registry import get_tuner_class, make_tuner, resolve_options
from core.workloads import get_workload

MAX_REJECTED_ASKS = 20  # ask rounds in a row that yield only invalid or known configs: the space is spent


def make_space(workload: Any, shape: dict[str, int], dtype: str, target: TargetInfo, kind: str,
               data: dict[str, Any] | None = None) -> SearchSpace:
    if kind == "template":
        from core.space.template import TemplateSpace

        return TemplateSpace(workload, shape, dtype, target, data)
    if kind == "auto":
        from core.space.auto import AutoSpace

        return AutoSpace(workload, shape, dtype, target, data)
    raise SpaceError(f"unknown space {kind!r}; choose template or auto")


def validate_spec(spec: SessionSpec) -> tuple[Any, dict[str, int], str, TargetInfo, SearchSpace]:
    """Check every part of a spec before anything is stored; bad input raises a TunelabError."""
    workload = get_workload(spec.workload, spec.custom_source)
    shape = workload.parse_shape(spec.shape)
    dtype = workload.check_dtype(spec.dtype)
    target = resolve_target(spec.target)
    if spec.trials < 1:
        raise TunelabError(f"--trials must be at least 1, not {spec.trials}")
    if spec.batch < 1:
        raise TunelabError(f"--batch must be at least 1, not {spec.batch}")
    if spec.early_stop is not None and spec.early_stop < 1:
        raise TunelabError(f"early stopping needs at least 1 trial, not {spec.early_stop}")
    m = spec.measure
    if (m.number < 1 or m.repeat < 1 or m.min_repeat_ms < 0 or m.warmup < 0 or m.timeout_s <= 0
            or m.target_cv < 0 or m.max_repeat < 1 or m.cooldown_s < 0):
        raise TunelabError("measurement options must be positive (number, repeat, max repeat >= 1; timeout > 0)")
    resolve_options(get_tuner_class(spec.tuner), spec.tuner_options)
    space = make_space(workload, shape, dtype, target, spec.space_kind, spec.space)
    if space.size < 1:
        raise SpaceError("the search space is empty")
    return workload, shape, dtype, target, space


def create_session(store: Store, spec: SessionSpec) -> TuningSession:
    """Validate a spec, store a new session and return it ready to run."""
    import tvm

    workload, shape, dtype, target, space = validate_spec(spec)
    if not target.can_run:
        raise TargetError(f"{target.description}: kernels for this target can be built here but not measured")
    spec = replace(spec, shape=shape, dtype=dtype, name=spec.name or f"{workload.name} {_shape_text(shape)}")
    session_id = store.create_session(spec, target_json=target.json, target_kind=target.kind,
                                      space_json=space.to_json(), tvm_version=tvm.__version__,
                                      flops=float(workload.flops(shape)))
    return TuningSession(store, session_id, _prepared=(workload, shape, dtype, target, space))


def _shape_text(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def space_for_session(record: SessionRecord) -> SearchSpace:
    """Rebuild the exact space a stored session tuned (for resume, export and views)."""
    workload = get_workload(record.workload, record.custom_source)
    target = target_from_json(record.target)
    data = record.space if record.space_kind == "template" else {k: v for k, v in record.space.items() if k != "sketches"}
    return make_space(workload, record.shape, record.dtype, target, record.space_kind, data)


class TuningSession:
    """Runs one stored session. Create with `create_session`, or `TuningSession(store, id)` to resume."""

    def __init__(self, store: Store, session_id: int, *, _prepared: tuple | None = None) -> None:
        self.store = store
        self.session_id = session_id
        record = store.session(session_id)
        if _prepared is None:
            workload = get_workload(record.workload, record.custom_source)
            target = target_from_json(record.target)
            space = space_for_session(record)
            _prepared = (workload, record.shape, record.dtype, target, space)
        self.workload, self.shape, self.dtype, self.target, self.space = _prepared
        self._pause = threading.Event()
        self._cancel = threading.Event()
        self.telemetry_status = ""
        self.rejected = 0  # configs the space could not turn into a legal schedule (never measured)
        self.on_trial: list[Callable[[TrialRecord], None]] = []

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
    def run(self) -> Iterator[TrialRecord]:
        """Tune until the budget is spent, the space is exhausted, early stopping or cancel."""
        record = self.store.session(self.session_id)
        if not self.target.can_run:
            raise TargetError(f"{self.target.description}: this machine cannot run kernels for the session's target")
        options = MeasureOptions.from_json(record.measure)
        tuner = make_tuner(record.tuner, self.space, seed=record.seed, **record.tuner_options)
        cost_model = CostModel(seed=record.seed, nthread=1)  # the CPU is busy measuring
        history = self.store.trials(self.session_id)
        state = self.store.tuner_state(self.session_id)
        if state:
            tuner.load_state_dict(state)
        if history:
            tuner.tell([Observation(t.config, t.latency_ms) for t in history])
            self._fit(cost_model, history)
        measured = {config_key(t.config) for t in history}
        rounds = self.store.rounds(self.session_id)
        round_index = (rounds[-1].round + 1) if rounds else (max((t.round for t in history), default=-1) + 1)
        best = min((t.latency_ms for t in history if t.ok and t.latency_ms), default=None)
        since_best = _trials_since_best(history)
        n_done = len(history)

        from core.measure import Measurer
        from core.telemetry import TelemetrySampler

        measurer = Measurer(self.workload, self.shape, self.dtype, self.target, options,
                            seed=record.seed, custom_source=record.custom_source)
        self.store.set_status(self.session_id, "running")
        # The sampler thread only reads the hardware; this thread writes its samples between
        # batches, so the session keeps a single writing connection.
        sampler = TelemetrySampler()
        sampler.start()
        self._sampler_started = time.time()
        self.telemetry_status = sampler.gpu_status
        telemetry_until = time.time()
        final_status = "finished"
        try:
            while n_done < record.trials_budget:
                if self._wait_while_paused():
                    final_status = "cancelled"
                    break
                if record.early_stop is not None and since_best >= record.early_stop:
                    break
                want = min(record.batch, record.trials_budget - n_done)
                batch = self._ask_valid(tuner, want, measured)
                if not batch:
                    break  # the space is exhausted
                warning = self._cool_down(sampler, options.cooldown_s)
                configs = [c for c, _ in batch]
                predicted = cost_model.predict(self.space.features(configs)) if cost_model.trained else None
                results = measurer.measure([s for _, s in batch])
                trials = []
                for i, (config, result) in enumerate(zip(configs, results, strict=True)):
                    trial = self.store.add_trial(self.session_id, NewTrial(
                        round=round_index, config=config, status=result.status, error=result.error,
                        samples_ms=result.samples_ms,
                        predicted_ms=float(predicted[i]) if predicted is not None else None,
                        build_s=result.build_s, run_s=result.run_s,
                        started_at=result.started_at, finished_at=result.finished_at), config_key(config))
                    stamp = sampler.summary_between(trial.finished_at - (result.run_s or 0.0), trial.finished_at)
                    if warning:
                        stamp["warning"] = warning
                    self.store.stamp_trial(trial.id, stamp)
                    measured.add(config_key(config))
                    trials.append(trial)
                    n_done += 1
                    if trial.ok and trial.latency_ms is not None and (best is None or trial.latency_ms < best):
                        best, since_best = trial.latency_ms, 0
                    else:
                        since_best += 1
                    for callback in self.on_trial:
                        callback(trial)
                    yield trial
                tuner.tell([Observation(t.config, t.latency_ms) for t in trials])
                history.extend(trials)
                self._fit(cost_model, history)
                rho = None
                if predicted is not None:
                    pairs = [(t.predicted_ms, t.latency_ms) for t in trials if t.ok and t.predicted_ms is not None]
                    rho = spearman([p for p, _ in pairs], [m for _, m in pairs]) if pairs else None
                self.store.add_round(self.session_id, round_index, len(trials), rho, best)
                self.store.save_tuner_state(self.session_id, _jsonable(tuner.state_dict()))
                now = time.time()
                self.store.add_telemetry(self.session_id, sampler.samples_between(telemetry_until, now))
                telemetry_until = now
                self.store.heartbeat(self.session_id)
                round_index += 1
                if self._cancel.is_set():
                    final_status = "cancelled"
                    break
        except GeneratorExit:
            # The consumer stopped iterating (a GUI closing, Ctrl-C in the CLI): not a crash.
            final_status = "cancelled"
            raise
        except BaseException as exc:
            final_status = "crashed"
            self.store.set_status(self.session_id, "crashed", error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            sampler.stop()
            try:
                self.store.add_telemetry(self.session_id, sampler.samples_between(telemetry_until, time.time()))
            except Exception:  # telemetry never decides a session's outcome
                pass
            measurer.close()
            tuner.close()
            if final_status != "crashed":
                self.store.set_status(self.session_id, final_status)

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
            while self._pause.is_set() and not self._cancel.is_set():
                time.sleep(0.05)
            if not self._cancel.is_set():
                self.store.set_status(self.session_id, "running")
        return self._cancel.is_set()

    def _ask_valid(self, tuner: Tuner, want: int, measured: set[str]) -> list[tuple[dict, Any]]:
        """Up to `want` new configs with their schedules. Configs the space cannot schedule are told
        to the tuner as failures and never measured."""
        batch: list[tuple[dict, Any]] = []
        keys: set[str] = set()
        empty_asks = 0
        while len(batch) < want and empty_asks < MAX_REJECTED_ASKS:
            proposals = tuner.ask(want - len(batch))
            if not proposals:
                break
            added = 0
            rejected = []
            for config in proposals:
                key = config_key(config)
                if key in measured or key in keys:
                    continue
                try:
                    schedule = self.space.schedule(config)
                except InvalidSchedule:
                    self.rejected += 1
                    rejected.append(Observation(config, None))
                    continue
                keys.add(key)
                batch.append((config, schedule))
                added += 1
            if rejected:
                tuner.tell(rejected)
            empty_asks = 0 if added else empty_asks + 1
        return batch

    def _fit(self, cost_model: CostModel, history: list[TrialRecord]) -> None:
        ok = [t for t in history if t.ok and t.latency_ms]
        if len(ok) >= cost_model.min_samples:
            cost_model.fit(self.space.features([t.config for t in ok]), np.array([t.latency_ms for t in ok]))


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


def _trials_since_best(history: list[TrialRecord]) -> int:
    best, since = None, 0
    for t in history:
        if t.ok and t.latency_ms is not None and (best is None or t.latency_ms < best):
            best, since = t.latency_ms, 0
        else:
            since += 1
    return since


def _jsonable(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))

"""Transfer learning: a session's cost model starts from the trials of earlier sessions in the store.

As AutoTVM's transfer learning and MetaSchedule's per-store cost model do: the schedule features
(tunelab.core.search.space: MetaSchedule's per-store features plus the knob vector) describe a
schedule independently of the shape it was measured at, so trials of GEMM 256^3 teach a model that
ranks candidates of GEMM 384x512x128. What differs between shapes is the amount of work, so every
earlier trial is learned as time per GFLOP (CostModel.set_prior), and weighs :data:`PRIOR_WEIGHT`
where the session's own trials weigh 1: once a session has measured, its own figures lead.

Which sessions: ``auto`` takes every earlier session of the same workload, dtype, space kind and
target (the resolved target JSON: another mcpu is another machine's figures); ``3,5`` names them
(each must match the same way). The session says which it used (a stage message, and the tuner's
state, which ``tunelab show`` prints).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord, SessionSpec, TaskRecord
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.space.factory import space_for_task
from tunelab.core.session.task import TuningTask
from tunelab.core.store import Store

PRIOR_WEIGHT = 0.3  # an earlier session's trial against one of the session's own
MAX_PRIOR_TRIALS = 2000  # the most recent ones: a fit stays milliseconds


@dataclass(frozen=True)
class Prior:
    X: np.ndarray  # feature rows, each computed in its own session's space
    ms_per_gflop: np.ndarray
    session_ids: tuple[int, ...]
    skipped: tuple[str, ...]  # sessions left out, with why

    @property
    def n(self) -> int:
        return len(self.ms_per_gflop)

    def sentence(self) -> str:
        if not self.n:
            return "warm start: no earlier trials to start the cost model from" + (
                f" ({'; '.join(self.skipped)})" if self.skipped else ""
            )
        ids = ", ".join(str(i) for i in self.session_ids)
        return f"warm start: the cost model starts from {self.n} trials of session(s) {ids}" + (
            f" (left out: {'; '.join(self.skipped)})" if self.skipped else ""
        )


def parse_warm_start(text: str) -> str | tuple[int, ...] | None:
    """``""`` -> None, ``auto`` -> "auto", ``3,5`` -> (3, 5); anything else raises naming it."""
    value = text.strip().lower()
    if not value:
        return None
    if value == "auto":
        return "auto"
    parts = [p.strip().removeprefix("#") for p in value.split(",")]
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise TunelabError(f"takes auto or session ids (3,5), not {text!r}", option="warm-start")
    return tuple(int(p) for p in parts)


def _mismatch(source: SessionRecord, workload: str, dtype: str, space_kind: str, target: dict) -> str | None:
    """Why ``source`` cannot teach this session's model, or None."""
    if source.workload != workload or source.workload == "custom":
        return f"another workload ({source.workload})"
    if source.dtype != dtype:
        return f"another dtype ({source.dtype})"
    if source.space_kind != space_kind:
        return f"a {source.space_kind} space"
    if source.target != target:
        return "another target"
    return None


def source_sessions(
    store: Store, choice: str | tuple[int, ...], *, workload: str, dtype: str, space_kind: str, target: dict,
    exclude: int | None = None,
) -> list[SessionRecord]:  # fmt: skip
    """The sessions a warm start learns from. Named ones that do not exist or do not match raise one
    TunelabError (before anything is stored); ``auto`` keeps the matching ones, oldest first."""
    if choice == "auto":
        return [
            s
            for s in store.sessions()
            if s.id != exclude
            and s.n_trials > s.n_failed
            and _mismatch(s, workload, dtype, space_kind, target) is None
        ]
    found = []
    for sid in choice if isinstance(choice, tuple) else ():
        try:
            source = store.session(sid)
        except Exception:  # noqa: BLE001 - the store says it in its own words; one line here
            raise TunelabError(f"there is no session {sid} in the store", option="warm-start") from None
        why = _mismatch(source, workload, dtype, space_kind, target)
        if why is not None:
            raise TunelabError(
                f"session {sid} cannot start this session's cost model: it tuned {why}",
                option="warm-start",
            )
        found.append(source)
    return found


def check_sources(
    store: Store, spec: SessionSpec, workload: Any, dtype: str, target: Any, space: Any
) -> None:
    """Named warm-start sessions that do not exist or tuned something else are refused now, before
    the session is stored (``auto`` takes whatever matches, possibly nothing)."""
    choice = parse_warm_start(str(spec.tuner_options.get("warm_start", "")))
    if isinstance(choice, tuple):
        source_sessions(
            store, choice, workload=workload.name, dtype=dtype, space_kind=space.kind, target=target.json
        )


def warm_start_tasks(
    store: Store, record: SessionRecord, tasks: list[TuningTask], stage: Callable[[str], None]
) -> None:
    """Start each task's cost models from earlier sessions' trials, when the tuner's ``warm_start``
    option asks for it; said as a stage, kept in the tuner state."""
    choice = parse_warm_start(str(record.tuner_options.get("warm_start", "")))
    if choice is None:
        return
    sources = source_sessions(
        store,
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
        prior = load_prior(store, sources, n_features)
        stage(prior.sentence())
        if not prior.n or not hasattr(task.tuner, "use_prior"):
            continue
        gflop = task.record.flops / 1e9
        task.tuner.use_prior(  # the xgb tuner's (hasattr above)
            prior.X, prior.ms_per_gflop, gflop=gflop, weight=PRIOR_WEIGHT, sessions=prior.session_ids
        )
        task.cost_model.set_prior(prior.X, prior.ms_per_gflop, gflop=gflop, weight=PRIOR_WEIGHT)
        task.fit()


def load_prior(store: Store, sources: list[SessionRecord], n_features: int) -> Prior:
    """The successful trials of ``sources`` as feature rows (``n_features`` wide, as this session's
    space makes them) and time per GFLOP, the most recent :data:`MAX_PRIOR_TRIALS`."""
    rows: list[np.ndarray] = []
    figures: list[float] = []
    used: list[int] = []
    skipped: list[str] = []
    for source in reversed(sources):  # newest first, so the cap keeps the most recent
        if len(figures) >= MAX_PRIOR_TRIALS:
            break
        tasks: list[TaskRecord | None] = [*store.tasks(source.id)] or [
            None
        ]  # None: a session from before tasks
        trials = [t for t in store.trials(source.id) if t.ok and t.latency_ms]
        n_before = len(figures)
        for task in tasks:
            mine = [t for t in trials if task is None or t.task_id in (task.id, None)]
            if not mine:
                continue
            space: SearchSpace = space_for_task(source, task) if task is not None else _primary(source)
            X = np.asarray(space.features([t.config for t in mine]), dtype=np.float64)
            if X.ndim != 2 or X.shape[1] != n_features:
                skipped.append(
                    f"session {source.id}: its features are {X.shape[-1]} wide, this space's {n_features}"
                )
                break
            gflop = (task.flops if task is not None else source.flops) / 1e9
            keep = min(len(mine), MAX_PRIOR_TRIALS - len(figures))
            rows.extend(X[-keep:])
            figures.extend(t.latency_ms / gflop for t in mine[-keep:])  # type: ignore[operator]
        if len(figures) > n_before:
            used.append(source.id)
    return Prior(
        np.stack(rows) if rows else np.zeros((0, n_features)),
        np.asarray(figures, dtype=np.float64),
        tuple(sorted(used)),
        tuple(skipped),
    )


def _primary(source: SessionRecord) -> SearchSpace:
    from tunelab.core.search.space.factory import space_for_session

    return space_for_session(source)

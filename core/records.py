"""Plain, frozen records that cross module boundaries (store -> views, session -> callers).

What the store returns is never changed by later writes (Optuna's rule): every record is frozen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A point in a search space: JSON-serialisable knob values.
#   template space: {"tile_i": [8], "order": 2, "unroll": 64, ...}
#   auto space:     {"sketch": 1, "decisions": [[4, 8, 16], 2, ...]}
Config = dict[str, Any]

SESSION_STATUSES = ("created", "running", "paused", "finished", "cancelled", "crashed")
TRIAL_STATUSES = ("ok", "build_error", "run_error", "timeout", "wrong_result", "invalid")


@dataclass(frozen=True)
class MeasureOptions:
    """How each candidate is measured (MetaSchedule EvaluatorConfig plus tunelab's own steps)."""

    number: int = 3  # runs averaged into one sample
    repeat: int = 3  # samples kept per trial
    min_repeat_ms: int = 20  # grow `number` until one sample takes at least this long
    warmup: int = 1  # untimed runs before timing (first-run allocation, lazy init)
    timeout_s: float = 30.0  # per build and per run
    cache_flush: bool = False  # flush CPU caches between samples
    check_correctness: bool = True  # compare each kernel's output with the NumPy reference
    # Hygiene: keep sampling (in steps of `repeat`) until the samples' coefficient of variation is
    # at most `target_cv`, up to `max_repeat` samples; wait up to `cooldown_s` before a batch while
    # the machine is hot or busy, and mark the trials when it stays so.
    target_cv: float = 0.05
    max_repeat: int = 12
    cooldown_s: float = 5.0
    # The winner's curse: the fastest of many noisy figures is biased low. A finished session
    # re-measures its `confirm_top` fastest trials in `confirm_runs` fresh processes (core.confirm)
    # and exports the confirmed figure; 0 turns it off.
    confirm_runs: int = 3
    confirm_top: int = 3

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MeasureOptions:
        known = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class SessionSpec:
    """Everything needed to start (or restart) a tuning session; what the GUI and CLI build."""

    workload: str
    shape: dict[str, int]
    dtype: str = "float32"
    target: str = "auto"  # "auto" | "llvm" | "cuda" | a JSON target dict as a string
    space_kind: str = "template"  # "template" | "auto"
    space: dict[str, Any] | None = None  # an edited space (JSON); None: the workload's default
    tuner: str = "xgb"
    tuner_options: dict[str, Any] = field(default_factory=dict)
    trials: int = 64
    batch: int = 8
    early_stop: int | None = None  # stop after this many trials without improvement
    seed: int = 0
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    name: str = ""
    custom_source: str | None = None  # text of a person's own TE expression file (workload "custom")
    shapes: tuple[dict[str, int], ...] = ()  # more shapes tuned in the same session (tasks), sharing the budget


@dataclass(frozen=True)
class SessionRecord:
    id: int
    name: str
    workload: str
    shape: dict[str, int]
    dtype: str
    target: dict[str, Any]  # the resolved TVM target JSON
    target_kind: str  # "llvm" | "cuda"
    space_kind: str
    space: dict[str, Any]  # the space as tuned (JSON)
    tuner: str
    tuner_options: dict[str, Any]
    measure: dict[str, Any]
    trials_budget: int
    batch: int
    early_stop: int | None
    seed: int
    status: str
    error: str | None
    created_at: float
    updated_at: float
    pid: int | None
    hostname: str | None
    tvm_version: str
    flops: float  # FLOP of one kernel call
    n_trials: int  # trials stored (ok + failed)
    n_failed: int
    best_ms: float | None
    best_trial_id: int | None
    custom_source: str | None = None

    @property
    def best_gflops(self) -> float | None:
        if self.best_ms is None or self.best_ms <= 0:
            return None
        return self.flops / (self.best_ms * 1e-3) / 1e9


@dataclass(frozen=True)
class TrialRecord:
    id: int
    session_id: int
    index: int  # 0-based order within the session
    round: int  # which batch it was measured in
    config: Config
    status: str  # one of TRIAL_STATUSES
    error: str | None
    latency_ms: float | None  # median of the samples; None when failed
    mean_ms: float | None
    std_ms: float | None
    min_ms: float | None
    max_ms: float | None
    predicted_ms: float | None  # the cost model's prediction made before measuring
    build_s: float | None
    run_s: float | None
    started_at: float
    finished_at: float
    trace_json: Any | None  # the MetaSchedule trace of the measured schedule (replayable)
    samples_ms: tuple[float, ...] = ()
    task_id: int | None = None  # which shape of the session (tasks) it was measured for

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class TaskRecord:
    """One shape a session tunes; several tasks share a session's budget."""

    id: int
    session_id: int
    index: int  # 0 = the session's primary shape
    workload: str
    shape: dict[str, int]
    dtype: str
    flops: float
    n_trials: int
    n_failed: int
    best_ms: float | None
    best_trial_id: int | None

    @property
    def best_gflops(self) -> float | None:
        if self.best_ms is None or self.best_ms <= 0:
            return None
        return self.flops / (self.best_ms * 1e-3) / 1e9


@dataclass(frozen=True)
class NewTrial:
    """What the session hands the store once a candidate is measured."""

    round: int
    config: Config
    status: str
    error: str | None
    samples_ms: tuple[float, ...]
    predicted_ms: float | None
    build_s: float | None
    run_s: float | None
    started_at: float
    finished_at: float
    trace_json: Any | None = None


@dataclass(frozen=True)
class RoundRecord:
    session_id: int
    round: int
    n: int
    spearman: float | None  # rank correlation predicted vs measured for this round's batch
    best_ms: float | None
    finished_at: float

"""Plain, frozen records that cross module boundaries (store -> views, session -> callers).

What the store returns is never changed by later writes (Optuna's rule): every record is frozen.
The session's spec (tunelab.core.records_spec) and the trust checks' records (tunelab.core.records_trust)
are kept beside it and importable from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from tunelab.core.records_json import JsonRecord

# The spec and the trust checks' records live beside this module; every name stays importable from here.
from tunelab.core.records_spec import (  # noqa: F401
    _MEASURE_RANGES,
    _MEASURE_TYPES,
    SPEC_DEFAULTS,
    MeasureOptions,
    SessionSpec,
    check_numbers,
)
from tunelab.core.records_trust import (  # noqa: F401
    BiasCounts,
    BiasGroup,
    BiasPoint,
    BiasReport,
    MachineProfile,
    VendorBaseline,
)

# A point in a search space: JSON-serialisable knob values.
#   template space: {"tile_i": [8], "order": 2, "unroll": 64, ...}
#   auto space:     {"sketch": 1, "decisions": [[4, 8, 16], 2, ...]}, and "parallel": [16] where
#                   MetaSchedule's MutateParallel changed the sketch's parallel-extent limit
Config = dict[str, Any]
AUTO_CONFIG_KEYS = frozenset({"sketch", "decisions", "parallel"})


def is_auto_config(config: Config) -> bool:
    """Whether ``config`` has an auto space's shape (a sketch, its decisions, maybe parallel limits)."""
    return {"sketch", "decisions"} <= set(config) <= AUTO_CONFIG_KEYS


def config_key(config: Config) -> str:
    """A canonical string for a config: equal configs give equal keys (used to never measure twice)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


# "failed": stopped by fail-fast (its first trials all failed alike); resumable once the cause is fixed.
SESSION_STATUSES = ("created", "running", "paused", "finished", "cancelled", "crashed", "failed")
TRIAL_STATUSES = ("ok", "build_error", "run_error", "timeout", "wrong_result", "invalid")


_Index = TypeVar("_Index")


def trial_number(index: _Index) -> _Index:
    """The number people know a trial by: its place in its session, counted from 1 (an int, or a
    NumPy column of them).

    The store keeps a 0-based ``index`` per session and a global ``id`` per file; every view, log line
    and CLI text shows this number as ``#N`` (the id only where a script needs it, as ``id N``)."""
    return index + 1  # type: ignore[operator,return-value]


def trial_label(number: int, session_id: int | None = None, trial_id: int | None = None) -> str:
    """``#N``, ``#N of session S`` or ``#N of session S (id I)``: one way to name a trial in text."""
    text = f"#{number}"
    if session_id is not None:
        text += f" of session {session_id}"
    if trial_id is not None:
        text += f" (id {trial_id})"
    return text


def gflops(flops: float, ms: float | None) -> float | None:
    """GFLOP/s of a kernel of ``flops`` FLOP that takes ``ms``; None without a time above 0."""
    if ms is None or ms <= 0:
        return None
    return flops / (ms * 1e-3) / 1e9


def figure_text(value: float | None, digits: int = 4) -> str:
    """A figure for people in ``digits`` significant digits (0.012345 -> "0.01235"); None -> "-"."""
    return "-" if value is None else f"{value:.{digits}g}"


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
    best_trial_number: int | None = None  # the best trial's number within the session, from 1
    shadow_models: tuple[str, ...] = ()  # cost models that predicted without steering

    @property
    def predicting_model(self) -> tuple[str, bool]:
        """(the cost model whose predictions the trials' ``predicted_ms`` hold, whether it steered the search):
        the xgb tuner's option ``model`` ranked its candidates; the other tuners' stored predictions come
        from an xgb model that steered nothing."""
        if self.tuner == "xgb":
            return str(self.tuner_options.get("model", "xgb")), True
        return "xgb", False

    @property
    def best_gflops(self) -> float | None:
        return gflops(self.flops, self.best_ms)


@dataclass(frozen=True)
class TrialRecord:
    id: int
    session_id: int
    index: int  # 0-based order within the session (people see `number`)
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
    # The first and third quartiles of the samples (tunelab.core.stats.quartiles); None for a trial
    # without samples. Last, with defaults, so that positional constructions keep their field order.
    q1_ms: float | None = None
    q3_ms: float | None = None
    device: str | None = None  # the RPC server that measured it ("HOST:PORT"); None: this machine

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def number(self) -> int:
        """The trial's number within its session, from 1 (what every view shows as ``#N``)."""
        return trial_number(self.index)

    @property
    def iqr_ms(self) -> float | None:
        """The interquartile range of the samples (q3 - q1: the spread of their middle half); None without."""
        if self.q1_ms is None or self.q3_ms is None:
            return None
        return self.q3_ms - self.q1_ms


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
    best_trial_number: int | None = None  # the best trial's number within the session, from 1

    @property
    def best_gflops(self) -> float | None:
        return gflops(self.flops, self.best_ms)


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
    device: str | None = None  # the RPC server that measured it ("HOST:PORT"); None: this machine
    shadow_predictions: dict[str, float] | None = None  # by shadow model: its prediction before measuring


@dataclass(frozen=True)
class RoundRecord:
    session_id: int
    round: int
    n: int
    spearman: float | None  # rank correlation predicted vs measured for this round's batch
    best_ms: float | None
    finished_at: float
    # Seconds the loop spent on the search for this round: asking the tuner for the batch (its
    # evolution, its cost model's features and ranking), scheduling the proposals, the session's own
    # predictions and, after measuring, telling the tuner and refitting its models. None: stored before
    # rounds were timed.
    search_s: float | None = None
    # The round's whole time, from asking for its batch to the record of its results (pauses left out).
    wall_s: float | None = None


@dataclass(frozen=True)
class SearchTime(JsonRecord):
    """How long a session's search took between its rounds (Store.search_time): the time the budget
    spent on proposing candidates and learning from them rather than on building and measuring them.

    Round 0 is apart (``first_s``): its population is sampled from nothing, and it has no model yet."""

    rounds: int  # rounds with a timing
    total_s: float  # the search's seconds over those rounds
    wall_s: float  # those rounds' whole seconds
    median_s: float  # per round
    max_s: float
    first_s: float | None  # round 0's search, when it was timed

    json_properties = {"share": "wall_s"}

    @property
    def share(self) -> float:
        """The search's share of the timed rounds' wall time, 0..1."""
        return self.total_s / self.wall_s if self.wall_s > 0 else 0.0

    @classmethod
    def of_rounds(cls, rounds: list[RoundRecord]) -> SearchTime | None:
        """The summary of ``rounds``' timings; None when none of them was timed."""
        timed = [r for r in rounds if r.search_s is not None and r.wall_s is not None]
        if not timed:
            return None
        seconds = sorted(float(r.search_s or 0.0) for r in timed)
        middle = len(seconds) // 2
        median = seconds[middle] if len(seconds) % 2 else (seconds[middle - 1] + seconds[middle]) / 2
        first = next((r.search_s for r in timed if r.round == 0), None)
        return cls(
            rounds=len(timed),
            total_s=sum(seconds),
            wall_s=sum(float(r.wall_s or 0.0) for r in timed),
            median_s=median,
            max_s=seconds[-1],
            first_s=first,
        )

    def words(self) -> str:
        """One line: "search 41.2 s, 37% of 111 s over 6 rounds (per round median 6.1 s, max 9.8 s;
        round 0 12.0 s)"."""
        first = f"; round 0 {self.first_s:.1f} s" if self.first_s is not None else ""
        return (
            f"search {self.total_s:.1f} s, {self.share:.0%} of {self.wall_s:.0f} s over {self.rounds} "
            f"round{'s' if self.rounds != 1 else ''} (per round median {self.median_s:.1f} s, "
            f"max {self.max_s:.1f} s{first})"
        )

"""Plain, frozen records that cross module boundaries (store -> views, session -> callers).

What the store returns is never changed by later writes (Optuna's rule): every record is frozen.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, TypeVar

from tunelab.core.errors import TunelabError

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
    # re-measures its `confirm_top` fastest trials in `confirm_runs` fresh processes (tunelab.core.trust.confirm)
    # and exports the confirmed figure; 0 turns it off. A confirmation taken while the machine was
    # busy or throttled, or whose processes disagree (their medians' CV above `target_cv`), is
    # measured again until it is not, for up to `confirm_max_s` seconds in all.
    confirm_runs: int = 3
    confirm_top: int = 3
    confirm_max_s: float = 120.0
    # Precision where it can change a decision: a candidate already `leader_band` times slower than the
    # task's best so far gets no adaptive repeats (more samples cannot make it the best), and one
    # whose warm-up and a single probe took twice the best is kept with that one sample. 0: time
    # every candidate fully. At GEMM 1024^3 most candidates are 2-20x slower than the leader, and
    # their full timing was most of a session's wall time.
    leader_band: float = 1.25
    # Stop the session (status "failed") when its first `fail_fast` trials all failed with the same
    # class (tunelab.core.faults.failure_class); 0 turns it off.
    fail_fast: int = 16
    # Where candidates run: "" here; "HOST:PORT" of a TVM RPC tracker, whose servers registered under
    # `rpc_key` measure them, `rpc_workers` candidates at once (tunelab.core.measure.remote).
    rpc_tracker: str = ""
    rpc_key: str = ""
    rpc_workers: int = 1
    # GPU: flush the L2 cache before each timed sample ("auto": where the problem's data fits in L2;
    # "on", "off"; tunelab.core.measure.l2_flush), and lock the SM and memory clocks through NVML for
    # the session (tunelab.core.telemetry.clock_lock; restored at its end).
    l2_flush: str = "auto"
    lock_clocks: bool = False

    @property
    def remote(self) -> bool:
        return bool(self.rpc_tracker)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MeasureOptions:
        known = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


# The numbers a session takes, as (field, the command line's option, what it is, lowest, highest): a
# value outside is bad input named by its option. The upper bounds keep every number inside what the
# store (SQLite's 64-bit integers), NumPy's seed (32 bits) and TVM's evaluator (32-bit ints) hold;
# none is a value a person tunes with.
_Range = tuple[str, str, str, float, float]
_MEASURE_RANGES: tuple[_Range, ...] = (
    ("number", "number", "the runs per sample", 1, 1_000_000),
    ("repeat", "repeat", "the samples per trial", 1, 10_000),
    ("min_repeat_ms", "min-repeat-ms", "the shortest sample (ms)", 0, 3_600_000),
    ("warmup", "warmup", "the untimed runs", 0, 10_000),
    ("timeout_s", "timeout", "the timeout (s)", 1e-3, 86_400),
    ("target_cv", "target-cv", "the target spread (CV)", 0, 100),
    ("max_repeat", "max-repeat", "the cap on samples per trial", 1, 10_000),
    ("cooldown_s", "cooldown", "the cool-down (s)", 0, 86_400),
    ("confirm_runs", "confirm-runs", "the confirmation's fresh processes", 0, 32),
    ("confirm_top", "confirm-top", "the schedules confirmed", 0, 32),
    ("confirm_max_s", "confirm-max-s", "the confirmation's time cap (s)", 0, 86_400),
    ("fail_fast", "fail-fast", "fail-fast", 0, 1_000_000),
    ("rpc_workers", "rpc-workers", "the candidates in flight on the servers", 1, 256),
)
_SPEC_RANGES: tuple[_Range, ...] = (
    ("trials", "trials", "the trial budget", 1, 1_000_000),
    ("batch", "batch", "the batch size", 1, 4096),
    ("early_stop", "early-stop", "early stopping", 1, 1_000_000),
    ("seed", "seed", "the seed", 0, 2**32 - 1),
)


def _check_range(value: Any, option: str, what: str, low: float, high: float) -> None:
    """A finite number in [low, high], or a TunelabError naming ``option`` (NaN and infinity too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TunelabError(f"{what} must be a number, not {_type_name(value)}", option=option)
    if math.isfinite(value) and low <= value <= high:
        return
    text = str(value) if len(str(value)) <= 24 else f"{value:.3g}"
    if math.isfinite(value) and value < low:
        raise TunelabError(f"{what} must be at least {_bound(low)}, not {text}", option=option)
    raise TunelabError(f"{what} must be {_bound(low)}..{_bound(high)}, not {text}", option=option)


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def check_numbers(spec: SessionSpec) -> None:
    """Every number of a spec and of its measurement options in range, an out-of-range one named by its
    option ("--cooldown: the cool-down (s) must be at least 0, not -1"), before anything is built or
    stored; the rest of a spec is check_spec's (tunelab.core.session.loop)."""
    for name, option, what, low, high in _SPEC_RANGES:
        value = getattr(spec, name)
        if value is not None:
            _check_range(value, option, what, low, high)
    for name, option, what, low, high in _MEASURE_RANGES:
        _check_range(getattr(spec.measure, name), option, what, low, high)


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
    shapes: tuple[
        dict[str, int], ...
    ] = ()  # more shapes tuned in the same session (tasks), sharing the budget
    # Cost models (tunelab.core.search.models) that predict every candidate before it is measured
    # without steering the search: their predictions are stored beside the session's own model's.
    shadow_models: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The spec as plain JSON values (what `tunelab tune --spec FILE` reads); `from_json` gives it back."""
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        data["measure"] = self.measure.to_json()
        data["shapes"] = [copy.deepcopy(s) for s in self.shapes]
        data["shadow_models"] = list(self.shadow_models)
        return data

    @classmethod
    def from_json(cls, data: Any) -> SessionSpec:
        """The spec `to_json` wrote. Unlike `MeasureOptions.from_json` (lenient: it reads stored rows
        of older versions) this is strict: an unknown key or a value of the wrong type raises a
        TunelabError naming it. A shape may also be written as the CLI takes it ("M=64,N=64" or a
        preset name; null: the workload's defaults)."""
        _check_keys(data, cls, "session spec", required=("workload", "shape"))
        values: dict[str, Any] = {}
        for name, value in data.items():
            where = f"session spec: {name!r}"
            if name == "measure":
                _check_keys(value, MeasureOptions, "session spec: 'measure'")
                values[name] = MeasureOptions(
                    **{
                        k: _checked(f"session spec: 'measure.{k}'", v, _MEASURE_TYPES[k])
                        for k, v in value.items()
                    }
                )
            elif name == "shadow_models":
                if not isinstance(value, list | tuple) or not all(isinstance(m, str) for m in value):
                    raise TunelabError(f"{where} must be a list of cost model names")
                values[name] = tuple(value)
            elif name == "shapes":
                if not isinstance(value, list | tuple):
                    raise TunelabError(f"{where} must be a list of shapes, not {_type_name(value)}")
                values[name] = tuple(_checked(f"{where}[{i}]", s, "shape_item") for i, s in enumerate(value))
            else:
                values[name] = _checked(where, value, _SPEC_TYPES[name])
        return cls(**values)


# The defaults of a session's plain options, written once: the command line's parser and the New-session
# dialog show these (an option with a factory default, such as `measure`, is not listed).
SPEC_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(SessionSpec) if f.default is not MISSING}


# The JSON types of SessionSpec's and MeasureOptions' fields, for `SessionSpec.from_json`.
_SPEC_TYPES = {
    "workload": "str",
    "shape": "shape",
    "dtype": "str",
    "target": "str",
    "space_kind": "str",
    "space": "dict?",
    "tuner": "str",
    "tuner_options": "dict",
    "trials": "int",
    "batch": "int",
    "early_stop": "int?",
    "seed": "int",
    "name": "str",
    "custom_source": "str?",
}
_MEASURE_TYPES = {
    "number": "int",
    "repeat": "int",
    "min_repeat_ms": "int",
    "warmup": "int",
    "timeout_s": "float",
    "cache_flush": "bool",
    "check_correctness": "bool",
    "target_cv": "float",
    "max_repeat": "int",
    "cooldown_s": "float",
    "confirm_runs": "int",
    "confirm_top": "int",
    "confirm_max_s": "float",
    "leader_band": "float",
    "fail_fast": "int",
    "rpc_tracker": "str",
    "rpc_key": "str",
    "rpc_workers": "int",
    "l2_flush": "str",
    "lock_clocks": "bool",
}
_TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "dict": "an object",
    "shape": 'an object of integers, a "K=V,..." string or null',
    "shape_item": 'an object of integers or a "K=V,..." string',
}


def _type_name(value: Any) -> str:
    return {
        type(None): "null",
        bool: "true/false",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        tuple: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _check_keys(data: Any, cls: type, where: str, required: tuple[str, ...] = ()) -> None:
    if not isinstance(data, dict):
        raise TunelabError(f"{where} must be a JSON object, not {_type_name(data)}")
    known = [f.name for f in fields(cls)]
    unknown = [k for k in data if k not in known]
    if unknown:
        raise TunelabError(
            f"{where} has unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)} (known: {', '.join(known)})"
        )
    missing = [k for k in required if k not in data]
    if missing:
        raise TunelabError(f"{where} lacks {', '.join(repr(k) for k in missing)}")


def _checked(where: str, value: Any, kind: str) -> Any:
    """`value` if it is of `kind` (a float field takes an integer too, as a float); else a TunelabError."""
    optional = kind.endswith("?")
    kind = kind.rstrip("?")
    ok: bool
    if value is None:
        ok = optional or kind == "shape"
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "dict":
        ok = isinstance(value, dict) and all(isinstance(k, str) for k in value)
    else:  # a shape
        ok = isinstance(value, str) or (
            isinstance(value, dict)
            and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                for k, v in value.items()
            )
        )
    if not ok:
        wanted = _TYPE_WORDS[kind] + (" or null" if optional else "")
        raise TunelabError(f"{where} must be {wanted}, not {_type_name(value)}")
    try:
        return copy.deepcopy(value)
    except RecursionError:  # what json.load still reads is deeper than deepcopy can go
        raise TunelabError(f"{where} is nested too deeply") from None


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
        if self.best_ms is None or self.best_ms <= 0:
            return None
        return self.flops / (self.best_ms * 1e-3) / 1e9


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
class SearchTime:
    """How long a session's search took between its rounds (Store.search_time): the time the budget
    spent on proposing candidates and learning from them rather than on building and measuring them.

    Round 0 is apart (``first_s``): its population is sampled from nothing, and it has no model yet."""

    rounds: int  # rounds with a timing
    total_s: float  # the search's seconds over those rounds
    wall_s: float  # those rounds' whole seconds
    median_s: float  # per round
    max_s: float
    first_s: float | None  # round 0's search, when it was timed

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

    def to_json(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "total_s": self.total_s,
            "wall_s": self.wall_s,
            "share": self.share,
            "median_s": self.median_s,
            "max_s": self.max_s,
            "first_s": self.first_s,
        }


@dataclass(frozen=True)
class MachineProfile:
    """This machine's roofline for one target kind (tunelab.core.trust.roofline): the peak FLOP/s per dtype
    and the memory bandwidth, as the store keeps it (table ``machine_profile``)."""

    target_kind: str
    hostname: str
    peak_gflops: dict[str, float]  # dtype -> GFLOP/s
    bandwidth_gbs: float  # 10^9 bytes/s
    detail: dict[
        str, Any
    ]  # what was probed and how: BLAS, kernel, probe sizes (CPU) or library, device (GPU)
    version: int  # tunelab.core.trust.roofline.PROFILE_VERSION when it was measured
    elapsed_s: float  # the probes' time
    measured_at: float
    # Set by a look-up (tunelab.core.trust.roofline.machine_profile): True when it came from the store.
    # None on a profile as measured, which is what the store keeps.
    cached: bool | None = None

    @property
    def kernel(self) -> str | None:
        """The BLAS and its kernel (CPU) or the library (GPU) the peak was measured with."""
        return self.detail.get("kernel") or self.detail.get("library")

    def to_json(self) -> dict[str, Any]:
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        if self.cached is None:
            del data["cached"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MachineProfile:
        """The profile `to_json` wrote (a stored one, or one with ``cached``)."""
        return cls(**{f.name: copy.deepcopy(data[f.name]) for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class VendorBaseline:
    """One problem (workload, shape, dtype, target kind) through the vendor library
    (tunelab.core.trust.baselines), as the store keeps it (table ``vendor_baselines``)."""

    workload: str
    shape: dict[str, int]
    dtype: str
    target_kind: str
    library: str  # "NumPy + openblas 0.3.31 (Haswell kernel, 2 threads)", "PyTorch 2.5 (cuBLAS)"
    method: str  # "np.matmul", "im2col + np.matmul", "conv2d", ...
    median_ms: float
    samples_ms: tuple[float, ...]
    gflops: float | None
    correct: bool  # the output matched the workload's NumPy reference
    max_abs_err: float
    measure: dict[str, Any]  # number, repeat, min_repeat_ms, warmup, settle_s (the pause before timing)
    measured_at: float
    blas: dict[str, Any] | None  # NumPy's BLAS as threadpoolctl names it (CPU); None on a GPU
    # The machine it was measured on, named once stored (the store keys baselines by it); a
    # measurement not stored yet names none and its JSON has no "hostname".
    hostname: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        data["samples_ms"] = list(self.samples_ms)
        if self.hostname is None:
            del data["hostname"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VendorBaseline:
        """The baseline `to_json` wrote (a stored one names its ``hostname``); other keys (the session's
        side of a :class:`tunelab.core.trust.baselines.VendorComparison`) are left out."""
        values = {f.name: copy.deepcopy(data[f.name]) for f in fields(cls) if f.name in data}
        values["samples_ms"] = tuple(values["samples_ms"])
        return cls(**values)


# trial id -> (session id, measured ms, predicted ms, shape label): a trial in the desktop app's bias plots
BiasPoint = tuple[int, float, float, str]


@dataclass(frozen=True)
class BiasGroup:
    """One group of a report: a shape, a knob value, a tile size bucket, a sketch, or every trial."""

    dimension: str  # "all" | "shape" | "knob" | "tile" | "sketch"
    key: str
    label: str
    n: int
    residual_mean: float | None
    residual_std: float | None
    ratio: float | None
    direction: str | None
    spearman: float | None
    topk_recall: float | None
    k: int
    biased: bool
    ranks_poorly: bool
    flagged: bool
    words: str  # what is wrong, in words ("" when not flagged)
    trial_ids: tuple[int | None, ...]
    same_as: str | None  # the label of an earlier group holding exactly the same trials

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["trial_ids"] = list(self.trial_ids)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BiasGroup:
        values = {f.name: data[f.name] for f in fields(cls)}
        values["trial_ids"] = tuple(values["trial_ids"])
        return cls(**values)


@dataclass(frozen=True)
class BiasCounts:
    """The trials of a report's sessions: all of them, and which could not be judged."""

    trials: int = 0
    failed: int = 0  # not ok, or no latency
    no_prediction: int = 0  # measured before the model could predict
    predicted: int = 0  # the ones judged


@dataclass(frozen=True)
class BiasReport:
    """The cost-model bias of one or more sessions (tunelab.core.trust.bias: ``bias_report``); here, not
    there, so the desktop app reads it without loading the engine (TVM)."""

    session_ids: tuple[int, ...]
    counts: BiasCounts
    n: int  # trials judged
    k: int
    groups: tuple[BiasGroup, ...]
    flagged: tuple[str, ...]  # labels of the flagged groups
    thresholds: dict[str, float]
    summary: str
    points: dict[int, BiasPoint] | None = None  # only by task (``bias_report_by_task``)
    model: str | None = None  # the cost model judged, when asked for one; None: the stored predictions

    def to_json(self) -> dict[str, Any]:
        """As ``tunelab bias --json`` prints it: with ``points`` (``--by-task``) the figures come first and the
        trial ids are the keys of ``points`` (strings once in JSON)."""
        head = {"session_ids": list(self.session_ids), "counts": asdict(self.counts)}
        if self.model is not None:
            head["model"] = self.model
        body = {
            "n": self.n,
            "k": self.k,
            "groups": [g.to_json() for g in self.groups],
            "flagged": list(self.flagged),
            "thresholds": dict(self.thresholds),
            "summary": self.summary,
        }
        if self.points is None:
            return {**head, **body}
        # the key order `tunelab bias --by-task --json` has always had
        return {**body, **head, "points": {t: list(p) for t, p in self.points.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BiasReport:
        points = data.get("points")
        return cls(
            session_ids=tuple(data["session_ids"]),
            counts=BiasCounts(**data["counts"]),
            n=data["n"],
            k=data["k"],
            groups=tuple(BiasGroup.from_json(g) for g in data["groups"]),
            flagged=tuple(data["flagged"]),
            thresholds=dict(data["thresholds"]),
            summary=data["summary"],
            points=None if points is None else {int(t): tuple(p) for t, p in points.items()},
            model=data.get("model"),
        )

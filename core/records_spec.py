"""A tuning session's spec and measurement options: fields, defaults, number ranges, strict JSON reading."""

from __future__ import annotations

import copy
import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from tunelab.core.errors import TunelabError


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

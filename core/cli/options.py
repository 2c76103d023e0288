"""The `tunelab` command line as one table: every command, its options, their defaults and help.

`tunelab.core.cli.parser` builds argparse from it. An option two commands share is written once here;
the defaults of a session's options are the records' own (`SPEC_DEFAULTS`, `MeasureOptions`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tunelab.core.records import SPEC_DEFAULTS as _SPEC
from tunelab.core.records import MeasureOptions

_MEASURE = MeasureOptions()  # the defaults of the measurement options live in the record


@dataclass(frozen=True)
class Option:
    """One argument: its flags (or a positional's name) and argparse's keywords for it."""

    flags: tuple[str, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)


def option(*flags: str, **settings: Any) -> Option:
    return Option(flags, settings)


@dataclass(frozen=True)
class OneOf:
    """Options of which a command takes at most one (argparse's mutually exclusive group)."""

    options: tuple[Option, ...]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    options: tuple[Option | OneOf, ...]


def trial_number_arg(text: str) -> int:
    """``--trial``: a trial's number within its session as tunelab prints it, ``54`` or ``#54``."""
    digits = text.strip().removeprefix("#")
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a trial number (1, 2, ... or #1, #2, ...)")
    return int(digits)


JSON = option("--json", action="store_true")
DB = option("--db", help="SQLite store (default: $TUNELAB_DB or the user data folder)")
EVENTS = option(
    "--events-fd",
    type=int,
    default=None,
    metavar="N",
    help="also report progress as JSON lines on file descriptor N, for a controlling process "
    "(tunelab.core.cli.protocol)",
)
SESSION = option("session", type=int)
SESSIONS = option("sessions", type=int, nargs="+")
WORKLOAD = option("workload", nargs="?", help="a name from `tunelab workloads`, or custom with --custom FILE")
DTYPE = option("--dtype", default=None)
SPACE = option("--space", default="template", help="template | auto")
SPACE_FILE = option("--space-file", help="an edited search space (JSON), as the GUI's editor saves it")
SHAPES = option(
    "--shapes", default=None, help="also carry the best schedule to these shapes, e.g. M=16,32,64"
)
# validate and jitter: what to re-measure, and whether a schedule file's own workload code may run.
SCHEDULE_SOURCE = option(
    "source", metavar="SESSION|SCHEDULE_FILE", help="a session id or an exported *.schedule.json"
)
TRUST_CUSTOM = option(
    "--trust-custom",
    action="store_true",
    help="run the workload code a schedule file carries (custom_source); without it such a "
    "file is refused, since its code would run in this process",
)

# How a session measures (MeasureOptions): tune's options, and a resumed session's (which it refuses).
MEASURE_OPTIONS: tuple[Option, ...] = (
    option("--number", type=int, default=_MEASURE.number, help="runs averaged into one sample"),
    option("--repeat", type=int, default=_MEASURE.repeat, help="samples kept per trial"),
    option("--min-repeat-ms", type=int, default=_MEASURE.min_repeat_ms),
    option("--warmup", type=int, default=_MEASURE.warmup),
    option("--timeout", type=float, default=_MEASURE.timeout_s, help="seconds per build and per run"),
    option("--cache-flush", action="store_true", help="flush CPU caches between samples"),
    option(
        "--l2-flush",
        default=_MEASURE.l2_flush,
        choices=("auto", "on", "off"),
        help="GPU: flush the L2 cache before each timed sample (auto: where the data fits in L2)",
    ),
    option(
        "--lock-clocks",
        action="store_true",
        help="GPU: lock the SM and memory clocks through NVML for the session (needs root; reset after)",
    ),
    option("--no-check", action="store_true", help="skip the NumPy correctness check"),
    option(
        "--target-cv",
        type=float,
        default=_MEASURE.target_cv,
        help="sample on until the spread (CV) is this small",
    ),
    option("--max-repeat", type=int, default=_MEASURE.max_repeat, help="cap on samples per trial"),
    option(
        "--leader-band",
        type=float,
        default=_MEASURE.leader_band,
        metavar="FACTOR",
        help="no repeats for candidates this many times slower than the best so far "
        f"(default {_MEASURE.leader_band}; 0: time every candidate fully)",
    ),
    option(
        "--cooldown",
        type=float,
        default=_MEASURE.cooldown_s,
        help="seconds to wait while the machine is hot or busy",
    ),
    option(
        "--confirm-runs",
        type=int,
        default=_MEASURE.confirm_runs,
        metavar="N",
        help="when finished, re-measure the fastest trials in N fresh processes (0: off); with --rpc, "
        "in N fresh sessions on the servers under the key",
    ),
    option(
        "--confirm-top",
        type=int,
        default=_MEASURE.confirm_top,
        metavar="K",
        help="how many of the fastest to confirm",
    ),
    option(
        "--confirm-max-s",
        type=float,
        default=_MEASURE.confirm_max_s,
        metavar="SECONDS",
        help="measure the confirmation again while the machine is busy or its processes disagree, "
        f"for up to this long in all (default {_MEASURE.confirm_max_s:g}; 0: one attempt)",
    ),
    option(
        "--fail-fast",
        type=int,
        default=_MEASURE.fail_fast,
        metavar="N",
        help="stop (status failed, exit 1) when the first N trials all fail the same way (0: off)",
    ),
    option(
        "--rpc",
        default=None,
        metavar="HOST:PORT",
        help="measure on the servers of this TVM RPC tracker (with --rpc-key: also TVM_TRACKER_HOST "
        "and TVM_TRACKER_PORT), and confirm the winners there; kernels are built here",
    ),
    option("--rpc-key", default=_MEASURE.rpc_key, metavar="KEY", help="the key the servers registered under"),
    option(
        "--rpc-workers",
        type=int,
        default=_MEASURE.rpc_workers,
        metavar="N",
        help="candidates measured at once on the servers",
    ),
)

TUNE = Command(
    "tune",
    "run a tuning session",
    (
        WORKLOAD,
        option(
            "--shape",
            default=None,
            help="K=V,... naming every parameter, or a preset (without --shape: the workload's default "
            "shape); several shapes separated by ';' are tuned together as tasks sharing the budget",
        ),
        DTYPE,
        option(
            "--target",
            default="auto",
            help="auto | llvm | cuda | a JSON target dict (another mtriple: cross-compiled) | remote: with "
            "--rpc, the CPU of a server under the key",
        ),
        SPACE,
        SPACE_FILE,
        option("--tuner", default=None, help="a name from `tunelab tuners` (default: recommended)"),
        option("--tuner-option", action="append", default=[], metavar="K=V", help="e.g. pop_size=16"),
        option(
            "--cost-model",
            default=None,
            metavar="NAME",
            help="the model that ranks candidates: xgb | mlp | roofline | hybrid "
            "(the xgb tuner's; --tuner-option model=...)",
        ),
        option(
            "--shadow-models",
            default="",
            metavar="NAME,...",
            help="cost models that also predict every candidate before it is measured, without steering "
            "(their predictions are stored; tunelab models compares them)",
        ),
        option(
            "--warm-start",
            default=None,
            metavar="auto|SID,...",
            help="start the xgb tuner's cost model from earlier sessions of this workload, target and "
            "space (auto: all of them; or their ids); the same as --tuner-option warm_start=...",
        ),
        option("--trials", type=int, default=_SPEC["trials"]),
        option("--batch", type=int, default=_SPEC["batch"]),
        option("--early-stop", type=int, default=None, help="stop after N trials without improvement"),
        option("--seed", type=int, default=_SPEC["seed"]),
        *MEASURE_OPTIONS,
        option("--custom", help="a Python file with a TE compute (workload custom)"),
        option("--name", default=""),
        option("--resume", type=int, default=None, metavar="SESSION", help="continue a stored session"),
        option(
            "--spec",
            metavar="FILE",
            help="a whole session as JSON (SessionSpec.to_json, what the desktop app writes) instead of "
            "the workload and the options above",
        ),
        JSON,
        DB,
        EVENTS,
    ),
)

_INSPECTION = (
    Command("gui", "launch the desktop app", (DB,)),
    Command("workloads", "the catalog of operators with their parameters", (JSON,)),
    Command("tuners", "the search strategies: what each does, its spaces, whether it loads here", (JSON,)),
    TUNE,
    Command("sessions", "list stored sessions", (JSON, DB)),
    Command(
        "show",
        "one session: summary, best trial, rounds",
        (SESSION, option("--trials", action="store_true", help="include every trial"), JSON, DB),
    ),
    Command("compare", "sessions side by side", (SESSIONS, JSON, DB)),
)

_BIAS = Command(
    "bias",
    "where the cost model is wrong: residuals per shape, knob region and sketch",
    (
        SESSIONS,
        option("--top-k", type=int, default=5),
        option(
            "--model",
            default=None,
            help="judge this cost model's predictions instead of the stored ones: a shadow model's as "
            "stored, any other registered model refit on the trials in time order (out of sample)",
        ),
        option(
            "--by-task",
            action="store_true",
            help="a shape group per task of a several-shape session, and the points for plots (--json)",
        ),
        JSON,
        DB,
        EVENTS,
    ),
)

_EXPORT = Command(
    "export",
    "write the best (or a chosen) trial's schedule, TVMScript, library and database",
    (
        SESSION,
        OneOf(
            (
                option(
                    "--trial",
                    type=trial_number_arg,
                    default=None,
                    metavar="N",
                    help="the trial's number within the session, from 1, as show and the app print it (N or #N)",
                ),
                option(
                    "--trial-id",
                    type=int,
                    default=None,
                    metavar="ID",
                    help="the trial's id (trial_id in --json output)",
                ),
            )
        ),
        option("--out", required=True),
        option("--force", action="store_true", help="overwrite an export already in the --out folder"),
        option(
            "--robust",
            action="store_true",
            help="export the confirmed schedule whose worst buffer placement (plain TVM allocation, every "
            "buffer at the same page offset) is fastest, rather than the one with the fastest stated figure",
        ),
        JSON,
        DB,
    ),
)

_IMPORT = Command(
    "import",
    "read a MetaSchedule run (a tune_tir / tune_relax work folder) into sessions",
    (
        option(
            "work_dir",
            metavar="WORK_DIR",
            help="the folder with database_workload.json and database_tuning_record.json",
        ),
        JSON,
        DB,
    ),
)

_VALIDATE = Command(
    "validate",
    "re-measure a session's top schedules (or a schedule file) in fresh processes (a session "
    "measured through --rpc: in fresh sessions on its servers)",
    (
        SCHEDULE_SOURCE,
        option(
            "--repeats",
            type=int,
            default=5,
            metavar="N",
            help="fresh-process runs, each measuring every schedule once (default 5)",
        ),
        option("--top", type=int, default=3, metavar="K", help="a session's K fastest trials (default 3)"),
        SHAPES,
        option(
            "--task",
            type=int,
            default=0,
            help="which shape of a several-shape session (default 0, the first)",
        ),
        option(
            "--against",
            choices=("confirmed", "session"),
            default="confirmed",
            help="judge a session's trials against their confirmed figures where they have one (default) "
            "or the figures the session measured",
        ),
        TRUST_CUSTOM,
        option(
            "--gate",
            type=float,
            default=None,
            metavar="PCT",
            help="a deployment gate for a schedule file: exit 0 when the kernel runs within PCT percent of "
            "the figure its file states, 5 when slower (the line says by how much and the likely cause), 2 "
            "when the file cannot be judged here",
        ),
        option(
            "--gate-wait",
            type=float,
            default=None,
            metavar="S",
            help="with --gate: a failure measured while other processes were busy or the machine throttled "
            "is measured again, for up to S seconds in all, until it passes or fails undisturbed (default "
            f"{_MEASURE.confirm_max_s:g}; 0: one attempt)",
        ),
        JSON,
        DB,
    ),
)

_JITTER = Command(
    "jitter",
    "re-measure a session's best schedule (or a schedule file) across fresh processes, buffer "
    "layouts and shapes, and say which cause explains its spread",
    (
        SCHEDULE_SOURCE,
        option("--runs", type=int, default=5, metavar="N", help="fresh-process runs (default 5)"),
        SHAPES,
        TRUST_CUSTOM,
        JSON,
        DB,
    ),
)

_MODELS = Command(
    "models",
    "each cost model refit on sessions' trials in time order, judged out of sample",
    (
        SESSIONS,
        option("--models", default=None, metavar="NAME,...", help="default: every registered model"),
        JSON,
        DB,
    ),
)

_COMPILE = Command(
    "compile",
    "build sampled schedules of a space for a target without measuring (CUDA: source and PTX)",
    (
        WORKLOAD,
        option("--shape", default=None, help="K=V,... or a preset (default: the workload's)"),
        DTYPE,
        option(
            "--target",
            default="auto",
            help='auto | llvm | cuda | a JSON target dict, e.g. \'{"kind":"cuda","arch":"sm_90"}\'',
        ),
        SPACE,
        SPACE_FILE,
        option("--custom", metavar="FILE", help="a Python file defining a TE compute (workload custom)"),
        option("--samples", type=int, default=8, help="distinct configs to build (1..256)"),
        option("--seed", type=int, default=0),
        option("--out", required=True, help="the folder the sources and compile.json go into"),
        option("--force", action="store_true", help="replace an earlier compile in the --out folder"),
        JSON,
    ),
)

_DEVICES = Command(
    "devices",
    "the devices a TVM RPC tracker holds: keys, servers, queues",
    (
        option(
            "--rpc", default=None, metavar="HOST:PORT", help="the tracker (default: TVM_TRACKER_HOST/PORT)"
        ),
        JSON,
    ),
)

_ROOFLINE = Command(
    "roofline",
    "this machine's peak FLOP/s and bandwidth, and a session's best under them",
    (
        option("session", type=int, nargs="?", default=None),
        option("--target", default="llvm", help="llvm | cuda: the machine profile without a session"),
        option("--remeasure", action="store_true", help="run the micro-benchmarks again"),
        JSON,
        DB,
    ),
)

# In the order `tunelab --help` lists them.
COMMANDS: tuple[Command, ...] = (
    *_INSPECTION,
    _BIAS,
    _EXPORT,
    _IMPORT,
    _VALIDATE,
    _JITTER,
    Command(
        "baseline",
        "the session's operator through the vendor library (NumPy BLAS, cuBLAS)",
        (
            SESSION,
            option(
                "--remeasure", action="store_true", help="measure again instead of using the stored baseline"
            ),
            JSON,
            DB,
        ),
    ),
    _MODELS,
    _COMPILE,
    _DEVICES,
    _ROOFLINE,
)

"""The `tunelab` command line's grammar: every command, its arguments and their help."""

from __future__ import annotations

import argparse
from typing import NoReturn

from tunelab.core.errors import TunelabError
from tunelab.core.records import SPEC_DEFAULTS as _SPEC
from tunelab.core.records import MeasureOptions

_MEASURE = MeasureOptions()  # the defaults of the measurement options live in the record


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise TunelabError(
            f"{message} (see tunelab {self.prog.split()[-1]} --help)"
            if " " in self.prog
            else f"{message} (see tunelab --help)"
        )


def trial_number_arg(text: str) -> int:
    """``--trial``: a trial's number within its session as tunelab prints it, ``54`` or ``#54``."""
    digits = text.strip().removeprefix("#")
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a trial number (1, 2, ... or #1, #2, ...)")
    return int(digits)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tunelab", description="A desktop lab for TVM kernel tuning. Without a command: the GUI."
    )
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    def with_db(q: argparse.ArgumentParser) -> None:
        q.add_argument("--db", help="SQLite store (default: $TUNELAB_DB or the user data folder)")

    g = sub.add_parser("gui", help="launch the desktop app")
    with_db(g)
    w = sub.add_parser("workloads", help="the catalog of operators with their parameters")
    w.add_argument("--json", action="store_true")
    tu = sub.add_parser(
        "tuners", help="the search strategies: what each does, its spaces, whether it loads here"
    )
    tu.add_argument("--json", action="store_true")

    t = sub.add_parser("tune", help="run a tuning session")
    t.add_argument(
        "workload", nargs="?", help="a name from `tunelab workloads`, or custom with --custom FILE"
    )
    t.add_argument(
        "--shape",
        default=None,
        help="K=V,... naming every parameter, or a preset (without --shape: the workload's default "
        "shape); several shapes separated by ';' are tuned together as tasks sharing the budget",
    )
    t.add_argument("--dtype", default=None)
    t.add_argument(
        "--target",
        default="auto",
        help="auto | llvm | cuda | a JSON target dict (another mtriple: cross-compiled) | remote: with --rpc, "
        "the CPU of a server under the key",
    )
    t.add_argument("--space", default="template", help="template | auto")
    t.add_argument("--space-file", help="an edited search space (JSON), as the GUI's editor saves it")
    t.add_argument("--tuner", default=None, help="a name from `tunelab tuners` (default: recommended)")
    t.add_argument("--tuner-option", action="append", default=[], metavar="K=V", help="e.g. pop_size=16")
    t.add_argument(
        "--cost-model",
        default=None,
        metavar="NAME",
        help="the model that ranks candidates: xgb | mlp | roofline | hybrid "
        "(the xgb tuner's; --tuner-option model=...)",
    )
    t.add_argument(
        "--shadow-models",
        default="",
        metavar="NAME,...",
        help="cost models that also predict every candidate before it is measured, without steering "
        "(their predictions are stored; tunelab models compares them)",
    )
    t.add_argument(
        "--warm-start",
        default=None,
        metavar="auto|SID,...",
        help="start the xgb tuner's cost model from earlier sessions of this workload, target and space "
        "(auto: all of them; or their ids); the same as --tuner-option warm_start=...",
    )
    t.add_argument("--trials", type=int, default=_SPEC["trials"])
    t.add_argument("--batch", type=int, default=_SPEC["batch"])
    t.add_argument("--early-stop", type=int, default=None, help="stop after N trials without improvement")
    t.add_argument("--seed", type=int, default=_SPEC["seed"])
    t.add_argument("--number", type=int, default=_MEASURE.number, help="runs averaged into one sample")
    t.add_argument("--repeat", type=int, default=_MEASURE.repeat, help="samples kept per trial")
    t.add_argument("--min-repeat-ms", type=int, default=_MEASURE.min_repeat_ms)
    t.add_argument("--warmup", type=int, default=_MEASURE.warmup)
    t.add_argument("--timeout", type=float, default=_MEASURE.timeout_s, help="seconds per build and per run")
    t.add_argument("--cache-flush", action="store_true", help="flush CPU caches between samples")
    t.add_argument(
        "--l2-flush",
        default=_MEASURE.l2_flush,
        choices=("auto", "on", "off"),
        help="GPU: flush the L2 cache before each timed sample (auto: where the data fits in L2)",
    )
    t.add_argument(
        "--lock-clocks",
        action="store_true",
        help="GPU: lock the SM and memory clocks through NVML for the session (needs root; reset after)",
    )
    t.add_argument("--no-check", action="store_true", help="skip the NumPy correctness check")
    t.add_argument(
        "--target-cv",
        type=float,
        default=_MEASURE.target_cv,
        help="sample on until the spread (CV) is this small",
    )
    t.add_argument("--max-repeat", type=int, default=_MEASURE.max_repeat, help="cap on samples per trial")
    t.add_argument(
        "--leader-band",
        type=float,
        default=_MEASURE.leader_band,
        metavar="FACTOR",
        help="no repeats for candidates this many times slower than the best so far "
        f"(default {_MEASURE.leader_band}; 0: time every candidate fully)",
    )
    t.add_argument(
        "--cooldown",
        type=float,
        default=_MEASURE.cooldown_s,
        help="seconds to wait while the machine is hot or busy",
    )
    t.add_argument(
        "--confirm-runs",
        type=int,
        default=_MEASURE.confirm_runs,
        metavar="N",
        help="when finished, re-measure the fastest trials in N fresh processes (0: off); with --rpc, "
        "in N fresh sessions on the servers under the key",
    )
    t.add_argument(
        "--confirm-top",
        type=int,
        default=_MEASURE.confirm_top,
        metavar="K",
        help="how many of the fastest to confirm",
    )
    t.add_argument(
        "--confirm-max-s",
        type=float,
        default=_MEASURE.confirm_max_s,
        metavar="SECONDS",
        help="measure the confirmation again while the machine is busy or its processes disagree, "
        f"for up to this long in all (default {_MEASURE.confirm_max_s:g}; 0: one attempt)",
    )
    t.add_argument(
        "--fail-fast",
        type=int,
        default=_MEASURE.fail_fast,
        metavar="N",
        help="stop (status failed, exit 1) when the first N trials all fail the same way (0: off)",
    )
    t.add_argument(
        "--rpc",
        default=None,
        metavar="HOST:PORT",
        help="measure on the servers of this TVM RPC tracker (with --rpc-key: also TVM_TRACKER_HOST "
        "and TVM_TRACKER_PORT), and confirm the winners there; kernels are built here",
    )
    t.add_argument(
        "--rpc-key", default=_MEASURE.rpc_key, metavar="KEY", help="the key the servers registered under"
    )
    t.add_argument(
        "--rpc-workers",
        type=int,
        default=_MEASURE.rpc_workers,
        metavar="N",
        help="candidates measured at once on the servers",
    )
    t.add_argument("--custom", help="a Python file with a TE compute (workload custom)")
    t.add_argument("--name", default="")
    t.add_argument("--resume", type=int, default=None, metavar="SESSION", help="continue a stored session")
    t.add_argument(
        "--spec",
        metavar="FILE",
        help="a whole session as JSON (SessionSpec.to_json, what the desktop app writes) instead of "
        "the workload and the options above",
    )
    t.add_argument("--json", action="store_true")
    with_db(t)
    _with_events(t)

    s = sub.add_parser("sessions", help="list stored sessions")
    s.add_argument("--json", action="store_true")
    with_db(s)
    sh = sub.add_parser("show", help="one session: summary, best trial, rounds")
    sh.add_argument("session", type=int)
    sh.add_argument("--trials", action="store_true", help="include every trial")
    sh.add_argument("--json", action="store_true")
    with_db(sh)
    c = sub.add_parser("compare", help="sessions side by side")
    c.add_argument("sessions", type=int, nargs="+")
    c.add_argument("--json", action="store_true")
    with_db(c)
    b = sub.add_parser(
        "bias", help="where the cost model is wrong: residuals per shape, knob region and sketch"
    )
    b.add_argument("sessions", type=int, nargs="+")
    b.add_argument("--top-k", type=int, default=5)
    b.add_argument(
        "--model",
        default=None,
        help="judge this cost model's predictions instead of the stored ones: a shadow model's as "
        "stored, any other registered model refit on the trials in time order (out of sample)",
    )
    b.add_argument(
        "--by-task",
        action="store_true",
        help="a shape group per task of a several-shape session, and the points for plots (--json)",
    )
    b.add_argument("--json", action="store_true")
    with_db(b)
    _with_events(b)
    e = sub.add_parser(
        "export", help="write the best (or a chosen) trial's schedule, TVMScript, library and database"
    )
    e.add_argument("session", type=int)
    which = e.add_mutually_exclusive_group()
    which.add_argument(
        "--trial",
        type=trial_number_arg,
        default=None,
        metavar="N",
        help="the trial's number within the session, from 1, as show and the app print it (N or #N)",
    )
    which.add_argument(
        "--trial-id", type=int, default=None, metavar="ID", help="the trial's id (trial_id in --json output)"
    )
    e.add_argument("--out", required=True)
    e.add_argument("--force", action="store_true", help="overwrite an export already in the --out folder")
    e.add_argument(
        "--robust",
        action="store_true",
        help="export the confirmed schedule whose worst buffer placement (plain TVM allocation, every "
        "buffer at the same page offset) is fastest, rather than the one with the fastest stated figure",
    )
    e.add_argument("--json", action="store_true")
    with_db(e)
    i = sub.add_parser(
        "import", help="read a MetaSchedule run (a tune_tir / tune_relax work folder) into sessions"
    )
    i.add_argument(
        "work_dir",
        metavar="WORK_DIR",
        help="the folder with database_workload.json and database_tuning_record.json",
    )
    i.add_argument("--json", action="store_true")
    with_db(i)
    v = sub.add_parser(
        "validate",
        help="re-measure a session's top schedules (or a schedule file) in fresh processes (a session "
        "measured through --rpc: in fresh sessions on its servers)",
    )
    v.add_argument(
        "source", metavar="SCHEDULE_FILE|SESSION", help="an exported *.schedule.json or a session id"
    )
    v.add_argument(
        "--repeats",
        type=int,
        default=5,
        metavar="N",
        help="fresh-process runs, each measuring every schedule once (default 5)",
    )
    v.add_argument("--top", type=int, default=3, metavar="K", help="a session's K fastest trials (default 3)")
    v.add_argument(
        "--shapes", default=None, help="also carry the best schedule to these shapes, e.g. M=16,32,64"
    )
    v.add_argument(
        "--task", type=int, default=0, help="which shape of a several-shape session (default 0, the first)"
    )
    v.add_argument(
        "--against",
        choices=("confirmed", "session"),
        default="confirmed",
        help="judge a session's trials against their confirmed figures where they have one (default) "
        "or the figures the session measured",
    )
    v.add_argument(
        "--trust-custom",
        action="store_true",
        help="run the workload code a schedule file carries (custom_source); without it such a "
        "file is refused, since its code would run in this process",
    )
    v.add_argument(
        "--gate",
        type=float,
        default=None,
        metavar="PCT",
        help="a deployment gate for a schedule file: exit 0 when the kernel runs within PCT percent of the "
        "figure its file states, 5 when slower (the line says by how much and the likely cause), 2 when "
        "the file cannot be judged here",
    )
    v.add_argument("--json", action="store_true")
    with_db(v)
    j = sub.add_parser(
        "jitter",
        help="re-measure a session's best schedule (or a schedule file) across fresh processes, buffer "
        "layouts and shapes, and say which cause explains its spread",
    )
    j.add_argument(
        "source", metavar="SESSION|SCHEDULE_FILE", help="a session id or an exported *.schedule.json"
    )
    j.add_argument("--runs", type=int, default=5, metavar="N", help="fresh-process runs (default 5)")
    j.add_argument(
        "--shapes", default=None, help="also carry the best schedule to these shapes, e.g. M=16,32,64"
    )
    j.add_argument(
        "--trust-custom",
        action="store_true",
        help="run the workload code a schedule file carries (custom_source)",
    )
    j.add_argument("--json", action="store_true")
    with_db(j)
    b = sub.add_parser(
        "baseline", help="the session's operator through the vendor library (NumPy BLAS, cuBLAS)"
    )
    b.add_argument("session", type=int)
    b.add_argument(
        "--remeasure", action="store_true", help="measure again instead of using the stored baseline"
    )
    b.add_argument("--json", action="store_true")
    with_db(b)
    mo = sub.add_parser(
        "models", help="each cost model refit on sessions' trials in time order, judged out of sample"
    )
    mo.add_argument("sessions", type=int, nargs="+")
    mo.add_argument("--models", default=None, metavar="NAME,...", help="default: every registered model")
    mo.add_argument("--json", action="store_true")
    with_db(mo)
    co = sub.add_parser(
        "compile",
        help="build sampled schedules of a space for a target without measuring (CUDA: source and PTX)",
    )
    co.add_argument(
        "workload", nargs="?", help="a name from `tunelab workloads`, or custom with --custom FILE"
    )
    co.add_argument("--shape", default=None, help="K=V,... or a preset (default: the workload's)")
    co.add_argument("--dtype", default=None)
    co.add_argument(
        "--target",
        default="auto",
        help='auto | llvm | cuda | a JSON target dict, e.g. \'{"kind":"cuda","arch":"sm_90"}\'',
    )
    co.add_argument("--space", default="template", help="template | auto")
    co.add_argument("--space-file", help="an edited search space (JSON), as the GUI's editor saves it")
    co.add_argument("--custom", metavar="FILE", help="a Python file defining a TE compute (workload custom)")
    co.add_argument("--samples", type=int, default=8, help="distinct configs to build (1..256)")
    co.add_argument("--seed", type=int, default=0)
    co.add_argument("--out", required=True, help="the folder the sources and compile.json go into")
    co.add_argument("--force", action="store_true", help="replace an earlier compile in the --out folder")
    co.add_argument("--json", action="store_true")
    d = sub.add_parser("devices", help="the devices a TVM RPC tracker holds: keys, servers, queues")
    d.add_argument(
        "--rpc", default=None, metavar="HOST:PORT", help="the tracker (default: TVM_TRACKER_HOST/PORT)"
    )
    d.add_argument("--json", action="store_true")
    r = sub.add_parser(
        "roofline", help="this machine's peak FLOP/s and bandwidth, and a session's best under them"
    )
    r.add_argument("session", type=int, nargs="?", default=None)
    r.add_argument("--target", default="llvm", help="llvm | cuda: the machine profile without a session")
    r.add_argument("--remeasure", action="store_true", help="run the micro-benchmarks again")
    r.add_argument("--json", action="store_true")
    with_db(r)
    return p


def _with_events(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--events-fd",
        type=int,
        default=None,
        metavar="N",
        help="also report progress as JSON lines on file descriptor N, for a controlling process "
        "(tunelab.core.cli.protocol)",
    )

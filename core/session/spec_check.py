"""Checking a session's spec before anything is stored: its target, shapes, options and space, or a TunelabError."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError, TargetError, TunelabError
from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.search.models import make_cost_model
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.search.space.factory import make_space
from tunelab.core.search.space.records import RECORDS_KIND, not_tunable
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.search.tuners.registry import get_tuner_class, make_tuner, resolve_options
from tunelab.core.target.info import REMOTE_TARGET, TargetInfo, resolve_target
from tunelab.core.workloads.base import format_shape
from tunelab.core.workloads.catalog import get_workload
from tunelab.core.workloads.tir import TIR_NAME


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
    _check_budget(spec)
    _check_measure_options(spec.measure)
    _check_models(spec)
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


def _check_budget(spec: SessionSpec) -> None:
    """The trial budget, the batch and early stopping: each at least 1."""
    if spec.trials < 1:
        raise TunelabError(f"the trial budget must be at least 1, not {spec.trials}", option="trials")
    if spec.batch < 1:
        raise TunelabError(f"the batch size must be at least 1, not {spec.batch}", option="batch")
    if spec.early_stop is not None and spec.early_stop < 1:
        raise TunelabError(f"early stopping needs at least 1 trial, not {spec.early_stop}")


def _check_measure_options(m: MeasureOptions) -> None:
    """The measurement options' ranges, the RPC tracker's address and the L2 flush mode."""
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
        _check_rpc_options(m)
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


def _check_rpc_options(m: MeasureOptions) -> None:
    """Measured through an RPC tracker: its address, the servers' key and the candidates in flight."""
    from tunelab.core.measure.remote import TrackerAddress

    TrackerAddress.parse(m.rpc_tracker)
    if not m.rpc_key:
        raise TunelabError("--rpc needs --rpc-key: the key the servers registered under", option="rpc-key")
    if not 1 <= m.rpc_workers <= 256:
        raise TunelabError(
            f"--rpc-workers must be 1..256 candidates in flight, not {m.rpc_workers}",
            option="rpc-workers",
        )


def _check_models(spec: SessionSpec) -> None:
    """The tuner's options and the shadow models' names (each known, none twice)."""
    resolve_options(get_tuner_class(spec.tuner), spec.tuner_options)
    if len(set(spec.shadow_models)) != len(spec.shadow_models):
        raise TunelabError(f"--shadow-models names a model twice: {','.join(spec.shadow_models)}")
    for name in spec.shadow_models:
        make_cost_model(name)  # an unknown name: one line listing the models


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


def extra_shapes(workload: Any, shape: dict[str, int], shapes: Any) -> list[dict[str, int]]:
    """The session's other shapes (tasks), parsed; a repeated shape is an error."""
    parsed = [workload.parse_shape(s, complete=True) for s in shapes or ()]
    seen = [shape]
    for other in parsed:
        if other in seen:
            raise TunelabError(f"shape {format_shape(other)} is listed twice")
        seen.append(other)
    return parsed


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

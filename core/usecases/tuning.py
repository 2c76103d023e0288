"""Tuning as a person asks for it: a new session planned and checked before anything is stored, or a stored
one resumed; a session whose winners are confirmed in fresh processes when it finishes; its summary.

The session loop (tunelab.core.session.loop) knows nothing of confirmation, which lives a layer above it
(core.trust): this use case joins them, for the command line and, through it, the desktop app.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.export.stated import StatedBest, stated_best
from tunelab.core.records import SessionRecord, SessionSpec, check_numbers, figure_text, trial_label
from tunelab.core.search.tuners.registry import get_tuner_class, recommend_tuner, resolve_options
from tunelab.core.session.loop import CheckedSpec, TuningSession, check_spec, create_session
from tunelab.core.store import Store
from tunelab.core.trust.baselines import baseline_for
from tunelab.core.trust.confirm import confirm_session, format_confirmations
from tunelab.core.trust.remeasure.report import ValidationReport
from tunelab.core.workloads.shape_text import format_shape

# Where the vendor is timed before round 0: on a GPU a random first-round kernel can take seconds a call,
# and the measurer times one call of anything far slower than the vendor (tunelab.core.measure.runner).
# A CPU's vendor figure is not needed that early (its random kernels take milliseconds), and measuring
# it would add seconds to every session.
VENDOR_FIRST_KINDS = ("cuda",)


def confirm_when_finished(session: TuningSession) -> TuningSession:
    """Have `session` re-measure its fastest trials in fresh processes once it finishes (the winner's
    curse: core.trust.confirm), storing the confirmation; its MeasureOptions say how many (0: none)."""

    def confirm(finished: TuningSession) -> None:
        finished.confirmations = confirm_session(
            finished.store,
            finished.session_id,
            is_cancelled=finished.cancel_requested,
            on_stage=finished.report_stage,
        )

    session.before_finish.append(confirm)
    return session


def vendor_before_round_zero(session: TuningSession, kinds: tuple[str, ...] = VENDOR_FIRST_KINDS) -> int:
    """Measure (or read) the vendor library's time on each of the session's shapes before it runs, so its
    measurer knows it from the first batch; returns how many shapes have one. A vendor that cannot be
    had is said as a stage and the session goes on without it."""
    if session.target.kind not in kinds:
        return 0
    store = session.store
    record = store.session(session.session_id)
    known = 0
    for task in range(len(store.tasks(session.session_id)) or 1):
        session.report_stage(f"timing the vendor library on shape {task + 1} before round 0")
        try:
            known += baseline_for(store, record, task=task) is not None
        except TunelabError as exc:
            session.report_stage(f"no vendor figure before round 0: {exc}")
    return known


@dataclass(frozen=True)
class PlannedSession:
    """A new session's spec, checked in full, its tuner chosen: what `start_session` stores and runs."""

    spec: SessionSpec
    checked: CheckedSpec


def plan_session(spec: SessionSpec, *, recommend: bool) -> PlannedSession:
    """Check every part of `spec` before anything is stored (bad input: one TunelabError).

    ``recommend``: no tuner was chosen; the space's recommended tuner runs, and the spec's tuner options
    are that tuner's (known only once the space is built)."""
    check_numbers(spec)  # each number named by its option, before anything is built
    options = spec.tuner_options
    if recommend:
        spec = replace(spec, tuner_options={})
    checked = check_spec(spec)
    if recommend:
        spec = replace(
            spec,
            tuner=recommend_tuner(checked.space.kind, checked.space.size, checked.target.kind),
            tuner_options=options,
        )
        try:
            resolve_options(get_tuner_class(spec.tuner), spec.tuner_options)
        except TunelabError as exc:
            raise TunelabError(
                f"{exc} ({spec.tuner} is the tuner recommended for this space; --tuner picks another)"
            ) from None
    return PlannedSession(spec, checked)


def start_session(store: Store, planned: PlannedSession) -> TuningSession:
    """Store the planned session; it confirms its winners when it finishes."""
    return confirm_when_finished(create_session(store, planned.spec, validated=planned.checked))


def resume_session(store: Store, session_id: int) -> TuningSession:
    """A stored session, ready to run on; refused while another process runs it or once it is done."""
    # Refused before anything is built: a second runner would measure the same configs again.
    # (TuningSession.run claims the session atomically too, for two resumes started together.)
    store.refuse_if_running(session_id)
    record = store.session(session_id)
    if record.status == "finished" and record.n_trials >= record.trials_budget:
        raise TunelabError(f"session {session_id} already finished its {record.trials_budget} trials")
    return confirm_when_finished(TuningSession(store, session_id))


def start_words(session: TuningSession, planned: PlannedSession) -> list[str]:
    """What a new session is, in a line (and the target's note, where it has one)."""
    spec, checked = planned.spec, planned.checked
    default = (
        " (the default shape)" if not spec.shape and checked.shape == checked.workload.default_shape() else ""
    )
    more = f" +{len(spec.shapes)} shapes" if spec.shapes else ""
    lines = [
        f"session {session.session_id}: {spec.workload} {format_shape(checked.shape)}{default}{more} on "
        f"{session.target.description}, {spec.space_kind} space of {session.space.size:,} configs, "
        f"tuner {spec.tuner}"
    ]
    if session.target.note:
        lines.append(f"note: {session.target.note}")
    return lines


@dataclass(frozen=True)
class TuneSummary:
    """How a tune ended: the session's record as stored, what it rejected, its confirmations and the one
    best figure every view states."""

    record: SessionRecord
    rejected: int
    first_rejection: str | None
    spent: tuple[str, ...]  # why tuning stopped before the budget (a task whose tuner had no more to give)
    confirmations: tuple[ValidationReport, ...]
    stated: StatedBest | None

    def to_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "session_id": record.id,
            "status": record.status,
            "trials": record.n_trials,
            "measured": record.n_trials - record.n_failed,
            "failed": record.n_failed,
            "rejected": self.rejected,
            "spent": list(self.spent),
            "best_ms": record.best_ms,
            "best_gflops": record.best_gflops,
            "best_trial_id": record.best_trial_id,
            "best_trial_number": record.best_trial_number,
            "target": record.target,
            "tuner": record.tuner,
            "confirmations": [confirmation_json(r) for r in self.confirmations],
            "best": self.stated.to_json() if self.stated is not None else None,
        }

    def words(self) -> list[str]:
        record = self.record
        trial = (
            f" (trial {trial_label(record.best_trial_number, trial_id=record.best_trial_id)})"
            if record.best_trial_number is not None
            else ""
        )
        lines = [
            f"session {record.id} {record.status}: {record.n_trials} trials ({record.n_failed} failed), "
            f"best {figure_text(record.best_ms)} ms = {figure_text(record.best_gflops)} GFLOP/s{trial}"
        ]
        lines += self.spent
        if self.confirmations:
            lines.append(format_confirmations(list(self.confirmations)))
        if self.stated is not None:
            lines.append(f"stated best ({self.stated.kind}): {self.stated.words()}")
        return lines

    def measured_nothing(self) -> str:
        """Why the session measured nothing at all ("": it measured something)."""
        if self.record.n_trials or not self.rejected:
            return ""
        return (
            f"session {self.record.id} measured nothing: all {self.rejected} configs it tried were "
            f"rejected before measuring (first: {self.first_rejection})"
        )


def tune_summary(store: Store, session: TuningSession) -> TuneSummary:
    record = store.session(session.session_id)
    return TuneSummary(
        record=record,
        rejected=session.rejected,
        first_rejection=session.first_rejection,
        spent=tuple(session.spent),
        confirmations=tuple(session.confirmations),
        stated=stated_best(store, record),
    )


def confirmation_json(report: ValidationReport) -> dict[str, Any]:
    """A confirmation (a ValidationReport, tunelab.core.trust.confirm) in brief."""
    return {
        "validation_id": report.id,
        "task": report.source.task,
        "verdict": report.verdict,
        "runs": report.runs,
        "schedules": [
            {
                "trial_id": s.trial_id,
                "label": s.label,
                "recorded_ms": s.recorded_ms,
                "remeasured_ms": s.remeasured_ms,
                "ratio": s.ratio,
                "cv": s.cv,
                "runs": s.runs,
                "verdict": s.verdict,
            }
            for s in report.schedules
        ],
    }


def all_wrong(store: Store, record: SessionRecord, custom: str | None) -> str:
    """Why a session with trials measured nothing right ("": it did): when every trial computed other
    values than the reference, the reference is the likelier culprit (a custom file's above all), and
    the session must not read as finished."""
    if record.n_trials == 0 or record.n_trials != record.n_failed:
        return ""
    trials = store.trials(record.id)
    if not trials or any(t.status != "wrong_result" for t in trials):
        return ""
    if record.workload == "custom":
        where = f"the custom file {custom}" if custom else "the session's custom file"
        culprit = f"its reference() is likely wrong: check reference() in {where} against compute()"
    else:
        culprit = f"the {record.workload} reference disagrees with every kernel"
    return (
        f"session {record.id} measured nothing right: all {len(trials)} trials computed other values than "
        f"the reference (wrong_result); {culprit}"
    )


def remote_measure_fields(rpc: str | None, rpc_key: str, rpc_workers: int) -> dict[str, Any]:
    """MeasureOptions' RPC fields from --rpc/--rpc-key/--rpc-workers. The tracker's environment variables
    count only with --rpc-key, so a shell that exports them for other tools still tunes here."""
    from tunelab.core.measure.remote import TrackerAddress

    tracker = TrackerAddress.parse(rpc) if rpc else None
    if tracker is None and rpc_key:
        tracker = TrackerAddress.from_env()
        if tracker is None:
            raise TunelabError("--rpc-key needs --rpc HOST:PORT (or TVM_TRACKER_HOST and TVM_TRACKER_PORT)")
    if tracker is None:
        if rpc_workers != 1:
            raise TunelabError("--rpc-workers needs --rpc HOST:PORT and --rpc-key")
        return {}
    return {"rpc_tracker": str(tracker), "rpc_key": rpc_key, "rpc_workers": rpc_workers}

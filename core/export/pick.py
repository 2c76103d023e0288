"""Which trial an export writes, the figure it states, and what a person's process will see of it.

Read from the store only (no TVM), so that the CLI, the export itself and the app's export dialog
all say the same thing before anything is built:

- the trial: the session's best, stated with its fresh-process confirmation; a confirmed rival only
  when it is clearly faster beyond noise (:func:`tunelab.core.trust.confirmed.clearly_faster`); with
  ``robust``, the quietly confirmed trial whose *worst* buffer placement is fastest;
- the stated figure, its confidence interval over the fresh processes, and whether it can be held to;
- the placement figures: the layout it was measured with, plain TVM's allocation
  (``tvm.runtime.tensor``, what a person's application gets) and the aligned worst case, with the
  advice that follows when the kernel is placement-sensitive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunelab.core.errors import StoreError
from tunelab.core.measure.placement import (
    DEFAULT_LAYOUT,
    LAYOUT_WORDS,
    PLACEMENT_TOL,
    placement_ratio,
    worst_layout,
)
from tunelab.core.measure.threads import tvm_default_threads
from tunelab.core.records import TaskRecord, TrialRecord
from tunelab.core.stats import bootstrap_median_ci
from tunelab.core.store import Store
from tunelab.core.trust.confirmed import Confirmation, clearly_faster, confirmations
from tunelab.core.trust.remeasure.verdict import NOISY_CV

CI_LEVEL = 0.95


def untrusted_because(confirmation: Confirmation | None) -> str | None:
    """Why a stated figure cannot be held to (None: it can). Only a confirmation on a quiet machine
    whose fresh processes agree is evidence; the session's own figure of its winner is biased low
    whatever the machine did."""
    if confirmation is None:
        return "never confirmed in fresh processes: the session's own figure of its winner is biased low"
    if confirmation.disturbance:
        return f"confirmed while {confirmation.disturbance}"
    if confirmation.verdict == "noisy":
        # Noisy by its own runs' spread: no figure to hold to. A verdict noisy only because the session's
        # own figure was off (the winner's curse, a disturbed recording) with runs that agree leaves the
        # confirmed figure, the one stated, as the figure to trust.
        cv = max((c for c in (confirmation.cv, confirmation.run_cv) if c is not None), default=None)
        if cv is None or cv > NOISY_CV:
            spread = f" (CV {cv * 100:.0f} %)" if cv is not None else ""
            return f"its confirmation was noisy{spread}"
    return None


@dataclass(frozen=True, slots=True)
class PlacementFigures:
    """How a kernel runs with its buffers placed otherwise than it was measured (medians, ms)."""

    measured_with: str  # the layout of the stated figure (tunelab.core.measure.placement)
    layout_ms: dict[str, float]
    worst_layout: str | None
    ratio: float | None  # the worst layout's figure over the stated layout's
    runner_up: tuple[int, float] | None = (
        None  # (trial id, its worst-placement ms) less sensitive than this one
    )
    runner_up_number: int | None = None  # that trial's number within its session (what the text names)

    @property
    def sensitive(self) -> bool:
        return self.ratio is not None and self.ratio > 1 + PLACEMENT_TOL

    def note(self) -> str | None:
        """'placement-sensitive: 12% slower (0.41 ms) with plain TVM's allocation ...' and the advice; None
        when the kernel runs within :data:`PLACEMENT_TOL` of its stated figure however it is placed."""
        if not self.sensitive or self.worst_layout is None or self.ratio is None:
            return None
        worst = self.worst_layout
        text = (
            f"placement-sensitive: {(self.ratio - 1) * 100:.0f}% slower than the stated figure "
            f"({self.layout_ms[worst]:.4g} ms) {LAYOUT_WORDS.get(worst, f'with the {worst} layout')}. "
            f"Align or pad the buffers (start each at another page offset, as tunelab's "
            f"{self.measured_with} layout does, or pad rows by a cache line)"
        )
        if self.runner_up is not None:
            trial, worst_ms = self.runner_up
            name = f"#{self.runner_up_number}" if self.runner_up_number is not None else f"id {trial}"
            text += (
                f", or export the schedule whose worst placement is best (--robust: trial {name}, "
                f"{worst_ms:.4g} ms at worst)"
            )
        return text + "."

    def to_json(self) -> dict[str, Any]:
        return {
            "measured_with": self.measured_with,
            "layout_ms": dict(self.layout_ms),
            "plain_ms": self.layout_ms.get("plain"),
            "aligned_ms": self.layout_ms.get("aligned"),
            "worst_layout": self.worst_layout,
            "worst_ms": self.layout_ms.get(self.worst_layout) if self.worst_layout else None,
            "ratio": self.ratio,
            "sensitive": self.sensitive,
            "runner_up": (
                {
                    "trial_id": self.runner_up[0],
                    "trial_number": self.runner_up_number,
                    "worst_ms": self.runner_up[1],
                }
                if self.runner_up
                else None
            ),
            "note": self.note(),
        }


@dataclass(frozen=True, slots=True)
class ExportPick:
    """The trial an export writes and what its schedule file will state about it."""

    trial: TrialRecord
    task: TaskRecord | None
    confirmation: Confirmation | None
    robust: bool  # picked for its worst placement, not its stated figure
    placement: PlacementFigures | None  # None: never confirmed with several layouts (or not a CPU)
    # CPU kernels: the threads TVM's pool ran them on when measured (the target's cores; tunelab sets
    # TVM_NUM_THREADS to them). Plain TVM takes half the CPUs on x86: a person's process must set it too.
    kernel_threads: int | None = None

    @property
    def stated_ms(self) -> float:
        ms = self.confirmation.median_ms if self.confirmation else self.trial.latency_ms
        assert ms is not None  # a successful trial
        return ms

    @property
    def ci_ms(self) -> tuple[float, float] | None:
        """A 95 % bootstrap interval of the stated figure over the confirmation's fresh processes."""
        if self.confirmation is None:
            return None
        return bootstrap_median_ci(self.confirmation.run_medians_ms, level=CI_LEVEL)

    @property
    def untrusted_because(self) -> str | None:
        """Why the stated figure cannot be held to, or None (:func:`untrusted_because`)."""
        return untrusted_because(self.confirmation)

    def summary(self) -> str:
        """What the export will state, in one or two sentences (the export dialog's text)."""
        c = self.confirmation
        if c is None:
            text = f"trial #{self.trial.number}: {self.stated_ms:.4g} ms as the session measured it"
        else:
            text = (
                f"trial #{self.trial.number}: {self.stated_ms:.4g} ms confirmed in {c.runs} fresh processes"
            )
            ci = self.ci_ms
            if ci is not None:
                text += f" (95% interval {ci[0]:.4g}-{ci[1]:.4g} ms)"
        if self.robust:
            text += ", picked for its worst buffer placement"
        why = self.untrusted_because
        text += f". Not a figure to hold to: {why}." if why else "."
        note = self.placement.note() if self.placement else None
        text = f"{text} {note[0].upper()}{note[1:]}" if note else text
        threads = self.threads_note()
        return f"{text} {threads}" if threads else text

    def threads_note(self) -> str | None:
        """How a person's process gets the threads the stated figure was measured with (CPU kernels)."""
        if self.kernel_threads is None:
            return None
        default = tvm_default_threads()
        n = self.kernel_threads
        text = (
            f"Measured on {n} kernel thread{'s' * (n != 1)}: set TVM_NUM_THREADS={n} in the process "
            "that loads the library"
        )
        if default != self.kernel_threads:
            text += f" (plain TVM would use {default} here, and the kernel would run slower)"
        return text + "."


def _worst_ms(c: Confirmation) -> float | None:
    timed = [v for v in c.layout_ms.values() if v]
    return max(timed) if len(timed) > 1 else None


def _of_task(store: Store, confirmed: dict[int, Confirmation], task: TaskRecord | None) -> list[int]:
    task_id = task.id if task is not None else None
    return [k for k in confirmed if store.trial(k).task_id in (task_id, None)]


def choose_trial(
    store: Store, task: TaskRecord | None, confirmed: dict[int, Confirmation], *, robust: bool = False
) -> int | None:
    """The trial an export picks by default. Its stated figure must not be the one it was picked by
    (that figure is biased low: tunelab.core.trust.confirm), so: the session's best, stated with its
    confirmed figure; a confirmed rival only when it is clearly faster beyond noise, as when the
    session's best was a fluke; the fastest confirmed trial when the best was never confirmed. With
    ``robust``: of the trials confirmed on a quiet machine with several buffer layouts, the one whose
    slowest layout is fastest (the default pick when none was)."""
    best_id = task.best_trial_id if task is not None else None
    mine = _of_task(store, confirmed, task)
    if robust:
        quiet = [k for k in mine if not confirmed[k].disturbance and _worst_ms(confirmed[k]) is not None]
        if quiet:
            return min(quiet, key=lambda k: (_worst_ms(confirmed[k]) or 0.0, k))
    if not mine:
        return best_id
    fastest = min(mine, key=lambda k: (confirmed[k].median_ms, k))
    if best_id in confirmed and not clearly_faster(confirmed[fastest], confirmed[best_id]):
        return best_id
    return fastest


def _placement(
    store: Store, trial_id: int, task: TaskRecord | None, confirmed: dict[int, Confirmation]
) -> PlacementFigures | None:
    c = confirmed.get(trial_id)
    if c is None or len(c.layout_ms) < 2:
        return None
    ratio = placement_ratio(c.layout_ms)
    runner_up = None
    if ratio is not None and ratio > 1 + PLACEMENT_TOL:
        mine_worst = _worst_ms(c) or 0.0
        others = [
            (k, w)
            for k in _of_task(store, confirmed, task)
            if k != trial_id and not confirmed[k].disturbance and (w := _worst_ms(confirmed[k])) is not None
        ]
        better = [kw for kw in others if kw[1] < mine_worst]
        runner_up = min(better, key=lambda kw: (kw[1], kw[0])) if better else None
    return PlacementFigures(
        measured_with=DEFAULT_LAYOUT,
        layout_ms=dict(c.layout_ms),
        worst_layout=worst_layout(c.layout_ms),
        ratio=ratio,
        runner_up=runner_up,
        runner_up_number=store.trial(runner_up[0]).number if runner_up is not None else None,
    )


def export_pick(
    store: Store,
    session_id: int,
    trial_id: int | None = None,
    *,
    robust: bool = False,
    confirmed: dict[int, Confirmation] | None = None,
) -> ExportPick:
    """What exporting ``trial_id`` (default: :func:`choose_trial` for the primary shape) of a session
    writes. ``confirmed``: the session's confirmations when the caller has read them already (each read
    decodes every stored validation). StoreError for a trial of another session, a failed trial or a
    session with none."""
    tasks = store.tasks(session_id)
    if confirmed is None:
        confirmed = confirmations(store, session_id)
    if trial_id is None:
        chosen = choose_trial(store, tasks[0] if tasks else None, confirmed, robust=robust)
        trial = store.trial(chosen) if chosen is not None else store.best_trial(session_id)
        if trial is None:
            raise StoreError(f"session {session_id} has no successful trial to export")
    else:
        trial = store.trial(trial_id)
        if trial.session_id != session_id:
            raise StoreError(f"trial {trial_id} belongs to session {trial.session_id}, not {session_id}")
        if not trial.ok:
            raise StoreError(
                f"trial {trial_id} failed ({trial.status}); only a successful trial can be exported"
            )
        robust = False
    task = next((t for t in tasks if t.id == trial.task_id), tasks[0] if tasks else None)
    target = store.session(session_id).target
    cores = target.get("num-cores") if target.get("kind") == "llvm" else None
    return ExportPick(
        trial=trial,
        task=task,
        confirmation=confirmed.get(trial.id),
        robust=robust,
        placement=_placement(store, trial.id, task, confirmed),
        kernel_threads=int(cores) if isinstance(cores, int) and cores > 0 else None,
    )

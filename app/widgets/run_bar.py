"""Progress of the selected session: trials done of the budget, ETA, and the Pause / Resume / Stop
buttons (enabled when this window is the one tuning it)."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QToolButton, QWidget

from tunelab.app.views.session_figures import SessionFigures
from tunelab.app.widgets.buffers import TrialColumns, columns_of, n_rows, rows_after
from tunelab.app.widgets.elided_label import ElidedLabel
from tunelab.app.widgets.formatting import fmt_duration
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store

ETA_ROUNDS = 6  # recent batches (rounds) the time per trial is taken from
MAX_GAP_S = 600.0  # a longer pause between two batches is a stop (resumed later), not tuning time

# What this window asked its tuning worker for and the session has not done yet: the note said until the
# stored status shows it done (a pause took effect: "paused", no more "pausing after the current batch").
PENDING_NOTES = {
    # A pause asked for as the last batch ran never takes effect: the session ends instead.
    "pause": ("pausing after the current batch…", ("paused", "cancelled", "finished", "failed", "crashed")),
    "stop": ("stopping after the current batch…", ("cancelled", "finished", "failed", "crashed")),
}


def eta_seconds(rounds: list[tuple[int, float, float]], done: int, budget: int) -> float | None:
    """Seconds left at the recent time per trial, from whole batches; None until a batch is stored.

    `rounds`: (trials, earliest start, latest finish) of each recent round, in order. A batch's time is
    from the previous batch's last trial to its own last one: the search for it, building and running
    its candidates. (Timed between trials, the rate was the running alone: a batch's trials finish
    within a second of each other, and the ETA said "2-4 s" with whole 20 s batches to go.) The first
    round counts from its first trial's start."""
    if done >= budget:
        return 0.0
    spans: list[tuple[int, float]] = []
    for i, (n, start, end) in enumerate(rounds):
        begin = rounds[i - 1][2] if i else start
        if i and not 0 <= end - begin <= MAX_GAP_S:  # paused (or stopped and resumed) in between
            begin = start
        if n > 0 and end > begin:
            spans.append((n, end - begin))
    if len(spans) > 1:
        spans = spans[1:]  # the first has no search before it: the later ones are whole batches
    if not spans:
        return None
    per_trial = sum(s for _, s in spans) / sum(n for n, _ in spans)
    return per_trial * (budget - done)


def _rounds_of(columns: TrialColumns, rounds: dict[int, list[float]]) -> None:
    """Add the trials of `columns` to `rounds` ({round: [trials, earliest start, latest finish]})."""
    for r, start, end in zip(
        columns["round"].tolist(),
        columns["started_at"].tolist(),
        columns["finished_at"].tolist(),
        strict=True,
    ):
        entry = rounds.setdefault(int(r), [0, math.inf, -math.inf])
        entry[0] += 1
        if math.isfinite(start):
            entry[1] = min(entry[1], start)
        if math.isfinite(end):
            entry[2] = max(entry[2], end)


STARTING = object()  # set_stage's session for a note about no session yet (set_starting)


class RunBar(QWidget):
    def __init__(
        self, store: Store, pause_action: QAction, stop_action: QAction, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("RunBar")
        self._store = store
        self.session_id: int | None = None
        self._last_id = 0
        self._rounds: dict[int, list[float]] = {}  # recent rounds: [trials, earliest start, latest finish]
        # Long lines are cut with "…" (whole in the tooltip): a QLabel's text sets its window's minimum width.
        self.label = ElidedLabel("No session selected.")
        self.label.setObjectName("run_label")
        # What the tuning session does besides trials (confirming its winners), while it does it.
        self.stage_label = ElidedLabel()
        self.stage_label.setObjectName("stage_label")
        self.stage_label.setVisible(False)
        self._stage: tuple[int | object | None, str] = (None, "")
        self.figures = SessionFigures(store)
        self.progress = QProgressBar()
        self.progress.setMinimumWidth(260)
        self.progress.setMaximumWidth(420)
        # The count beside the bar, not on it: a bar's own text is split by its fill, half of it drawn
        # in the fill's colour ("32 / 6" legible, the rest lost in some styles).
        self.progress.setTextVisible(False)
        self.count_label = QLabel()
        self.count_label.setObjectName("count_label")
        self.eta_label = QLabel()
        self.eta_label.setObjectName("eta_label")
        self.eta_label.setMinimumWidth(150)
        pause = QToolButton()
        pause.setDefaultAction(pause_action)
        stop = QToolButton()
        stop.setDefaultAction(stop_action)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.stage_label)
        layout.addWidget(self.figures)
        layout.addSpacing(12)
        layout.addWidget(self.progress)
        layout.addWidget(self.count_label)
        layout.addWidget(self.eta_label)
        layout.addWidget(pause)
        layout.addWidget(stop)

    @property
    def eta_text(self) -> str:
        return self.eta_label.text()

    @property
    def stage(self) -> str:
        """The stage text shown now ("" when none)."""
        return self.stage_label.text() if not self.stage_label.isHidden() else ""

    def set_stage(self, session_id: int | object | None, text: str) -> None:
        """Show what `session_id`'s tuning does besides trials (e.g. "confirming the 3 fastest
        schedule(s) in 3 fresh processes") while that session is shown; "" clears it."""
        text = text.strip()
        if text:
            text = text[0].upper() + text[1:]
            if text[-1] not in ".…!?)":
                text += "…"
        self._stage = (session_id, text)
        self._show_stage()

    def clear_stage(self) -> None:
        self.set_stage(None, "")

    def set_starting(self, text: str) -> None:
        """A note shown whichever session is shown, until `set_stage` or `clear_stage` (what a tuning
        process does before it has a session: it starts, imports TVM, creates the session)."""
        self.set_stage(STARTING, text)

    def _show_stage(self) -> None:
        sid, text = self._stage
        shown = text if (text and (sid is STARTING or (sid is not None and sid == self.session_id))) else ""
        self.stage_label.setText(shown)
        self.stage_label.setVisible(bool(shown))

    def set_session(
        self, session: Any, trials: list | None = None, columns: TrialColumns | None = None
    ) -> None:
        """Show a session (an id, a SessionRecord or None); with the main window's read of its
        trials (`columns` as `Store.trial_columns` gives them, or `trials`), only their last finish
        times are kept for the ETA and nothing is read again."""
        self.session_id = getattr(session, "id", session)
        self._last_id = 0
        self._rounds = {}
        if columns is None and trials:
            columns = columns_of(trials)
        if columns is not None:
            self.add(columns)
        self._show_stage()
        self.refresh(record=session if isinstance(session, SessionRecord) else None)

    def add(self, columns: TrialColumns) -> None:
        """Take newly stored trials (the main window's one read): their finish times for the ETA."""
        if not n_rows(columns):
            return
        c = rows_after(columns, self._last_id)
        if n_rows(c):
            self._last_id = int(c["id"][-1])
            _rounds_of(c, self._rounds)
            for old in sorted(self._rounds)[: -ETA_ROUNDS - 1]:
                del self._rounds[old]

    def eta(self, record: SessionRecord) -> float | None:
        """Seconds left for the record's session at its recent time per trial (None: not known yet)."""
        rounds = [tuple(self._rounds[r]) for r in sorted(self._rounds)]
        return eta_seconds(rounds, record.n_trials, record.trials_budget)  # type: ignore[arg-type]

    @property
    def count(self) -> str:
        return self.count_label.text()

    def refresh(self, pending: str = "", record: SessionRecord | None = None) -> None:
        """Show the session's progress again; `record`, when given, is a fresh read of it (the
        store watcher's), so it is not read again. `pending`: what this window asked its tuning of
        the session for ("pause", "stop", or "" for nothing), said until the session's status shows it."""
        if self.session_id is None:
            self.figures.set_record(None)
            self.label.setText("No session selected.")
            self.progress.setRange(0, 1)
            self.progress.setValue(0)
            self.count_label.setText("")
            self.eta_label.setText("")
            return
        try:
            if record is None or record.id != self.session_id:
                record = self._store.session(self.session_id)
            self.add(self._store.trial_columns(self.session_id, since_id=self._last_id))
        except TunelabError as exc:
            self.label.setText(str(exc))
            return
        self._show(record, pending)

    def _show(self, r: SessionRecord, pending: str) -> None:
        self.progress.setRange(0, max(r.trials_budget, 1))
        self.progress.setValue(min(r.n_trials, r.trials_budget))
        self.count_label.setText(f"{r.n_trials} / {r.trials_budget} trials")
        note, done_when = PENDING_NOTES.get(pending, ("", ()))
        if r.status in done_when:
            note = ""
        text = f"<b>#{r.id} {r.name}</b> · {r.status}"
        if r.n_failed:
            text += f" · {r.n_failed} failed"
        if not note and r.status == "running" and r.n_trials == 0:
            note = "building and measuring the first batch…"  # (the first trial takes a whole batch)
        if note:
            text += f" · <i>{note}</i>"
        self.label.setText(text)
        self.figures.set_record(r)
        if r.status == "running":
            eta = self.eta(r)
            self.eta_label.setText(f"ETA {fmt_duration(eta)}" if eta is not None else "ETA: measuring…")
        else:
            self.eta_label.setText("")

"""Progress of the selected session: trials done of the budget, ETA, and the Pause / Resume / Stop
buttons (enabled when this window is the one tuning it)."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QToolButton, QWidget

from tunelab.app.views.session_figures import SessionFigures
from tunelab.app.widgets.buffers import TrialColumns, columns_of, n_rows, rows_after
from tunelab.app.widgets.formatting import fmt_duration
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store

ETA_WINDOW = 48  # recent trials the rate is taken from
MAX_GAP_S = 600.0  # a longer pause between two trials is a stop (resumed later), not tuning time

# What this window asked its tuning worker for and the session has not done yet: the note said until the
# stored status shows it done (a pause took effect: "paused", no more "pausing after the current batch").
PENDING_NOTES = {
    "pause": ("pausing after the current batch…", ("paused",)),
    "stop": ("stopping after the current batch…", ("cancelled", "finished", "failed", "crashed")),
}


def eta_seconds(finished_at: list[float], done: int, budget: int) -> float | None:
    """Seconds left at the recent rate of trials; None until two trials give a rate."""
    recent = finished_at[-ETA_WINDOW:]
    gaps = [b - a for a, b in zip(recent, recent[1:], strict=False) if 0 <= b - a <= MAX_GAP_S]
    if not gaps or done >= budget:
        return None if done < budget else 0.0
    per_trial = sum(gaps) / len(gaps)
    return per_trial * (budget - done)


class RunBar(QWidget):
    def __init__(
        self, store: Store, pause_action: QAction, stop_action: QAction, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("RunBar")
        self._store = store
        self.session_id: int | None = None
        self._last_id = 0
        self._finished: list[float] = []
        self.label = QLabel("No session selected.")
        self.label.setObjectName("run_label")
        # What the tuning session does besides trials (confirming its winners), while it does it.
        self.stage_label = QLabel()
        self.stage_label.setObjectName("stage_label")
        self.stage_label.setVisible(False)
        self._stage: tuple[int | None, str] = (None, "")
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
    def eta(self) -> str:
        return self.eta_label.text()

    @property
    def stage(self) -> str:
        """The stage text shown now ("" when none)."""
        return self.stage_label.text() if not self.stage_label.isHidden() else ""

    def set_stage(self, session_id: int | None, text: str) -> None:
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

    def _show_stage(self) -> None:
        sid, text = self._stage
        shown = text if (text and sid is not None and sid == self.session_id) else ""
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
        self._finished = []
        if columns is None and trials:
            columns = columns_of(trials)
        if n_rows(columns):
            self._last_id = int(columns["id"][-1])
            self._finished = columns["finished_at"][-ETA_WINDOW:].tolist()
        self._show_stage()
        self.refresh(record=session if isinstance(session, SessionRecord) else None)

    def add(self, columns: TrialColumns) -> None:
        """Take newly stored trials (the main window's one read): their finish times for the ETA."""
        c = rows_after(columns, self._last_id)
        if n_rows(c):
            self._last_id = int(c["id"][-1])
            self._finished.extend(c["finished_at"][-ETA_WINDOW:].tolist())
            del self._finished[:-ETA_WINDOW]

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
        if note:
            text += f" · <i>{note}</i>"
        self.label.setText(text)
        self.figures.set_record(r)
        if r.status == "running":
            eta = eta_seconds(self._finished, r.n_trials, r.trials_budget)
            self.eta_label.setText(f"ETA {fmt_duration(eta)}" if eta is not None else "ETA: measuring…")
        else:
            self.eta_label.setText("")

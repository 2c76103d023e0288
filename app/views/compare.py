"""Compare sessions: best-so-far curves overlaid (vs trial and vs wall time), a summary side by side
with each session's tuner score against random search, and which knobs the best configs set differently."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from tunelab.app import theme
from tunelab.app.widgets.formatting import flatten_config, fmt_gflops, fmt_ms, fmt_shape
from tunelab.app.widgets.log_axis import IntegerAxis, LogAxis
from tunelab.app.widgets.pages import captioned, split
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.app.workers.following import DrawnWhenShown
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord, TrialRecord
from tunelab.core.store import Store
from tunelab.core.usecases.compare_scores import CompareScores, compare_scores
from tunelab.core.usecases.export import StatedBest, stated_best

PALETTE = theme.PALETTE
DIFF_BRUSH = QBrush(QColor(theme.CHANGED_BG))


def best_so_far(store: Store, session_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trial number within the session, from 1; seconds since the first trial started; best latency so
    far) from the first ok trial on.

    A session that tunes several shapes is drawn by its primary shape: the best of different shapes
    mixed into one curve would jump to whichever shape is cheapest, not show tuning progress."""
    c = store.trial_columns(session_id)  # columns: no record (or config) per trial
    if not len(c["id"]):
        return np.empty(0), np.empty(0), np.empty(0)
    t0 = float(c["started_at"].min())
    usable = c["ok"] & np.isfinite(c["latency_ms"])
    tasks = store.tasks(session_id)
    if len(tasks) > 1:
        usable &= (c["task_id"] == tasks[0].id) | (c["task_id"] == -1)
    latency = np.where(usable, c["latency_ms"], np.inf)
    best = np.minimum.accumulate(latency)
    keep = np.isfinite(best)
    return ((c["index"][keep] + 1).astype(np.float64), c["finished_at"][keep] - t0, best[keep])


def summary_rows(
    records: list[SessionRecord],
    best: list[TrialRecord | None] | None = None,
    scores: CompareScores | None = None,
    stated: list[StatedBest | None] | None = None,
) -> list[tuple[str, list[str]]]:
    """The summary table's rows; `best`: the trial each session's stated figure is of (its number within
    the session is shown), `scores`: the sessions' tuner scores, `stated`: each session's one best
    (tunelab.core.export.stated; without it, the sessions' own figures). The speed-up is computed from
    the figures the row above shows."""
    best = best if best is not None else [None] * len(records)
    stated = stated if stated is not None else [None] * len(records)
    shown = [s.ms if s is not None else r.best_ms for r, s in zip(records, stated, strict=True)]
    base = shown[0] if shown else None

    def speedup(ms: float | None) -> str:
        if base is None or ms is None:
            return "—"
        return f"{base / ms:.2f}×"

    def best_text(r: SessionRecord, s: StatedBest | None) -> str:
        return fmt_ms(r.best_ms) if s is None else f"{fmt_ms(s.ms)} {s.mark}"

    return [
        ("Name", [r.name for r in records]),
        ("Status", [r.status for r in records]),
        ("Workload", [f"{r.workload} {r.dtype}" for r in records]),
        ("Shape", [fmt_shape(r.shape) for r in records]),
        ("Target", [json.dumps(r.target, separators=(",", ":")) for r in records]),
        ("Space", [f"{r.space_kind}" for r in records]),
        ("Tuner", [r.tuner for r in records]),
        ("Trials", [f"{r.n_trials} / {r.trials_budget} ({r.n_failed} failed)" for r in records]),
        ("Best ms", [best_text(r, s) for r, s in zip(records, stated, strict=True)]),
        (
            "Best GFLOP/s",
            [
                fmt_gflops(r.best_gflops if s is None else s.gflops)
                for r, s in zip(records, stated, strict=True)
            ],
        ),
        (f"Speed-up vs #{records[0].id}" if records else "Speed-up", [speedup(ms) for ms in shown]),
        # A person counts a session's trials from 1; the store's ids run across every session.
        ("Best trial", ["—" if b is None else f"{b.index + 1}" for b in best]),
        (
            "Score vs random" if scores is None else f"Score vs random ({scores.budget} trials)",
            [score_text(scores, r.id) for r in records],
        ),
    ]


def score_text(scores: CompareScores | None, session_id: int) -> str:
    if scores is None or session_id not in scores.session_ids:
        return "—"
    value = scores.scores[scores.session_ids.index(session_id)]
    text = "—" if value is None else f"{value:+.2f}"
    return f"{text} (reference)" if session_id == scores.reference_id else text


def score_sentence(scores: CompareScores) -> str:
    """The line above the tables saying what the score is, or why there is none."""
    if scores.reason is not None:
        return scores.reason
    return (
        f"Score: mean over the first {scores.budget} trials of P(t) = (random − best so far) / (random − "
        f"optimum), 1 = the optimum at once, 0 = as random search, against {scores.reference}."
    )


def different_spaces(records: list[SessionRecord]) -> bool:
    """True when the best configs cannot be set knob against knob: a template and an auto space."""
    return len({r.space_kind for r in records}) > 1


def config_diff(configs: list[dict[str, Any] | None]) -> list[tuple[str, list[str], bool]]:
    """(knob, value per session, differs) for the union of knobs, in first-seen order."""
    flat = [flatten_config(c) if c is not None else {} for c in configs]
    names: list[str] = []
    for f in flat:
        names.extend(k for k in f if k not in names)
    rows = []
    for name in names:
        values = [json.dumps(f[name], separators=(",", ":")) if name in f else "—" for f in flat]
        rows.append((name, values, len(set(values)) > 1))
    return rows


class CompareView(DrawnWhenShown):
    """Pick sessions in the list (checkboxes); everything on the right follows the checked ones."""

    selection_changed = Signal(list)

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent)
        self._store = store
        self._listed: list[tuple] = []
        self._scores_worker: CallWorker | None = None  # working out the ticked sessions' scores
        self._summary_parts: tuple[list, list, list] = ([], [], [])  # records, best trials, stated bests
        self.session_list = QListWidget()
        self.session_list.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.session_list.itemChanged.connect(self._on_item_changed)
        hint = QLabel("Tick two or more sessions.")
        hint.setProperty("role", "hint")
        left = captioned(hint, self.session_list)

        self._build_curves()
        self._build_tables()
        right = split(Qt.Orientation.Vertical, (self.curves_widget, self.tables), (1, 1), (330, 300))
        splitter = split(Qt.Orientation.Horizontal, (left, right), (0, 1), (300, 900))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter)
        self.refresh_sessions()

    def _build_curves(self) -> None:
        """Best so far vs trial and vs wall time, side by side under one legend."""
        self.curves_widget = pg.GraphicsLayoutWidget()
        self.curves_widget.setBackground("w")
        # The legend is a row of its own above both plots (the sessions are the same in each), where it
        # can never cover a curve.
        self.legend = pg.LegendItem(colCount=2, labelTextColor=theme.TEXT)
        self.curves_widget.addItem(self.legend, row=0, col=0, colspan=2)
        self.by_trial = self.curves_widget.addPlot(
            row=1,
            col=0,
            title="Best so far vs trial",
            axisItems={"left": LogAxis("left"), "bottom": IntegerAxis("bottom")},
        )
        self.by_time = self.curves_widget.addPlot(
            row=1, col=1, title="Best so far vs wall time", axisItems={"left": LogAxis("left")}
        )
        by_time = "Seconds since the first trial began (a curve starts at its first result)"
        for plot, xlabel in ((self.by_trial, "Trial"), (self.by_time, by_time)):
            plot.setLabel("bottom", xlabel)
            plot.setLabel("left", "Best latency (ms)")
            plot.getAxis("left").enableAutoSIPrefix(False)
            plot.setLogMode(y=True)
            plot.showGrid(x=True, y=True, alpha=0.25)
            plot.setDownsampling(mode="peak")
            plot.setClipToView(True)

    def _build_tables(self) -> None:
        """The summary (with the scores) and the best configs' differences, one tab each."""
        self.summary_table = QTableWidget()
        self.diff_table = QTableWidget()
        for table in (self.summary_table, self.diff_table):
            table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
            table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
            table.setAlternatingRowColors(True)
        self.diff_label = QLabel()
        self.diff_label.setProperty("role", "hint")
        self.score_label = QLabel()
        self.score_label.setProperty("role", "hint")
        self.score_label.setWordWrap(True)
        self.tables = QTabWidget()
        self.tables.addTab(captioned(self.score_label, self.summary_table), "Summary")
        self.tables.addTab(captioned(self.diff_label, self.diff_table), "Best configs")

    # ---- public --------------------------------------------------------------------------------
    def exportable(self):
        return self.curves_widget.scene()

    def checked(self) -> list[int]:
        out = []
        for i in range(self.session_list.count()):
            item = self.session_list.item(i)
            if item.checkState() == Qt.CheckState.Checked:
                out.append(int(item.data(Qt.ItemDataRole.UserRole)))
        return out

    def set_checked(self, session_ids: list[int]) -> None:
        wanted = set(session_ids)
        self.session_list.blockSignals(True)
        for i in range(self.session_list.count()):
            item = self.session_list.item(i)
            on = int(item.data(Qt.ItemDataRole.UserRole)) in wanted
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        self.session_list.blockSignals(False)
        self.refresh()

    def refresh_sessions(self, records: list[SessionRecord] | None = None) -> None:
        """Re-read the session list (keeping what is ticked); `records`: the sessions as already
        read (the store watcher's), so they are not read again."""
        if records is None:
            try:
                records = self._store.sessions()
            except TunelabError as exc:
                self.diff_label.setText(str(exc))
                return
        listed = [(r.id, r.name, r.tuner, r.space_kind, r.status, r.n_trials) for r in records]
        if listed == self._listed:
            return
        changed = {row[0] for row in set(listed) ^ set(self._listed)}
        same_sessions = [row[0] for row in listed] == [row[0] for row in self._listed]
        self._listed = listed
        checked = set(self.checked())
        self.session_list.blockSignals(True)
        if same_sessions:  # while one tunes: only its item's text changes (no rebuild, no flicker)
            for i, r in enumerate(records):
                if r.id in changed:
                    item = self.session_list.item(i)
                    item.setText(self._item_text(r))
                    item.setToolTip(self._item_tip(r))
        else:
            self.session_list.clear()
            for r in records:
                item = QListWidgetItem(self._item_text(r))
                item.setToolTip(self._item_tip(r))
                item.setData(Qt.ItemDataRole.UserRole, r.id)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(Qt.CheckState.Checked if r.id in checked else Qt.CheckState.Unchecked)
                self.session_list.addItem(item)
        self.session_list.blockSignals(False)
        if changed & checked:
            self.refresh()  # a ticked session gained trials or changed status

    @staticmethod
    def _item_text(r: SessionRecord) -> str:
        return f"#{r.id} {r.name}\n    {r.tuner} · {r.space_kind} · {r.status} · {r.n_trials} trials"

    @staticmethod
    def _item_tip(r: SessionRecord) -> str:
        return f"#{r.id} {r.name}: {r.tuner}, {r.status}"

    def refresh(self) -> None:
        """Redraw everything for the ticked sessions (after their trials changed); a hidden view
        only notes that it is behind and catches up when shown."""
        self._on_redraw()

    def _draw(self) -> None:
        ids = sorted(self.checked())
        try:
            records = [self._store.session(i) for i in ids]
            curves = [best_so_far(self._store, i) for i in ids]
            stated = [stated_best(self._store, r) for r in records]  # the one best each session states
            best = [self._store.trial(b.trial_id) if b is not None else None for b in stated]
        except TunelabError as exc:
            self.diff_label.setText(str(exc))
            return
        self._draw_curves(records, curves)
        self._summary_parts = (records, best, stated)
        self._fill_summary(records, best, stated, None)
        self._fill_diff(records, [None if b is None else b.config for b in best])
        # The scores replay every ticked session's trials against random search: in a worker.
        worker = CallWorker(self._store.path, compare_scores, records)
        worker.succeeded.connect(self._on_scores)
        worker.failed.connect(self._on_scores_failed)
        self._scores_worker = worker
        keep_alive(worker).start()

    def scores_pending(self) -> bool:
        """Whether the ticked sessions' scores are still being worked out."""
        return self._scores_worker is not None

    def _on_scores(self, scores: CompareScores) -> None:
        if self.sender() is not self._scores_worker:
            return  # for sessions ticked (or trials read) before the last redraw
        self._scores_worker = None
        self._fill_summary(*self._summary_parts, scores)

    def _on_scores_failed(self, message: str, _details: str) -> None:
        if self.sender() is self._scores_worker:
            self._scores_worker = None
            self.score_label.setText(f"No scores: {message}")

    # ---- drawing -------------------------------------------------------------------------------
    def _draw_curves(self, records: list[SessionRecord], curves: list) -> None:
        self.by_trial.clear()
        self.by_time.clear()
        self.legend.clear()
        for i, (r, (x, t, y)) in enumerate(zip(records, curves, strict=True)):
            pen = pg.mkPen(PALETTE[i % len(PALETTE)], width=2.5)
            a = self.by_trial.plot(x, y, pen=pen, stepMode="right")
            b = self.by_time.plot(t, y, pen=pen, stepMode="right")
            self.legend.addItem(a, f"#{r.id} {r.name} ({r.tuner})")
            for curve in (a, b):
                curve.setSkipFiniteCheck(True)

    def _fill_summary(
        self,
        records: list[SessionRecord],
        best: list[TrialRecord | None],
        stated: list[StatedBest | None],
        scores: CompareScores | None,
    ) -> None:
        self.score_label.setText("Score: working it out…" if scores is None else score_sentence(scores))
        rows = summary_rows(records, best, scores, stated)
        self.summary_table.clear()
        self.summary_table.setColumnCount(len(records))
        self.summary_table.setRowCount(len(rows))
        self.summary_table.setHorizontalHeaderLabels([f"#{r.id}" for r in records])
        self.summary_table.setVerticalHeaderLabels([name for name, _ in rows])
        for row, (_, values) in enumerate(rows):
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setToolTip(value)
                self.summary_table.setItem(row, col, item)

    def _fill_diff(self, records: list[SessionRecord], configs: list[dict | None]) -> None:
        if different_spaces(records):
            # Template knobs and MetaSchedule trace decisions share no names: every row would "differ".
            self.diff_table.clear()
            self.diff_table.setRowCount(0)
            self.diff_table.setColumnCount(0)
            kinds = " and ".join(sorted({r.space_kind for r in records}))
            self.diff_label.setText(f"Best configs not comparable: different spaces ({kinds}).")
            return
        rows = config_diff(configs)
        self.diff_table.clear()
        self.diff_table.setColumnCount(len(records))
        self.diff_table.setRowCount(len(rows))
        self.diff_table.setHorizontalHeaderLabels([f"#{r.id}" for r in records])
        self.diff_table.setVerticalHeaderLabels([name for name, _, _ in rows])
        for row, (_, values, differs) in enumerate(rows):
            for col, value in enumerate(values):
                item = QTableWidgetItem(value)
                if differs:
                    item.setBackground(DIFF_BRUSH)
                self.diff_table.setItem(row, col, item)
        n_diff = sum(d for _, _, d in rows)
        if not records:
            self.diff_label.setText("Tick a session to see its best config, two or more to compare them.")
        elif len(records) < 2:
            self.diff_label.setText(
                f"Session #{records[0].id}'s best config ({len(rows)} knobs); tick another session to compare."
            )
        else:
            self.diff_label.setText(
                f"{n_diff} of {len(rows)} knobs differ between the best configs (highlighted)."
            )

    def _on_item_changed(self, _item: QListWidgetItem) -> None:
        self.refresh()
        self.selection_changed.emit(self.checked())

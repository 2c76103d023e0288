"""The cost-model view: predicted vs measured latency, residual per trial, rank correlation per round,
and where the model is wrong (tunelab.core.trust.bias's table: per shape, knob value, tile size, sketch).

Predictions are made before each candidate is measured, so what is shown is out-of-sample. The bias
table can pool several sessions (the ones ticked in Compare, or every session of the workload): their
trials join the scatter in grey, and picking a group highlights its trials in both plots. Under it, when
asked, every registered cost model refit on the session's trials and judged out of sample
(tunelab.app.views.model_table), the one that steered the session marked.

The Model selector picks whose predictions the plots and the bias table judge: the session's own
(stored before each trial was measured), a shadow model's (predicted live beside it without steering),
or any other registered model refit on the session's trials in time order, each round predicted by a
model of the rounds before (tunelab.core.trust.predictions). The others are computed in the bias
report's child process, which returns them as the report's points.

With many trials the predicted-vs-measured scatter becomes a density image (a 2-D histogram in
log-log coordinates) and the per-trial markers are thinned to a stable subset; the summary
(Spearman ρ, median errors) is computed once per change of the data, not per redraw.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from tunelab.app.views.bias_table import BiasTable, ratio_words
from tunelab.app.views.costmodel_models import PAIR_COLUMNS, add_models, model_pairs, round_spearman
from tunelab.app.views.costmodel_plots import SCATTER_CAP, CostModelPlots
from tunelab.app.views.model_table import ModelCompareSection
from tunelab.app.widgets.buffers import GrowingColumns, TrialColumns, columns_of, decimate, n_rows, rows_after
from tunelab.app.widgets.pages import scrolled, split
from tunelab.app.widgets.timers import single_shot
from tunelab.app.workers.engine import BiasWorker, CallWorker, keep_alive
from tunelab.app.workers.following import DrawnWhenShown, read_new
from tunelab.core.errors import TunelabError
from tunelab.core.records import BiasReport
from tunelab.core.store import Store
from tunelab.core.usecases.model_compare import group_stats

REDRAW_MS = 300
BIAS_MS = 2000  # while trials arrive, the bias table is recomputed at most this often


class CostModelView(DrawnWhenShown):
    def __init__(
        self, store: Store, redraw_ms: int = REDRAW_MS, bias_ms: int = BIAS_MS, parent: QWidget | None = None
    ) -> None:
        super().__init__(redraw_ms, parent)
        self._store = store
        self.session_id: int | None = None
        self._last_id = 0
        self._pairs = GrowingColumns("number", "measured", "predicted", "id")
        # Every successful trial, for another model's predictions (which come by trial id).
        self._measured = GrowingColumns("id", "number", "round", "measured")
        self.model: str | None = None  # the model the plots judge; None: the stored predictions
        self._model_pairs: GrowingColumns | None = None  # its (number, measured, predicted, id, round)
        self._model_words = ""
        self._rounds: list = []
        self._compare_ids: list[int] = []
        self._highlighted: set[int] = set()
        self._bias_worker: BiasWorker | None = None
        self._bias_again = False
        self._bias_stale = False
        self._points: dict[int, tuple] = {}
        self._n_highlighted = 0
        self._summary_key: tuple | None = None
        self._summary_text = ""
        self._summary_head = ""
        self._summary_miss = 0.0
        self._overall_worker: CallWorker | None = None  # working out the summary's overall Spearman and bias

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(self._build_header())
        # In a scroll area: the plots keep the height their ticks need, and the window can still be made
        # smaller than plots and table together (it scrolls instead of refusing to shrink).
        layout.addWidget(scrolled(self._build_panes(store)), 1)

        self._bias_timer = single_shot(self, bias_ms, self._request_bias)

    def _build_header(self) -> QHBoxLayout:
        """The summary beside the Model selector."""
        self.summary = QLabel("No session selected.")
        self.summary.setObjectName("costmodel_summary")
        self.summary.setWordWrap(True)
        self.model_box = QComboBox()
        self.model_box.setObjectName("costmodel_model")
        self.model_box.setToolTip(
            "Whose predictions the plots and the bias table judge: the session's own model, a shadow model "
            "(tune --shadow-models), or any other model refit on these trials in time order"
        )
        self.model_box.setEnabled(False)
        self.model_box.currentIndexChanged.connect(self._on_model_changed)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        model_label = QLabel("Model:")
        model_label.setBuddy(self.model_box)
        top.addWidget(model_label)
        top.addWidget(self.model_box)
        return top

    def _build_panes(self, store: Store) -> QSplitter:
        """The plots above the bias table and the models' comparison."""
        # The three plots; their items by the names the rest of the view (and its tests) use.
        self.layout_widget = plots = CostModelPlots()
        self.scatter_plot, self.scatter, self.density = plots.scatter_plot, plots.scatter, plots.density
        self.identity, self.context_scatter, self.highlight = (
            plots.identity,
            plots.context_scatter,
            plots.highlight,
        )
        self.residual_plot, self.residuals = plots.residual_plot, plots.residuals
        self.residual_points, self.residual_highlight = plots.residual_points, plots.residual_highlight
        self.rank_plot, self.rank_bars = plots.rank_plot, plots.rank_bars
        self.scatter_note, self.residual_note, self.rank_note = (
            plots.scatter_note,
            plots.residual_note,
            plots.rank_note,
        )

        self.bias = BiasTable()
        self.bias.group_selected.connect(self._on_group_selected)
        self.bias.scope_changed.connect(self._request_bias)
        # Would another cost model have ranked better: computed when asked, in a child process.
        self.models = ModelCompareSection(store)
        splitter = split(
            Qt.Orientation.Vertical, (self.layout_widget, self.bias, self.models), (3, 2, 1), (440, 240, 160)
        )
        splitter.setChildrenCollapsible(False)
        self.layout_widget.setMinimumHeight(220)  # room for a title, an axis and five ticks
        self.splitter = splitter
        return splitter

    @property
    def n_pairs(self) -> int:
        return len(self._pairs)

    def exportable(self):
        return self.layout_widget.scene()

    def set_session(self, session, trials: list | None = None, columns: TrialColumns | None = None) -> None:
        """Show a session (its id or its SessionRecord; None for none). `columns` (what
        `Store.trial_columns` returns) or `trials` (TrialRecords), when given, are the session's
        trials already read, in id order, so they are not read from the store again."""
        self._redraw_timer.stop()
        session_id = getattr(session, "id", session)
        self.session_id = session_id
        self._last_id = 0
        self._pairs.clear()
        self._measured.clear()
        self._model_pairs = None
        self._rounds = []
        self._highlighted = set()
        self._points = {}
        self._summary_key = None
        self.context_scatter.setData([], [])
        self._fill_models(session_id)
        if columns is None and trials is not None:
            columns = columns_of(trials)
        if columns is not None and session_id is not None:
            try:
                self._rounds = self._store.rounds(session_id)
            except TunelabError as exc:
                self.summary.setText(str(exc))
            self._add(columns)
        else:
            self.poll()
        self._redraw_timer.stop()  # exactly one redraw, now
        self._on_redraw()
        self._request_bias()
        self.models.set_session(session_id)

    def set_compare_sessions(self, session_ids: list[int]) -> None:
        """The sessions ticked in Compare (pooled when the bias scope says so)."""
        self._compare_ids = list(session_ids)
        if self.bias.scope == "compare":
            self._request_bias()

    def bias_session_ids(self) -> list[int]:
        """The sessions the bias table pools under the current scope (the selected one first)."""
        if self.session_id is None:
            return []
        scope = self.bias.scope
        if scope == "compare":
            return [self.session_id] + [i for i in self._compare_ids if i != self.session_id]
        if scope == "workload":
            try:
                mine = self._store.session(self.session_id)
                same = [
                    r.id
                    for r in self._store.sessions()
                    if r.workload == mine.workload and r.custom_source == mine.custom_source
                ]
            except TunelabError:
                return [self.session_id]
            return [self.session_id] + [i for i in sorted(same) if i != self.session_id]
        return [self.session_id]

    @property
    def bias_running(self) -> bool:
        return self._bias_worker is not None

    def poll(self) -> int:
        columns = read_new(self._store, self.session_id, self._last_id, self.summary.setText)
        return 0 if columns is None else self.add(columns)

    def add(self, columns: TrialColumns) -> int:
        """Take newly stored trials of the shown session (the main window reads them once for every
        view); returns how many were new here. The redraw and the bias table follow from timers."""
        if self.session_id is None:
            return 0
        n = n_rows(rows_after(columns, self._last_id))
        try:
            if n or not self._rounds:
                self._rounds = self._store.rounds(self.session_id)
        except TunelabError as exc:
            self.summary.setText(str(exc))
            return 0
        predicted = self._add(columns)
        if n:
            self.models.note_new_trials()
        if n and not self._redraw_timer.isActive():
            self._redraw_timer.start()
        if (predicted or (n and self.model is not None)) and not self._bias_timer.isActive():
            self._bias_timer.start()  # another model's predictions come with the bias report
        return n

    def _add(self, columns: TrialColumns) -> bool:
        """Keep the trials' (measured, predicted) pairs; True when any was added."""
        c = rows_after(columns, self._last_id)
        if not n_rows(c):
            return False
        self._last_id = int(c["id"][-1])
        measured, predicted = c["latency_ms"], c["predicted_ms"]
        with np.errstate(invalid="ignore"):  # NaN (none) compares false
            ok = c["ok"] & np.isfinite(measured) & (measured > 0)
            keep = ok & (predicted > 0)
        self._measured.extend(
            id=c["id"][ok], number=c["number"][ok], round=c["round"][ok], measured=measured[ok]
        )
        if not keep.any():
            return False
        self._pairs.extend(
            number=c["number"][keep], measured=measured[keep], predicted=predicted[keep], id=c["id"][keep]
        )
        return True

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802
        super().showEvent(event)  # draws first, when behind
        if self._bias_stale:
            self._request_bias()

    # ---- bias ----------------------------------------------------------------------------------
    def _request_bias(self) -> None:
        """Recompute the bias table in a worker (one at a time; a request while one runs reruns it)."""
        ids = self.bias_session_ids()
        if not ids:
            self.bias.show_message("No session selected.")
            return
        if not self.isVisible():
            self._bias_stale = True
            return
        self._bias_stale = False
        if self._bias_worker is not None:
            self._bias_again = True
            return
        shown = self.bias.report
        if shown is None or list(shown.session_ids) != ids:  # what is shown is about other sessions
            self.bias.show_message("Working out where the cost model is wrong…")
        worker = BiasWorker(self._store.path, ids, self.bias.k, self.model)
        worker.succeeded.connect(self._on_bias_done)
        worker.failed.connect(self._on_bias_failed)
        worker.finished.connect(self._on_bias_finished)
        self._bias_worker = keep_alive(worker)
        self.bias.set_busy(True)
        worker.start()

    def _on_bias_done(self, report: BiasReport) -> None:
        if self._bias_again or self.session_id is None:
            return  # stale: the rerun replaces it
        if self.model is not None:
            self._take_model_points(report)
        if not report.n:
            self.bias.show_message(
                "<b>Where the model is wrong</b>: nothing to judge yet — no successful trial has a prediction "
                f"({report.counts.trials} trials; the model predicts from the second round on)."
            )
        else:
            self.bias.set_report(report)
        self._draw_context(report)

    def _on_bias_failed(self, message: str, _details: str) -> None:
        if not self._bias_again:
            self.bias.show_message(f"<b>Where the model is wrong</b>: cannot compute it: {message}")
            if self.model is not None and self._model_pairs is None:
                self.scatter_note.show(f"{self.model}: cannot predict: {message}")
                self.residual_note.show(f"{self.model}: cannot predict")

    def _on_bias_finished(self) -> None:
        self._bias_worker = None
        self.bias.set_busy(False)
        if self._bias_again:
            self._bias_again = False
            self._request_bias()

    def _draw_context(self, report: BiasReport) -> None:
        self._points = report.points or {}
        others = [(m, p) for sid, m, p, _ in self._points.values() if sid != self.session_id]
        if len(others) > SCATTER_CAP:
            others = [others[i] for i in decimate(np.arange(len(others)), SCATTER_CAP)]
        self.context_scatter.setData([m for m, _ in others], [p for _, p in others])
        self._draw_highlight()

    def _on_group_selected(self, trial_ids: list) -> None:
        self._highlighted = set(trial_ids)
        self._draw_highlight()

    @property
    def n_highlighted(self) -> int:
        """The picked group's trials in the scatter (all of them, also when fewer are drawn)."""
        return self._n_highlighted

    def _draw_highlight(self) -> None:
        hits = [self._points[t] for t in sorted(self._highlighted) if t in self._points]
        self._n_highlighted = len(hits)
        if len(hits) > SCATTER_CAP:
            hits = [hits[i] for i in decimate(np.arange(len(hits)), SCATTER_CAP)]
        self.highlight.setData([m for _, m, _, _ in hits], [p for _, _, p, _ in hits])
        if not self._highlighted:
            self.residual_highlight.setData([], [])
            return
        pairs = self._shown()
        ids = pairs.col("id")
        rows = np.flatnonzero(np.isin(ids, np.fromiter(self._highlighted, dtype=np.float64)))
        if len(rows) > SCATTER_CAP:
            rows = rows[decimate(np.arange(len(rows)), SCATTER_CAP)]
        measured, predicted = pairs.col("measured")[rows], pairs.col("predicted")[rows]
        self.residual_highlight.setData(pairs.col("number")[rows], 100.0 * (predicted - measured) / measured)

    def _draw(self) -> None:
        pairs = self._shown()
        measured, predicted = pairs.col("measured"), pairs.col("predicted")
        index = pairs.col("number")
        n = len(measured)
        residual = 100.0 * (predicted - measured) / measured if n else np.empty(0)
        self.layout_widget.draw_pairs(index, measured, predicted, residual)
        self._draw_highlight()
        rounds = self._round_spearman()
        self.layout_widget.draw_rounds(rounds, [r.round for r in self._rounds])
        self._show_notes(n, len(rounds))
        self._update_summary(residual)

    def _show_notes(self, n_pairs: int, n_rounds: int) -> None:
        """Say why a plot is empty (a blank panel looked broken)."""
        if n_pairs:
            self.scatter_note.hide()
            self.residual_note.hide()
        else:
            if self.session_id is None:
                why = "No session selected."
            elif self.model is not None and self._model_pairs is None:
                why = f"Working out {self.model}'s predictions…"
            else:
                why = "No predictions yet"
            self.scatter_note.show(why)
            self.residual_note.show(why)
        if n_rounds:
            self.rank_note.hide()
        else:
            self.rank_note.show(
                "No session selected."
                if self.session_id is None
                else "No rank correlation yet: one per round the model predicted"
            )

    def _update_summary(self, residual: np.ndarray) -> None:
        if self.session_id is None:
            self.summary.setText("No session selected.")
            return
        pairs = self._shown()
        n = len(pairs)
        whose = "" if self.model is None else f" · model <b>{self.model}</b> ({self._model_words})"
        if n == 0:
            self.summary.setText(
                f"<b>Session {self.session_id}</b>{whose} · no predictions yet: the cost model "
                "predicts once enough trials are measured to train it (from the second round on)."
            )
            return
        key = (self.session_id, n, self._last_id, self.model)
        if key != self._summary_key:  # Spearman and the medians only when the data changed
            # Spearman and the bias as the table's "overall" row says them (the geometric mean of
            # predicted ÷ measured), computed where the bias report computes them, in a worker; the bias
            # in words: a signed "+3 %" beside "1.06× too fast" read as a contradiction.
            self._summary_key = key
            self._summary_head = (
                f"<b>Session {self.session_id}</b>{whose} · {n} trials predicted before they were measured · "
            )
            self._summary_miss = float(np.median(np.abs(residual)))
            self._summary_text = self._summary_words(None)
            worker = CallWorker(
                None, group_stats, pairs.col("predicted").copy(), pairs.col("measured").copy()
            )
            worker.succeeded.connect(self._on_overall)
            self._overall_worker = worker
            keep_alive(worker).start()
        self.summary.setText(self._summary_text)

    def _summary_words(self, overall: Any) -> str:
        if overall is None:
            tail = "Spearman ρ overall … (working it out)"
        else:
            rho = "—" if overall.spearman is None else f"{overall.spearman:.2f}"
            tail = f"Spearman ρ overall {rho}"
        text = f"{self._summary_head}{tail} · typical miss {self._summary_miss:.0f}% (median |error|)"
        return (
            text if overall is None else f"{text} · the model guesses {ratio_words(overall.ratio)} on average"
        )

    def _on_overall(self, overall: Any) -> None:
        if self.sender() is not self._overall_worker:
            return  # for data since replaced
        self._overall_worker = None
        self._summary_text = self._summary_words(overall)
        self.summary.setText(self._summary_text)

    # ---- which model's predictions -----------------------------------------------------------
    def _fill_models(self, session_id: int | None) -> None:
        """The selector's models for a session: its own first, then its shadow models, then the rest."""
        self.model = None
        self._model_words = ""
        self.model_box.blockSignals(True)
        self.model_box.clear()
        record = None
        if session_id is not None:
            try:
                record = self._store.session(session_id)
            except TunelabError:
                record = None
        if record is None:
            self.model_box.setEnabled(False)
            self.model_box.blockSignals(False)
            return
        add_models(self.model_box, record)
        self.model_box.setCurrentIndex(0)
        self.model_box.setEnabled(True)
        self.model_box.blockSignals(False)

    def select_model(self, name: str | None) -> None:
        """Show model `name`'s predictions (None or the session's own model: the stored ones)."""
        index = self.model_box.findData(name)
        self.model_box.setCurrentIndex(max(index, 0))

    def _on_model_changed(self, index: int) -> None:
        self.model = self.model_box.itemData(index) if index >= 0 else None
        self._model_words = self.model_box.itemText(index).split(" — ", 1)[-1] if self.model else ""
        self._model_pairs = None
        self._highlighted = set()
        self._summary_key = None
        self._on_redraw()
        self._request_bias()

    def _shown(self) -> GrowingColumns:
        """The (number, measured, predicted, id) pairs the plots draw: the selected model's."""
        if self.model is None:
            return self._pairs
        return self._model_pairs if self._model_pairs is not None else GrowingColumns(*PAIR_COLUMNS)

    def _take_model_points(self, report: BiasReport) -> None:
        """The selected model's predictions of this session's trials, from its bias report's points."""
        if report.model != self.model:
            return
        self._model_pairs = model_pairs(report, self.session_id, self._measured)
        self._summary_key = None
        self._on_redraw()

    def _round_spearman(self) -> list[tuple[int, float]]:
        """(round, ρ) of every round the shown model predicted, in round order."""
        if self.model is None:
            return [
                (r.round, r.spearman)
                for r in self._rounds
                if r.spearman is not None and math.isfinite(r.spearman)
            ]
        if self._model_pairs is None:
            return []
        return round_spearman(self._model_pairs)

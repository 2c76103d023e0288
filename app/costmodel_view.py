"""The cost-model view: predicted vs measured latency, residual per trial, rank correlation per round.

Predictions are made before each candidate is measured, so what is shown is out-of-sample.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.buffers import GrowingColumns
from app.log_axis import log_axes
from core.costmodel import spearman
from core.errors import TunelabError
from core.store import Store

REDRAW_MS = 300
POINT_BRUSH = (42, 111, 219, 170)


class CostModelView(QWidget):
    def __init__(self, store: Store, redraw_ms: int = REDRAW_MS, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self.session_id: int | None = None
        self._last_id = 0
        self._pairs = GrowingColumns("index", "measured", "predicted")
        self._rounds: list = []

        self.summary = QLabel("No session selected.")
        self.summary.setObjectName("costmodel_summary")
        self.summary.setWordWrap(True)
        self.layout_widget = pg.GraphicsLayoutWidget()
        self.layout_widget.setBackground("w")

        self.scatter_plot = self.layout_widget.addPlot(row=0, col=0, rowspan=2, title="Predicted vs measured (ms)",
                                                       axisItems=log_axes("bottom", "left"))
        self.scatter_plot.setLabel("bottom", "Measured (ms)")
        self.scatter_plot.setLabel("left", "Predicted (ms)")
        self.scatter_plot.setLogMode(x=True, y=True)
        for side in ("bottom", "left"):
            self.scatter_plot.getAxis(side).enableAutoSIPrefix(False)
        self.scatter_plot.showGrid(x=True, y=True, alpha=0.25)
        self.scatter = self.scatter_plot.plot(pen=None, symbol="o", symbolSize=7, symbolPen=None,
                                              symbolBrush=POINT_BRUSH)
        # In log-log coordinates y = x is still the 45-degree line through the origin.
        self.identity = pg.InfiniteLine(pos=(0, 0), angle=45, pen=pg.mkPen("#5f6368", style=Qt.PenStyle.DashLine))
        self.scatter_plot.addItem(self.identity, ignoreBounds=True)

        self.residual_plot = self.layout_widget.addPlot(row=0, col=1, title="Prediction error per trial: (predicted − measured) / measured")
        self.residual_plot.setLabel("bottom", "Trial")
        self.residual_plot.setLabel("left", "Error (%)")
        self.residual_plot.getAxis("left").enableAutoSIPrefix(False)
        self.residual_plot.showGrid(x=True, y=True, alpha=0.25)
        self.residual_plot.addItem(pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen("#5f6368")), ignoreBounds=True)
        self.residual_plot.setDownsampling(mode="peak")
        self.residual_plot.setClipToView(True)
        self.residuals = self.residual_plot.plot(pen=pg.mkPen((42, 111, 219, 90)), symbol="o", symbolSize=5,
                                                 symbolPen=None, symbolBrush=POINT_BRUSH)

        self.rank_plot = self.layout_widget.addPlot(row=1, col=1, title="Rank correlation per round (Spearman ρ)")
        self.rank_plot.setLabel("bottom", "Round")
        self.rank_plot.setLabel("left", "ρ")
        self.rank_plot.setYRange(-1.05, 1.05)
        self.rank_plot.showGrid(x=False, y=True, alpha=0.25)
        self.rank_plot.addItem(pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen("#5f6368")), ignoreBounds=True)
        self.rank_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brush="#1e8e3e")
        self.rank_plot.addItem(self.rank_bars)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addWidget(self.layout_widget, 1)

        self._stale = False
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(redraw_ms)
        self._redraw_timer.timeout.connect(self._on_redraw)

    @property
    def n_pairs(self) -> int:
        return len(self._pairs)

    def exportable(self):
        return self.layout_widget.scene()

    def set_session(self, session_id: int | None) -> None:
        self.session_id = session_id
        self._last_id = 0
        self._pairs.clear()
        self._rounds = []
        self.poll()
        self._on_redraw()

    def poll(self) -> int:
        if self.session_id is None:
            return 0
        try:
            trials = self._store.trials(self.session_id, since_id=self._last_id)
            if trials or not self._rounds:
                self._rounds = self._store.rounds(self.session_id)
        except TunelabError as exc:
            self.summary.setText(str(exc))
            return 0
        for t in trials:
            if t.ok and t.predicted_ms is not None and t.latency_ms and t.predicted_ms > 0:
                self._pairs.append(index=t.index, measured=t.latency_ms, predicted=t.predicted_ms)
            self._last_id = t.id
        if trials and not self._redraw_timer.isActive():
            self._redraw_timer.start()
        return len(trials)

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if self._stale:
            self._on_redraw()

    def _on_redraw(self) -> None:
        # A hidden view only remembers that it is behind: drawing is the GUI thread's one real cost.
        if not self.isVisible():
            self._stale = True
            return
        self._stale = False
        measured, predicted = self._pairs.col("measured"), self._pairs.col("predicted")
        self.scatter.setData(measured, predicted)
        residual = 100.0 * (predicted - measured) / measured if len(measured) else np.empty(0)
        self.residuals.setData(self._pairs.col("index"), residual)
        rounds = [r for r in self._rounds if r.spearman is not None and math.isfinite(r.spearman)]
        self.rank_bars.setOpts(x=[r.round for r in rounds], height=[r.spearman for r in rounds], width=0.7)
        if len(rounds):
            self.rank_plot.setXRange(min(r.round for r in rounds) - 0.7, max(r.round for r in rounds) + 0.7)
            step = max(1, len(self._rounds) // 12)
            ticks = [(r.round, str(r.round)) for r in self._rounds[::step]]
            self.rank_plot.getAxis("bottom").setTicks([ticks, []])
        self._update_summary(residual)

    def _update_summary(self, residual: np.ndarray) -> None:
        if self.session_id is None:
            self.summary.setText("No session selected.")
            return
        n = len(self._pairs)
        if n == 0:
            self.summary.setText(f"<b>Session {self.session_id}</b> · no predictions yet: the cost model "
                                 "predicts once enough trials are measured to train it (from the second round on).")
            return
        rho = spearman(list(self._pairs.col("predicted")), list(self._pairs.col("measured")))
        rho_text = "—" if rho is None else f"{rho:.2f}"
        self.summary.setText(
            f"<b>Session {self.session_id}</b> · {n} trials predicted before they were measured · "
            f"Spearman ρ overall {rho_text} · median |error| {float(np.median(np.abs(residual))):.0f}% · "
            f"bias (median error) {float(np.median(residual)):+.0f}%")

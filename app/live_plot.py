"""The live view: each trial's latency, failed trials marked, the best so far and its GFLOP/s.

It follows one session through the store (`trials(id, since_id=last)`), so a session tuned by
another process updates it just as this window's own worker does. New trials go into growing
NumPy buffers; the curves are redrawn from a timer, never once per trial.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.buffers import GrowingColumns
from app.formatting import fmt_gflops, fmt_ms, gflops
from app.log_axis import log_axes
from core.errors import TunelabError
from core.store import Store

REDRAW_MS = 200
OK_BRUSH = (42, 111, 219, 170)
FAILED_PEN = "#d93025"
BEST_PEN = "#1e8e3e"
GFLOPS_PEN = "#e37400"


class LivePlot(QWidget):
    """Latency vs trial for the session given to `set_session`; call `poll()` when the store changed."""

    trial_clicked = Signal(int)  # a trial id
    failed = Signal(str)

    def __init__(self, store: Store, redraw_ms: int = REDRAW_MS, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self.session_id: int | None = None
        self._flops = 0.0
        self._last_id = 0
        self._ok = GrowingColumns("index", "latency", "id")
        self._failed = GrowingColumns("index", "id")
        self._best = GrowingColumns("index", "latency", "gflops")
        self._best_ms: float | None = None
        self._best_index: int | None = None
        self.redraws = 0

        pg.setConfigOptions(antialias=True)
        self.plot_widget = pg.PlotWidget(background="w", axisItems=log_axes("left"))
        self.plot_item = item = self.plot_widget.getPlotItem()
        item.setDownsampling(mode="peak")
        item.setClipToView(True)
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLabel("bottom", "Trial")
        item.setLabel("left", "Latency (ms)")
        item.getAxis("left").enableAutoSIPrefix(False)
        self.legend = item.addLegend(offset=(-10, 10), labelTextColor="#202124", brush=(255, 255, 255, 210))

        self.ok_curve = item.plot(pen=None, symbol="o", symbolSize=7, symbolPen=None, symbolBrush=OK_BRUSH,
                                  name="trial latency")
        self.failed_curve = item.plot(pen=None, symbol="x", symbolSize=11, symbolPen=pg.mkPen(FAILED_PEN, width=2),
                                      symbolBrush=FAILED_PEN, name="failed trial")
        self.best_curve = item.plot(pen=pg.mkPen(BEST_PEN, width=2.5), stepMode="right", name="best so far")
        for curve in (self.ok_curve, self.failed_curve, self.best_curve):
            curve.setSkipFiniteCheck(True)
        self.ok_curve.sigPointsClicked.connect(self._on_points_clicked)
        self.failed_curve.sigPointsClicked.connect(self._on_points_clicked)

        # GFLOP/s on its own (linear) axis at the right, sharing the trial axis.
        self.gflops_view = pg.ViewBox()
        item.showAxis("right")
        item.scene().addItem(self.gflops_view)
        right = item.getAxis("right")
        right.linkToView(self.gflops_view)
        right.setLabel("Best GFLOP/s", color=GFLOPS_PEN)
        right.enableAutoSIPrefix(False)
        self.gflops_view.setXLink(item)
        self.gflops_curve = pg.PlotDataItem(pen=pg.mkPen(GFLOPS_PEN, width=2, style=Qt.PenStyle.DashLine),
                                            stepMode="right")
        self.gflops_curve.setSkipFiniteCheck(True)
        self.gflops_view.addItem(self.gflops_curve)
        self.legend.addItem(self.gflops_curve, "best GFLOP/s (right axis)")
        item.vb.sigResized.connect(self._sync_views)
        self._set_log(True)

        self.title = QLabel("No session selected.")
        self.title.setObjectName("live_title")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.log_check = QCheckBox("Log latency axis")
        self.log_check.setChecked(True)
        self.log_check.toggled.connect(self._on_log_toggled)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.log_check)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.plot_widget, 1)

        self._stale = False
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(redraw_ms)
        self._redraw_timer.timeout.connect(self._on_redraw)

    # ---- public --------------------------------------------------------------------------------
    @property
    def n_trials(self) -> int:
        return len(self._ok) + len(self._failed)

    @property
    def n_failed(self) -> int:
        return len(self._failed)

    def exportable(self):
        return self.plot_widget.scene()

    def set_session(self, session_id: int | None) -> None:
        self.session_id = session_id
        self._last_id = 0
        for columns in (self._ok, self._failed, self._best):
            columns.clear()
        self._best_ms = self._best_index = None
        self._flops = 0.0
        if session_id is not None:
            try:
                self._flops = self._store.session(session_id).flops
            except TunelabError as exc:
                self.failed.emit(str(exc))
                self.session_id = None
        self.poll()
        self._on_redraw()

    def poll(self) -> int:
        """Read the followed session's trials stored since the last poll; returns how many."""
        if self.session_id is None:
            return 0
        try:
            trials = self._store.trials(self.session_id, since_id=self._last_id)
        except TunelabError as exc:
            self.failed.emit(str(exc))
            return 0
        for t in trials:
            if t.ok and t.latency_ms is not None and t.latency_ms > 0:
                self._ok.append(index=t.index, latency=t.latency_ms, id=t.id)
                if self._best_ms is None or t.latency_ms < self._best_ms:
                    self._best_ms, self._best_index = t.latency_ms, t.index
            else:
                self._failed.append(index=t.index, id=t.id)
            if self._best_ms is not None:
                self._best.append(index=t.index, latency=self._best_ms,
                                  gflops=gflops(self._flops, self._best_ms) or math.nan)
            self._last_id = t.id
        if trials:
            if not self._redraw_timer.isActive():
                self._redraw_timer.start()
        return len(trials)

    # ---- drawing -------------------------------------------------------------------------------
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
        self.redraws += 1
        ok_x, ok_y = self._ok.col("index"), self._ok.col("latency")
        self.ok_curve.setData(ok_x, ok_y)
        self.best_curve.setData(self._best.col("index"), self._best.col("latency"))
        self.gflops_curve.setData(self._best.col("index"), self._best.col("gflops"))
        failed_x = self._failed.col("index")
        if len(failed_x):
            top = float(ok_y.max()) * 1.6 if len(ok_y) else 1.0
            self.failed_curve.setData(failed_x, np.full(len(failed_x), top))
        else:
            self.failed_curve.setData([], [])
        self._update_title()

    def _update_title(self) -> None:
        if self.session_id is None:
            self.title.setText("No session selected.")
            return
        text = f"<b>Session {self.session_id}</b> · {self.n_trials} trials"
        if self.n_failed:
            text += f", <span style='color:{FAILED_PEN}'>{self.n_failed} failed (✕ at the top)</span>"
        if self._best_ms is not None:
            text += (f" · best {fmt_ms(self._best_ms)} ms = {fmt_gflops(gflops(self._flops, self._best_ms))} GFLOP/s"
                     f" at trial {self._best_index}")
        elif self.n_trials == 0:
            text += " · waiting for the first trial…"
        self.title.setText(text)

    def _sync_views(self) -> None:
        self.gflops_view.setGeometry(self.plot_item.vb.sceneBoundingRect())
        self.gflops_view.linkedViewChanged(self.plot_item.vb, self.gflops_view.XAxis)

    def _set_log(self, on: bool) -> None:
        self.plot_item.setLogMode(y=on)
        # PlotItem.setLogMode switches every axis; the GFLOP/s axis belongs to its own linear view.
        self.plot_item.getAxis("right").setLogMode(False, False)

    def _on_log_toggled(self, on: bool) -> None:
        self._set_log(on)
        self._on_redraw()

    def _on_points_clicked(self, _item, points, *_: object) -> None:
        if not len(points):
            return
        index = int(round(points[0].pos().x()))
        for columns in (self._ok, self._failed):
            hits = np.nonzero(columns.col("index") == index)[0]
            if len(hits):
                self.trial_clicked.emit(int(columns.col("id")[hits[0]]))
                return

"""The Hardware view: what the GPU (and CPU) did during the session, aligned with its trials.

Telemetry comes through app.telemetry_source; without any (no sampler ran, no NVIDIA GPU) the view
says so plainly instead of showing empty axes.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QStackedWidget, QVBoxLayout, QWidget

from app.buffers import GrowingColumns
from app.log_axis import log_axes
from app.telemetry_source import FIELDS, PANELS, is_throttled, machine_gpu_status, read_samples
from core.errors import TunelabError
from core.store import Store

REDRAW_MS = 500
LIMIT = "#d93025"
THROTTLE_BRUSH = (217, 48, 37, 50)
SERIES_PENS = ("#2a6fdb", "#e37400", "#1e8e3e")


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index ranges where flags is true."""
    if not len(flags):
        return []
    padded = np.concatenate([[0], flags.astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2], strict=True))


class HardwareView(QWidget):
    def __init__(self, store: Store, redraw_ms: int = REDRAW_MS, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self.session_id: int | None = None
        self._t0 = 0.0
        self._last_t = 0.0
        self._last_trial_id = 0
        self._samples = GrowingColumns("t", "throttled", *FIELDS)
        self._trials = GrowingColumns("t", "latency")
        self._plots: dict[str, pg.PlotItem] = {}
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._regions: list[pg.LinearRegionItem] = []
        self.telemetry_supported = True

        self.status = QLabel()
        self.status.setObjectName("hardware_status")
        self.status.setWordWrap(True)
        self.empty = QLabel()
        self.empty.setObjectName("hardware_empty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet("font-size: 15px; color: #5f6368; padding: 40px;")
        self.layout_widget = pg.GraphicsLayoutWidget()
        self.layout_widget.setBackground("w")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.layout_widget)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.status)
        layout.addWidget(self.stack, 1)

        self.trial_plot = self._add_plot("trials", "Latency (ms)")
        self.trial_plot.setLogMode(y=True)
        self.trial_curve = self.trial_plot.plot(pen=None, symbol="o", symbolSize=5, symbolPen=None,
                                                symbolBrush=(42, 111, 219, 170))

        self._stale = False
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(redraw_ms)
        self._redraw_timer.timeout.connect(self._on_redraw)
        self._update_status()

    @property
    def n_samples(self) -> int:
        return len(self._samples)

    def exportable(self):
        return self.layout_widget.scene()

    def set_session(self, session_id: int | None) -> None:
        self.session_id = session_id
        self._samples.clear()
        self._trials.clear()
        self._last_t = 0.0
        self._last_trial_id = 0
        self._t0 = 0.0
        if session_id is not None:
            try:
                self._t0 = self._store.session(session_id).created_at
            except TunelabError as exc:
                self.status.setText(str(exc))
                self.session_id = None
        self.poll()
        self._on_redraw()

    def poll(self) -> int:
        if self.session_id is None:
            return 0
        try:
            samples = read_samples(self._store, self.session_id, self._last_t)
            trials = self._store.trials(self.session_id, since_id=self._last_trial_id)
        except TunelabError as exc:
            self.status.setText(str(exc))
            return 0
        self.telemetry_supported = samples is not None
        for s in samples or ():
            values = {f: (math.nan if (v := getattr(s, f, None)) is None else float(v)) for f in FIELDS}
            self._samples.append(t=s.t - self._t0, throttled=float(is_throttled(s)), **values)
            self._last_t = s.t
        for t in trials:
            self._trials.append(t=t.finished_at - self._t0,
                                latency=t.latency_ms if t.ok and t.latency_ms else math.nan)
            self._last_trial_id = t.id
        if (samples or trials) and not self._redraw_timer.isActive():
            self._redraw_timer.start()
        return len(samples or ())

    # ---- drawing -------------------------------------------------------------------------------
    def _add_plot(self, key: str, title: str) -> pg.PlotItem:
        """One panel per row, all sharing the time axis of the first (the trials)."""
        row = len(self._plots)
        plot = self.layout_widget.addPlot(row=row, col=0, axisItems=log_axes("left"))
        plot.setLabel("left", title)
        plot.getAxis("left").setWidth(70)
        plot.showGrid(x=True, y=True, alpha=0.25)
        plot.setDownsampling(mode="peak")
        plot.setClipToView(True)
        if self._plots:
            plot.setXLink(next(iter(self._plots.values())))
        for other in self._plots.values():
            other.getAxis("bottom").setLabel("")
        plot.setLabel("bottom", "Seconds since the session was created")
        self._plots[key] = plot
        return plot

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
        self._update_status()
        if len(self._samples) == 0:
            self.stack.setCurrentWidget(self.empty)
            return
        self.stack.setCurrentWidget(self.layout_widget)
        t = self._samples.col("t")
        for key, title, series in PANELS:
            drawn = [(f, name) for f, name in series if np.isfinite(self._samples.col(f)).any()]
            if not drawn:
                continue
            if key not in self._plots:
                plot = self._add_plot(key, title)
                if len(series) > 1:
                    plot.addLegend(offset=(-10, 5), labelTextColor="#202124", brush=(255, 255, 255, 200))
            plot = self._plots[key]
            for i, (field, name) in enumerate(drawn):
                if field not in self._curves:
                    limit = field.endswith("_limit_w")
                    pen = pg.mkPen(LIMIT, width=1, style=Qt.PenStyle.DashLine) if limit else \
                        pg.mkPen(SERIES_PENS[i % len(SERIES_PENS)], width=1.5)
                    self._curves[field] = plot.plot(pen=pen, connect="finite", name=name)
                self._curves[field].setData(t, self._samples.col(field))
        self.trial_curve.setData(self._trials.col("t"), self._trials.col("latency"))
        self._draw_throttling(t)

    def _draw_throttling(self, t: np.ndarray) -> None:
        for region in self._regions:
            view = region.getViewBox()
            if view is not None:
                view.removeItem(region)
        self._regions = []
        runs = _runs(self._samples.col("throttled") > 0)
        for start, end in runs[:200]:
            span = (float(t[start]), float(t[min(end, len(t) - 1)]))
            for key, plot in self._plots.items():
                if key == "trials":
                    continue
                region = pg.LinearRegionItem(values=span, movable=False, brush=THROTTLE_BRUSH, pen=pg.mkPen(None))
                region.setZValue(-10)
                plot.addItem(region)
                self._regions.append(region)

    def _update_status(self) -> None:
        has_gpu, gpu_status = machine_gpu_status()
        machine = f"This machine: {gpu_status}."
        if self.session_id is None:
            self.status.setText(machine)
            self.empty.setText("No session selected.")
            return
        if not self.telemetry_supported:
            self.empty.setText("This store keeps no telemetry (an older tunelab wrote it).")
        elif len(self._samples) == 0:
            cpu_only = "" if has_gpu else "\nNo NVIDIA GPU here: CPU only."
            self.empty.setText(f"No telemetry recorded for session {self.session_id}.{cpu_only}")
        throttled = int(self._samples.col("throttled").sum()) if len(self._samples) else 0
        text = f"<b>Session {self.session_id}</b> · {len(self._samples)} telemetry samples · {machine}"
        if throttled:
            text += f" · <span style='color:{LIMIT}'>throttled in {throttled} samples (shaded)</span>"
        self.status.setText(text)

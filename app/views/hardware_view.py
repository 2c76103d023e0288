"""The Hardware view: what the GPU (and CPU) did during the session, aligned with its trials.

Telemetry comes through tunelab.app.workers.telemetry_source; without any (no sampler ran, no NVIDIA GPU) the view
says so plainly instead of showing empty axes.

Trials measured while the machine was not quiet (another process busy on the CPU or using the GPU,
the GPU throttled: each trial's telemetry stamp says so) are shaded on the time axis and ringed in
the trials panel, with tooltips naming the cause and the pids, and listed under the plots.

Trials measured on RPC servers (a session through a TVM RPC tracker) ran their kernels elsewhere, while
the telemetry is read here: a note over the plots says so and names the servers, and the list of
trials names the device of each.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QStackedWidget, QVBoxLayout, QWidget

from tunelab.app import theme
from tunelab.app.views.hardware_disturbed import (
    DISTURBED,
    DisturbedTable,
    disturbed_spans,
    disturbed_trials,
    disturbed_words,
    remote_note,
)
from tunelab.app.views.hardware_panels import PANEL_MIN_H, add_panel, min_span, shade_throttling
from tunelab.app.widgets.buffers import GrowingColumns, TrialColumns, columns_of, n_rows, rows_after
from tunelab.app.widgets.pages import scrolled, split
from tunelab.app.widgets.plot_zoom import reset_button
from tunelab.app.widgets.timers import single_shot
from tunelab.app.workers.following import DrawnWhenShown
from tunelab.app.workers.telemetry_source import (
    FIELDS,
    PANELS,
    ask_gpu_status,
    gpu_status_known,
    is_throttled,
    machine_gpu_status,
    read_samples,
    read_trial_stamps,
)
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store

REDRAW_MS = 500
LIMIT = theme.ERROR
SERIES_PENS = theme.PALETTE[:3]
STAMPS_MS = 3000  # while trials arrive, the per-trial stamps are re-read at most this often
REMOTE_NOTE_STYLE = (
    f"color: {theme.WARN_DARK}; background: {theme.WARN_BG}; "
    f"border: 1px solid {theme.WARN_BORDER}; padding: 4px;"
)


class HardwareView(DrawnWhenShown):
    def __init__(self, store: Store, redraw_ms: int = REDRAW_MS, parent: QWidget | None = None) -> None:
        super().__init__(redraw_ms, parent)
        self._store = store
        self.session_id: int | None = None
        self._t0 = 0.0
        self._last_t = 0.0
        self._last_trial_id = 0
        self._samples = GrowingColumns("t", "throttled", *FIELDS)
        # One row per trial in id order: "t" (= "end") and "start" in seconds since the session was
        # created, latency NaN when it failed. Ids ascend, so a trial's row is a binary search.
        self._trials = GrowingColumns("id", "index", "number", "start", "t", "latency")
        self._plots: dict[str, pg.PlotItem] = {}
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._regions: list[pg.LinearRegionItem] = []
        self._trial_regions: list[pg.LinearRegionItem] = []
        self._stamps_dirty = False
        self._stamps_at = -1e9
        self.disturbed: list[dict] = []  # one entry per trial measured on a machine that was not quiet
        self._devices: dict[int, str] = {}  # trial id -> the RPC server that measured it (none: here)
        self._tracker = ""  # the session's RPC tracker, "" when it measured here
        self._note: tuple[tuple[int, int, str], str] = ((0, 0, ""), "")  # remote_note(), by what it counted

        self._build_labels()
        splitter = self._build_panes()
        self.reset_button = reset_button(self.reset_view)
        top = QHBoxLayout()
        top.addWidget(self.status, 1)
        top.addWidget(self.reset_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.remote_label)
        layout.addWidget(self.disturbed_label)
        layout.addWidget(splitter, 1)

        ask_gpu_status().known.connect(self._update_status)  # this machine's GPU: asked of NVML in a worker
        self._x_min = 0.0  # the time axis' lower limit: the earliest reading, and never below 0 otherwise
        # The time axis shows every reading and trial until a person zooms or pans (then it stays put).
        self._follow = True
        self._make_trial_plot()

        self._stamps_timer = single_shot(self, None, self._on_redraw)
        self._update_status()

    def _build_labels(self) -> None:
        """The status line, the note for trials measured on RPC servers, and the empty view's words."""
        self.status = QLabel()
        self.status.setObjectName("hardware_status")
        self.status.setWordWrap(True)
        self.remote_label = QLabel()
        self.remote_label.setObjectName("hardware_remote")
        self.remote_label.setWordWrap(True)
        self.remote_label.setStyleSheet(REMOTE_NOTE_STYLE)
        self.remote_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.remote_label.hide()
        self.empty = QLabel()
        self.empty.setObjectName("hardware_empty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet(f"font-size: 15px; color: {theme.TEXT_MUTED}; padding: 40px;")

    def _build_panes(self) -> QSplitter:
        """The panels (or, with no telemetry, the words saying so) above the disturbed trials' list."""
        self.layout_widget = pg.GraphicsLayoutWidget()
        self.layout_widget.setBackground("w")
        # The panels scroll rather than shrink: below PANEL_MIN_H a panel has no room for its numbers
        # or its unit (six panels in a 1280x800 window were 35 px each, their labels cut).
        self.panels = scrolled(self.layout_widget)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.panels)
        self.disturbed_label = QLabel()
        self.disturbed_label.setObjectName("hardware_disturbed")
        self.disturbed_label.setWordWrap(True)
        self.disturbed_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.disturbed_table = DisturbedTable()
        return split(Qt.Orientation.Vertical, (self.stack, self.disturbed_table), (4, 1), (600, 150))

    def _make_trial_plot(self) -> None:
        self.trial_plot = self._add_plot("trials", "Latency (ms)")
        self.trial_plot.setLogMode(y=True)
        self.trial_curve = self.trial_plot.plot(
            pen=None, symbol="o", symbolSize=5, symbolPen=None, symbolBrush=theme.rgba(theme.ACCENT, 170)
        )
        # Rings around the trials measured while the machine was not quiet (hover: cause and pids).
        self.disturbed_markers = pg.ScatterPlotItem(
            size=11, brush=None, hoverable=True, hoverSize=14, tip=lambda x, y, data: data
        )
        self.disturbed_markers.setZValue(5)
        self.trial_plot.addItem(self.disturbed_markers)

    def _fresh_plots(self) -> None:
        """Panels made anew for the session shown: none of the last session's series, shading or zoom."""
        self.layout_widget.clear()
        self._plots = {}
        self._curves = {}
        self._regions = []
        self._trial_regions = []
        self._x_min = 0.0
        self._follow = True
        self._make_trial_plot()

    def reset_view(self) -> None:
        """Show all of the session's readings again, after a zoom or a pan (the button, a double-click)."""
        self._follow = True
        for plot in self._plots.values():
            plot.enableAutoRange(y=True)
        self._on_redraw()

    def _on_zoomed(self, *_: object) -> None:
        self._follow = False

    def _fit_time(self, t: np.ndarray) -> None:
        """While following, the shared time axis spans every reading and trial. (Each panel's own
        x auto-range would not: the panels are linked, and the last one to range itself wins.)"""
        if not self._follow:
            return
        ends = [float(t[0]), float(t[-1])] if len(t) else []
        if len(self._trials):
            ends += [float(np.nanmin(self._trials.col("start"))), float(np.nanmax(self._trials.col("t")))]
        if ends:
            lo, hi = max(min(ends), self._x_min), max(ends)
            self.trial_plot.setXRange(lo, hi if hi > lo else lo + 1.0, padding=0.02)

    @property
    def n_samples(self) -> int:
        return len(self._samples)

    def exportable(self):
        return self.layout_widget.scene()

    def set_session(
        self, session: Any, trials: list | None = None, columns: TrialColumns | None = None
    ) -> None:
        """Show a session (an id, a SessionRecord or None); `columns` (what `Store.trial_columns`
        returns) or `trials`, when given, are the main window's one read of its trials, so this view
        does not read them again."""
        session_id = getattr(session, "id", session)
        self.session_id = session_id
        if columns is None and trials is not None:
            columns = columns_of(trials)
        self._samples.clear()
        self._trials.clear()
        self._last_t = 0.0
        self._last_trial_id = 0
        self._t0 = 0.0
        self.disturbed = []
        self._devices = {}
        self._tracker = ""
        self._note = ((0, 0, ""), "")
        self._stamps_dirty = True
        self._stamps_at = -1e9
        self._fresh_plots()
        if session_id is not None:
            try:
                record = self._store.session(session_id)
                self._t0 = record.created_at
                self._tracker = str((record.measure or {}).get("rpc_tracker") or "")
            except TunelabError as exc:
                self.status.setText(str(exc))
                self.session_id = None
        self._read(columns)
        self._on_redraw()

    def poll(self) -> int:
        """Read the telemetry and the trials stored since the last poll; returns the new samples."""
        return self._read(None)

    def add(self, columns: TrialColumns) -> int:
        """Take newly stored trials (the main window's one read for every view) and read the new
        telemetry samples; returns how many samples were new."""
        return self._read(columns)

    def _read(self, columns: TrialColumns | None) -> int:
        if self.session_id is None:
            return 0
        try:
            samples = read_samples(self._store, self.session_id, self._last_t)
            if columns is None:
                columns = self._store.trial_columns(self.session_id, since_id=self._last_trial_id)
        except TunelabError as exc:
            self.status.setText(str(exc))
            return 0
        for s in samples:
            values = {f: (math.nan if (v := getattr(s, f, None)) is None else float(v)) for f in FIELDS}
            self._samples.append(t=s.t - self._t0, throttled=float(is_throttled(s)), **values)
            self._last_t = s.t
        c = rows_after(columns, self._last_trial_id)
        if n_rows(c):
            latency = np.where(c["ok"] & (c["latency_ms"] != 0), c["latency_ms"], math.nan)
            self._trials.extend(
                id=c["id"],
                index=c["index"],
                number=c["number"],
                start=c["started_at"] - self._t0,
                t=c["finished_at"] - self._t0,
                latency=latency,
            )
            self._last_trial_id = int(c["id"][-1])
            self._devices.update(
                (int(i), d) for i, d in zip(c["id"].tolist(), c["device"].tolist(), strict=True) if d
            )
            self._stamps_dirty = True
        if (samples or n_rows(c)) and not self._redraw_timer.isActive():
            self._redraw_timer.start()
        return len(samples or ())

    # ---- drawing -------------------------------------------------------------------------------
    def _add_plot(self, key: str, title: str) -> pg.PlotItem:
        """One panel per row, all sharing the time axis of the first (the trials). The panel's name is
        a title above it and the y axis carries only the unit: stacked panels are too short for a
        vertical "Utilization (%)", which was cut or ran into the next panel's."""
        plot = add_panel(self.layout_widget, list(self._plots.values()), title, self._x_min)
        plot.vb.reset_requested.connect(self.reset_view)
        plot.vb.sigRangeChangedManually.connect(self._on_zoomed)
        self._plots[key] = plot
        self.layout_widget.setMinimumHeight(PANEL_MIN_H * len(self._plots) + 40)
        return plot

    def _draw(self) -> None:
        if self._stamps_dirty:
            # Every stamp is re-read (the store has no "since"): at most every STAMPS_MS while following.
            wait = self._stamps_at + STAMPS_MS / 1000 - time.monotonic()
            if wait > 0:
                if not self._stamps_timer.isActive():
                    self._stamps_timer.start(int(wait * 1000) + 1)
            else:
                self._stamps_at = time.monotonic()
                self._read_stamps()
                self._update_disturbed()
        self._update_status()
        if len(self._samples) == 0:
            self.stack.setCurrentWidget(self.empty)
            return
        self.stack.setCurrentWidget(self.panels)
        t = self._samples.col("t")
        self._limit_time(t)
        self._fit_time(t)
        for key, title, series in PANELS:
            drawn = [(f, name) for f, name in series if np.isfinite(self._samples.col(f)).any()]
            if not drawn:
                continue
            if key not in self._plots:
                plot = self._add_plot(key, title)
                if len(series) > 1:
                    plot.addLegend(offset=(-10, 5), labelTextColor=theme.TEXT, brush=(255, 255, 255, 200))
            plot = self._plots[key]
            for i, (field, name) in enumerate(drawn):
                if field not in self._curves:
                    limit = field.endswith("_limit_w")
                    pen = (
                        pg.mkPen(LIMIT, width=1, style=Qt.PenStyle.DashLine)
                        if limit
                        else pg.mkPen(SERIES_PENS[i % len(SERIES_PENS)], width=1.5)
                    )
                    self._curves[field] = plot.plot(pen=pen, connect="finite", name=name)
                self._curves[field].setData(t, self._samples.col(field))
            plot.setLimits(minYRange=min_span(self._samples.col(f) for f, _ in drawn))
        self.trial_curve.setData(self._trials.col("t"), self._trials.col("latency"))
        self._draw_throttling(t)
        self._draw_disturbed()

    def _limit_time(self, t: np.ndarray) -> None:
        """No panel pans or zooms to before the session's first reading (or 0, its creation)."""
        starts = self._trials.col("start")
        x_min = min(0.0, float(t[0]) if len(t) else 0.0, float(starts.min()) if len(starts) else 0.0)
        if x_min != self._x_min:
            self._x_min = x_min
            for plot in self._plots.values():
                plot.setLimits(xMin=x_min)

    # ---- trials measured on a machine that was not quiet ---------------------------------------
    def _read_stamps(self) -> None:
        self._stamps_dirty = False
        if self.session_id is None:
            self.disturbed = []
            return
        try:
            stamps = read_trial_stamps(self._store, self.session_id)
        except TunelabError as exc:
            self.disturbed_label.setText(str(exc))
            return
        self.disturbed = disturbed_trials(stamps, self._trials)

    def disturbed_summary(self) -> str:
        """'3 trials measured while another process was busy on the CPU (pid 123) · …' ('' when none)."""
        return disturbed_words(self.disturbed)

    def _update_disturbed(self) -> None:
        summary = self.disturbed_summary()
        n_trials = len(self._trials)
        if summary:
            self.disturbed_label.setText(
                f"{summary} — shaded on the time axis and ringed in the trials panel "
                f"(hover for details); {len(self.disturbed)} of {n_trials} trials are listed below."
            )
        elif n_trials:
            self.disturbed_label.setText(
                "No trial was measured while another process was busy or the GPU throttled."
            )
        else:
            self.disturbed_label.setText("")
        self.disturbed_label.setVisible(bool(self.disturbed_label.text()))
        self.disturbed_table.fill(self.disturbed, self.device_of)

    def _draw_disturbed(self) -> None:
        for region in self._trial_regions:
            view = region.getViewBox()
            if view is not None:
                view.removeItem(region)
        self._trial_regions = []
        if not self.disturbed:
            self.disturbed_markers.setData([])
            return
        ok = self._trials.col("latency")
        top = float(np.nanmax(ok)) if np.isfinite(ok).any() else 1.0
        spots = []
        for d in self.disturbed:
            y = d["latency"] if math.isfinite(d["latency"]) else top
            spots.append(
                {
                    "pos": (d["end"], math.log10(y)),
                    "data": f"trial #{d['number']}{self._on_device(d['trial_id'])}: {d['cause']}",
                    "pen": pg.mkPen(DISTURBED[d["kind"]][1], width=2),
                }
            )
        self.disturbed_markers.setData(spots)
        for start, end, tip, brush in disturbed_spans(self.disturbed, self._trials):
            for plot in self._plots.values():
                region = pg.LinearRegionItem(
                    values=(start, end), movable=False, brush=brush, pen=pg.mkPen(None)
                )
                region.setZValue(-20)
                region.setToolTip(tip)
                plot.addItem(region)
                self._trial_regions.append(region)

    def _on_device(self, trial_id: int) -> str:
        device = self.device_of(trial_id)
        return f" (measured on {device}; the readings are this machine's)" if device else ""

    def device_of(self, trial_id: int) -> str | None:
        """The RPC server that measured the trial; None: this machine."""
        return self._devices.get(trial_id)

    def remote_note(self) -> str:
        """The note over the plots for a session measured (in part) on RPC servers; '' when none was."""
        if not self._devices:
            return ""
        counted = (len(self._devices), len(self._trials), self._tracker)
        if self._note[0] != counted:  # made again only when trials arrived (it is asked every redraw)
            local = [None] * (len(self._trials) - len(self._devices))
            self._note = (counted, remote_note([*self._devices.values(), *local], self._tracker))
        return self._note[1]

    def region_tooltips(self) -> list[str]:
        return [r.toolTip() for r in self._trial_regions]

    def _draw_throttling(self, t: np.ndarray) -> None:
        for region in self._regions:
            view = region.getViewBox()
            if view is not None:
                view.removeItem(region)
        self._regions = []
        panels = [plot for key, plot in self._plots.items() if key != "trials"]
        self._regions = shade_throttling(panels, t, self._samples.col("throttled"))

    def _recorded_gpu(self) -> bool:
        """The session's samples hold GPU readings (any of the GPU columns has a value)."""
        if not len(self._samples):
            return False
        return any(bool(np.isfinite(self._samples.col(f)).any()) for f in FIELDS if f.startswith("gpu_"))

    def _update_status(self) -> None:
        note = self.remote_note() if self.session_id is not None else ""
        self.remote_label.setText(note)
        self.remote_label.setVisible(bool(note))
        has_gpu, gpu_status = machine_gpu_status()
        machine = f"This machine: {gpu_status}."
        if self.session_id is None:
            self.status.setText(machine)
            self.empty.setText("No session selected.")
            return
        if len(self._samples) == 0:
            cpu_only = "" if has_gpu or not gpu_status_known() else "\nNo NVIDIA GPU here: CPU only."
            self.empty.setText(f"No telemetry recorded for session {self.session_id}.{cpu_only}")
        throttled = int(self._samples.col("throttled").sum()) if len(self._samples) else 0
        # What the samples hold, not what this machine can read now: a store tuned on a GPU machine is
        # often opened on a laptop without one.
        recorded = "GPU (NVML) and CPU" if self._recorded_gpu() else "the CPU only"
        text = (
            f"<b>Session {self.session_id}</b> · {len(self._samples)} telemetry samples of {recorded}"
            + ("" if has_gpu or not self._recorded_gpu() else " (recorded on the session's machine)")
            + f" · {machine}"
        )
        if throttled:
            text += f" · <span style='color:{LIMIT}'>throttled in {throttled} samples (shaded)</span>"
        self.status.setText(text)

"""The live view: each trial's latency, failed trials marked, the best so far and its GFLOP/s.

It follows one session through the store (`trials(id, since_id=last)`), so a session tuned by
another process updates it just as this window's own worker does. New trials go into growing
NumPy buffers; the curves are redrawn from a timer, never once per trial.

At 100k trials drawing is what costs: the per-trial scatters draw a deterministic subset (at most
`SCATTER_CAP` points of the visible range, always with the improvements and the latest trials), and
the best-so-far curves hold only the improvement points, drawn as steps.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QGraphicsItem, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from tunelab.app import theme
from tunelab.app.widgets.batched_axes import BatchedAxis, BatchedIntegerAxis, BatchedLogAxis
from tunelab.app.widgets.buffers import GrowingColumns, TrialColumns, columns_of, decimate, n_rows, rows_after
from tunelab.app.widgets.elided_label import ElidedLabel
from tunelab.app.widgets.formatting import fmt_fresh_runs, fmt_gflops, fmt_ms, gflops
from tunelab.app.widgets.log_axis import unit_axis
from tunelab.app.widgets.plot_zoom import ZoomViewBox, reset_button
from tunelab.app.widgets.timers import single_shot
from tunelab.app.workers.following import DrawnWhenShown, read_new
from tunelab.core.errors import TunelabError
from tunelab.core.faults import describe_failures, failure_class
from tunelab.core.records import TRIAL_STATUSES, SearchTime
from tunelab.core.store import Store
from tunelab.core.usecases.export import StatedBest

REDRAW_MS = 200
OK_BRUSH = theme.rgba(theme.ACCENT, 170)
FAILED_PEN = theme.ERROR
SEARCH_SHARE_WARN = 0.2  # more of a session's time in the search than this is the budget being eaten
UNTRUSTED_PEN = theme.WARN_DARK  # a figure shown but not to be held to (the roofline warning's amber)
BEST_PEN = theme.GOOD
GFLOPS_PEN = theme.WARN
SCATTER_CAP = 5000  # trial markers drawn at most (plus the kept ones), over the visible trial range
FAILED_CAP = 1000  # failed-trial markers drawn at most
RECENT = 256  # the latest trials are always drawn
EMPTY_TEXT = (
    "No session selected.\nPick one in the Sessions list above, or start a new one (Ctrl+N): "
    "its trials' latencies appear here as they are measured."
)


class LivePlot(DrawnWhenShown):
    """Latency vs trial for the session given to `set_session`; call `poll()` when the store changed."""

    trial_clicked = Signal(int)  # a trial id
    failed = Signal(str)

    def __init__(self, store: Store, redraw_ms: int = REDRAW_MS, parent: QWidget | None = None) -> None:
        super().__init__(redraw_ms, parent)
        self._store = store
        self.session_id: int | None = None
        self._flops = 0.0
        self._last_id = 0
        self._ok = GrowingColumns("number", "latency", "id")
        self._failed = GrowingColumns("number", "id")
        # Only the improvements (each a new best so far); "pos" is the row in _ok.
        self._best = GrowingColumns("number", "latency", "gflops", "pos")
        self._best_ms: float | None = None
        self._best_number: int | None = None
        self._stated: StatedBest | None = None  # the session's one best, with its kind (set_stated)
        self._search: SearchTime | None = None  # how long the search took between rounds
        self._failure_classes: Counter[str] = Counter()  # failed trials by failure_class
        self._last_number: float | None = None
        self._drawn_key: tuple | None = None
        self.redraws = 0

        self._build_plot()

        self.title = ElidedLabel()  # a long header is cut with "…", never widening the window
        self.title.setObjectName("live_title")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.log_check = QCheckBox("Log latency axis")
        self.log_check.setChecked(True)
        self.log_check.toggled.connect(self._on_log_toggled)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.log_check)
        self.reset_button = reset_button(self.reset_view)
        top.addWidget(self.reset_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.plot_widget, 1)
        # With no session there is nothing to plot: a sentence instead of empty 0-1 axes.
        self.empty_label = QLabel(EMPTY_TEXT)
        self.empty_label.setObjectName("live_empty")
        self.empty_label.setProperty("role", "hint")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        layout.addWidget(self.empty_label, 1)
        self._show_empty(True)

        # Zooming or panning redraws the thinned scatters for the new range (coalesced).
        self._points_timer = single_shot(self, 40, self._on_range_changed)
        self.plot_item.vb.sigXRangeChanged.connect(self._on_x_range)

    def _build_plot(self) -> None:
        """The latency plot: trials, failed trials and the best so far, with the best GFLOP/s at the right."""
        pg.setConfigOptions(antialias=True)
        self.plot_widget = pg.PlotWidget(
            background="w",
            viewBox=ZoomViewBox(),  # Ctrl+wheel zooms; a plain wheel leaves the ranges alone
            axisItems={
                "left": BatchedLogAxis("left"),
                "bottom": BatchedIntegerAxis("bottom"),
                "right": BatchedAxis("right"),
            },
        )
        self.plot_item = item = self.plot_widget.getPlotItem()
        item.setDownsampling(auto=True, mode="peak")
        item.setClipToView(True)
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLabel("bottom", "Trial #")
        item.setLabel("left", "Latency (ms)")
        item.getAxis("left").enableAutoSIPrefix(False)
        self.legend = item.addLegend(offset=(-10, 10), labelTextColor=theme.TEXT, brush=(255, 255, 255, 210))

        self.ok_curve = item.plot(
            pen=None, symbol="o", symbolSize=7, symbolPen=None, symbolBrush=OK_BRUSH, name="trial latency"
        )
        self.failed_curve = item.plot(
            pen=None,
            symbol="x",
            symbolSize=11,
            symbolPen=pg.mkPen(FAILED_PEN, width=2),
            symbolBrush=FAILED_PEN,
            name="failed trial",
        )
        self.best_curve = item.plot(pen=pg.mkPen(BEST_PEN, width=2.5), stepMode="right", name="best so far")
        for curve in (self.ok_curve, self.failed_curve, self.best_curve):
            curve.setSkipFiniteCheck(True)
        # Peak downsampling would turn a scatter into min/max pairs: the scatters are thinned here instead.
        for curve in (self.ok_curve, self.failed_curve):
            curve.setDownsampling(ds=1, auto=False)
        self.ok_curve.sigPointsClicked.connect(self._on_points_clicked)
        self.failed_curve.sigPointsClicked.connect(self._on_points_clicked)

        self._build_gflops_axis(item)
        item.vb.sigResized.connect(self._sync_views)
        self._set_log(True)
        # While a session tunes, each new batch repaints the plot; an axis whose range did not change
        # (and the legend) is then drawn from a cached pixmap instead of replaying its ticks and text.
        for part in (*(item.getAxis(side) for side in ("left", "bottom", "right")), self.legend):
            part.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def _build_gflops_axis(self, item: pg.PlotItem) -> None:
        """GFLOP/s on its own (linear) axis at the right, sharing the trial axis."""
        self.gflops_view = ZoomViewBox()
        item.showAxis("right")
        item.scene().addItem(self.gflops_view)
        right = item.getAxis("right")
        right.linkToView(self.gflops_view)
        unit_axis(right, "Best GFLOP/s", color=GFLOPS_PEN)
        right.setGrid(False)  # the latency axis has the grid; a second one (GFLOP/s) only cluttered it
        self.gflops_view.setXLink(item)
        self.gflops_view.setLimits(yMin=0)  # GFLOP/s are never negative: no range below 0 either
        # Its range is set from 0 with the data (_fit_gflops_axis), never auto-scaled: auto-scaled, a 2 %
        # gain filled the axis like a cliff.
        self.gflops_view.enableAutoRange(y=False)
        self.gflops_view.setMouseEnabled(x=True, y=False)
        # The stated figure when it is not the session's own (a confirmed one): where the header's figure is.
        self.stated_line = pg.InfiniteLine(
            angle=0,
            movable=False,
            pen=pg.mkPen(GFLOPS_PEN, width=1.5, style=Qt.PenStyle.DotLine),
            label="",
            labelOpts={"position": 0.02, "anchors": [(0, 1), (0, 1)], "color": GFLOPS_PEN},
        )
        self.stated_line.hide()
        self.gflops_view.addItem(self.stated_line, ignoreBounds=True)
        item.setLimits(xMin=0)  # trials are numbered from 1: no zooming into trial -40
        for box in (item.vb, self.gflops_view):
            box.reset_requested.connect(self.reset_view)
        self.gflops_curve = pg.PlotDataItem(
            pen=pg.mkPen(GFLOPS_PEN, width=2, style=Qt.PenStyle.DashLine), stepMode="right"
        )
        self.gflops_curve.setSkipFiniteCheck(True)
        # Its own ViewBox: PlotItem's downsampling settings do not reach it. Not clipped to the view: it
        # holds only the improvements, and clipping would make its axis range follow the zoom.
        self.gflops_curve.setDownsampling(auto=True, method="peak")
        self.gflops_view.addItem(self.gflops_curve)
        self.legend.addItem(self.gflops_curve, "best GFLOP/s (right axis)")

    # ---- public --------------------------------------------------------------------------------
    @property
    def n_trials(self) -> int:
        return len(self._ok) + len(self._failed)

    @property
    def n_failed(self) -> int:
        return len(self._failed)

    def exportable(self):
        return self.plot_widget.scene()

    def set_stated(self, stated: StatedBest | None) -> None:
        """The shown session's one best (tunelab.app.views.stated), or None: the header states it with
        its kind, and a confirmed figure marks the session's own best as superseded."""
        if stated is not None and stated.session_id != self.session_id:
            stated = None
        if stated != self._stated:
            self._stated = stated
            self._update_title()

    def set_session(self, session, trials: list | None = None, columns: TrialColumns | None = None) -> None:
        """Follow a session (its id or its SessionRecord; None for none). `columns` (what
        `Store.trial_columns` returns) or `trials` (TrialRecords), when given, are the session's
        trials already read, in id order, so the store is not read again."""
        self._redraw_timer.stop()
        session_id = getattr(session, "id", session)
        self.session_id = session_id
        self._last_id = 0
        for buffer in (self._ok, self._failed, self._best):
            buffer.clear()
        self._best_ms = self._best_number = self._last_number = None
        self._stated = None
        self._search = None
        self._failure_classes = Counter()
        self._drawn_key = None
        self._flops = 0.0
        if session_id is not None:
            flops = getattr(session, "flops", None)
            if flops is not None:
                self._flops = flops
            else:
                try:
                    self._flops = self._store.session(session_id).flops
                except TunelabError as exc:
                    self.failed.emit(str(exc))
                    self.session_id = None
        if columns is None and trials is not None:
            columns = columns_of(trials)
        if columns is not None and self.session_id is not None:
            self._add(columns)
        else:
            self.poll()
        self._redraw_timer.stop()  # exactly one redraw, now
        self.plot_item.enableAutoRange()  # a session's plot starts from its own data, not the last zoom
        self._on_redraw()

    def poll(self) -> int:
        """Read the followed session's trials stored since the last poll; returns how many."""
        columns = read_new(self._store, self.session_id, self._last_id, self.failed.emit)
        return 0 if columns is None else self.add(columns)

    def add(self, columns: TrialColumns) -> int:
        """Take newly stored trials of the followed session (the main window reads them once for
        every view); a redraw follows from the timer. Returns how many were new here."""
        if self.session_id is None:
            return 0
        n = self._add(columns)
        if n and not self._redraw_timer.isActive():
            self._redraw_timer.start()
        return n

    def _add(self, columns: TrialColumns) -> int:
        c = rows_after(columns, self._last_id)
        n = n_rows(c)
        if not n:
            return 0
        latency = c["latency_ms"]
        with np.errstate(invalid="ignore"):
            good = c["ok"] & (latency > 0)  # NaN (no latency) compares false
        index = c["number"].astype(np.float64)
        ids = c["id"].astype(np.float64)
        if not good.all():
            self._failed.extend(number=index[~good], id=ids[~good])
            status, error = c["status"][~good], c["error"][~good]
            self._failure_classes.update(
                failure_class(TRIAL_STATUSES[s] if 0 <= s < len(TRIAL_STATUSES) else "?", e)
                for s, e in zip(status.tolist(), error.tolist(), strict=True)
            )
        if good.any():
            index, latency = index[good], latency[good]
            first_pos = len(self._ok)
            self._ok.extend(number=index, latency=latency, id=ids[good])
            # A new best is strictly better than every earlier one (the first of equal latencies wins).
            before = np.minimum.accumulate(
                np.r_[math.inf if self._best_ms is None else self._best_ms, latency]
            )[:-1]
            new = np.flatnonzero(latency < before)
            if len(new):
                best = latency[new]
                gf = self._flops / (best * 1e-3) / 1e9 if self._flops else np.full(len(best), math.nan)
                self._best.extend(number=index[new], latency=best, gflops=gf, pos=first_pos + new)
                self._best_ms, self._best_number = float(best[-1]), int(index[new[-1]])
        self._last_number = float(c["number"][-1])
        self._last_id = int(c["id"][-1])
        self._read_search_time()  # a batch stored: its round's search time may be stored with it
        return n

    def _read_search_time(self) -> None:
        """The session's search time between rounds (Store.search_time), for the header."""
        try:
            self._search = self._store.search_time(self.session_id) if self.session_id is not None else None
        except TunelabError:
            self._search = None

    # ---- drawing -------------------------------------------------------------------------------
    def _draw(self) -> None:
        self.redraws += 1
        self._drawn_key = None
        self._draw_points()
        # The best so far as steps through its improvements, held to the latest trial.
        bx, by, bg = self._best.col("number"), self._best.col("latency"), self._best.col("gflops")
        if len(bx) and self._last_number is not None and self._last_number > bx[-1]:
            bx, by, bg = np.r_[bx, self._last_number], np.r_[by, by[-1]], np.r_[bg, bg[-1]]
        self.best_curve.setData(bx, by)
        self.gflops_curve.setData(bx, bg)
        self._update_title()
        # Settle the auto-ranges now. Left to the paint, they change the axes during it, and the
        # axes then ask for a second full paint (10-20 ms of the GUI thread per new batch).
        self.plot_item.vb.prepareForPaint()
        self.gflops_view.prepareForPaint()

    def _visible(self, x: np.ndarray) -> np.ndarray:
        """Rows of `x` inside the trial range shown (all of them while the view follows the data)."""
        vb = self.plot_item.vb
        if vb.autoRangeEnabled()[0] or not len(x):
            return np.arange(len(x))
        lo, hi = vb.viewRange()[0]
        pad = 0.02 * (hi - lo)
        return np.flatnonzero((x >= lo - pad) & (x <= hi + pad))

    def _draw_points(self) -> None:
        """The per-trial markers: every one when they are few, else a stable subset of those in view."""
        vb = self.plot_item.vb
        key = (
            len(self._ok),
            len(self._failed),
            self.log_check.isChecked(),
            None if vb.autoRangeEnabled()[0] else tuple(vb.viewRange()[0]),
        )
        if key == self._drawn_key:
            return
        self._drawn_key = key
        ok_x, ok_y = self._ok.col("number"), self._ok.col("latency")
        n = len(ok_x)
        if n > SCATTER_CAP:
            keep = np.r_[self._best.col("pos").astype(np.int64), np.arange(max(0, n - RECENT), n)]
            rows = decimate(self._visible(ok_x), SCATTER_CAP, keep)
            self.ok_curve.setData(ok_x[rows], ok_y[rows])
        else:
            self.ok_curve.setData(ok_x, ok_y)
        failed_x = self._failed.col("number")
        if len(failed_x):
            if len(failed_x) > FAILED_CAP:
                m = len(failed_x)
                failed_x = failed_x[
                    decimate(self._visible(failed_x), FAILED_CAP, np.arange(max(0, m - 16), m))
                ]
            top = float(ok_y.max()) * 1.6 if n else 1.0
            self.failed_curve.setData(failed_x, np.full(len(failed_x), top))
        else:
            self.failed_curve.setData([], [])

    def _on_x_range(self, *_: object) -> None:
        self._points_timer.start()

    def _on_range_changed(self) -> None:
        if self.isVisible() and not self._stale:
            self._draw_points()

    def _show_empty(self, empty: bool) -> None:
        self.plot_widget.setVisible(not empty)
        self.log_check.setVisible(not empty)
        self.reset_button.setVisible(not empty)
        self.empty_label.setVisible(empty)

    def _update_title(self) -> None:
        self._show_empty(self.session_id is None)
        self._fit_gflops_axis()  # the axis shows the header's figure: both change together
        if self.session_id is None:
            self.title.setText("")
            return
        text = f"<b>Session {self.session_id}</b> · {self.n_trials} trials"
        tips: list[str] = []
        if self.n_failed:
            # By class ("19 SIGILL, 2 build error"): which failure dominates is what to act on.
            failed = describe_failures(self._failure_classes.elements(), self.n_trials)
            failed = failed.split(": ", 1)[1] if ": " in failed else f"{self.n_failed} failed"
            text += (
                f", <span style='color:{FAILED_PEN}'>{self.n_failed} failed: {failed} (✕ at the top)</span>"
            )
        stated = self._stated
        if stated is not None and stated.kind != "session" and self._best_ms is not None:
            # A confirmed figure is the export's; only a trusted one is bold and ✓.
            runs = f" in {fmt_fresh_runs(stated.runs, stated.devices)}"
            figure = f"{fmt_ms(stated.ms)} ms {stated.mark}"
            if stated.trusted:
                text += f" · <b>{figure} confirmed</b>{runs}"
            else:
                text += f" · <span style='color:{UNTRUSTED_PEN}'>{figure} untrusted</span>{runs}"
            text += (
                f" = {fmt_gflops(gflops(self._flops, stated.ms))} GFLOP/s (trial #{stated.trial_number})"
                f" · <span style='color:{theme.TEXT_FAINT}'>the session's best {fmt_ms(self._best_ms)} ms at trial "
                f"#{self._best_number}: superseded</span>"
            )
            tips = [stated.words()]
        elif self._best_ms is not None:
            # Not confirmed: the session's own figure (its export would state it, marked ○).
            text += (
                f" · best {fmt_ms(self._best_ms)} ms ○ = {fmt_gflops(gflops(self._flops, self._best_ms))} GFLOP/s"
                f" at trial #{self._best_number}"
            )
            tips = ["○ the session's own figure, not confirmed in fresh processes"]
        elif self.n_trials == 0:
            text += " · waiting for the first trial…"
        search = self._search
        if search is not None:
            # Where the budget goes besides building and measuring: proposing and learning
            colour = f" style='color:{UNTRUSTED_PEN}'" if search.share > SEARCH_SHARE_WARN else ""
            text += (
                f" · <span{colour}>search {search.total_s:.{1 if search.total_s < 10 else 0}f} s = "
                f"{search.share:.0%} of the rounds</span>"
            )
            tips.append(search.words())
        self.title.setText(text)
        self.title.setToolTip("\n".join(tips))

    def reset_view(self) -> None:
        """Show all of the session's trials again, after a zoom or a pan (the button, a double-click)."""
        self.plot_item.enableAutoRange()
        # Drawn again: the curves hold only what the zoom showed (clipped to the view), and the
        # auto-range would follow that part.
        self._on_redraw()

    def stated_gflops(self) -> float | None:
        """The GFLOP/s of the header's figure when it is not the session's own (a confirmed one)."""
        stated = self._stated
        if stated is None or stated.kind == "session" or self._best_ms is None:
            return None
        return gflops(self._flops, stated.ms)

    def _fit_gflops_axis(self) -> None:
        """The GFLOP/s axis from 0 to a little above the best so far and the stated figure."""
        values = self._best.col("gflops")
        tops = [float(v) for v in values[np.isfinite(values)][-1:]]
        stated = self.stated_gflops()
        self.stated_line.setVisible(stated is not None)  # first: a hidden label ignores its text
        if stated is not None and math.isfinite(stated) and self._stated is not None:
            kind = "confirmed" if self._stated.trusted else "untrusted"
            self.stated_line.setValue(stated)
            self.stated_line.label.setFormat(f"{kind}: {fmt_gflops(stated)} GFLOP/s")
            tops.append(stated)
        top = max(tops, default=0.0)
        self.gflops_view.setYRange(0.0, top * 1.12 if top > 0 else 1.0, padding=0)

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
            hits = np.nonzero(columns.col("number") == index)[0]
            if len(hits):
                self.trial_clicked.emit(int(columns.col("id")[hits[0]]))
                return

"""The Jitter view: "it ran fast in the session, then jittered in production" — which cause explains it?

"Explain the spread" re-measures the selected session's best schedule (or, with "Schedule file…", an
exported schedule file) in fresh processes, with every buffer layout, on the session's shapes and any
given, and shows the report of tunelab.core.usecases.jitter.jitter_report: the headline in words, a
horizontal bar per candidate cause (its share of the spread, in %, its tolerance marked) and a table
of the numbers behind each.

The work is one call of that use case in a StreamWorker with its own Store; this widget only draws the
JitterReport it returns. Stop kills the re-measurement's worker processes at once; nothing is stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QTableWidgetItem, QVBoxLayout, QWidget

from tunelab.app import theme
from tunelab.app.views.validation.drawing import make_table, titled
from tunelab.app.views.worker_view import WorkerView
from tunelab.app.widgets.captioned_plot import CaptionedPlot
from tunelab.app.widgets.fields import captioned_fields, int_spin, line_edit, push_button
from tunelab.app.widgets.formatting import fmt_ms
from tunelab.app.widgets.log_axis import unit_axis
from tunelab.app.widgets.pages import scrolled, split
from tunelab.app.workers.engine import StreamWorker
from tunelab.core.store import Store
from tunelab.core.usecases.jitter import (
    JitterCause,
    JitterReport,
    ValidationCancelled,
    jitter_report,
    pct,
    signed,
)

CAUSE_COLUMNS = ("Cause", "Share", "Tolerance", "Explains", "The numbers")
EXPLAINS_BRUSH = theme.rgba(theme.ERROR, 210)
QUIET_BRUSH = theme.rgba(theme.TEXT_FAINT, 170)
TOLERANCE_PEN = theme.TEXT
EXPLAINS_ROW = QBrush(QColor(theme.ERROR_BG))
NOT_RUN = (
    "Re-measure the best schedule across fresh processes, buffer layouts and shapes, and see which of "
    "busy neighbours, throttling or clocks, first-run cost, placement, input shape or the cost model "
    "explains its spread."
)


def jitter_job(store: Store, source: int | str, *, emit, is_cancelled, **request: Any) -> JitterReport | None:
    """Runs in the worker: the use case, its progress passed on as ("progress", done, total, text);
    None once stopped (nothing was stored)."""
    try:
        return jitter_report(
            store,
            source if isinstance(source, int) else Path(source),
            **request,
            on_progress=lambda done, total, text: emit(("progress", done, total, text)),
            is_cancelled=is_cancelled,
        )
    except ValidationCancelled:
        return None


class CausesPlot(CaptionedPlot):
    """One horizontal bar per cause: its share of the spread in %, red where it explains the spread;
    a black tick marks each cause's tolerance; "n/a" where it could not be measured."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(
            f"<b>Share of the spread per cause</b>: {theme.legend_square(theme.ERROR)} explains it · "
            f"{theme.legend_square(theme.TEXT_FAINT)} within its tolerance · <b>|</b> the tolerance",
            100,
            parent,
        )
        unit_axis(self.plot.getAxis("bottom"), "share of the spread (%)")
        self.plot.getAxis("left").setWidth(150)
        self.plot.showGrid(x=True, y=False, alpha=0.25)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.invertY(True)  # the first cause on top, as in the table
        self.bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.6, brushes=[])
        self.plot.addItem(self.bars)
        self.ticks = pg.ScatterPlotItem(symbol="|", size=22, pen=pg.mkPen(TOLERANCE_PEN, width=2), brush=None)
        self.plot.addItem(self.ticks)
        self.labels: list[pg.TextItem] = []

    def shares(self) -> list[float]:
        """The bars' lengths as drawn (% of the spread)."""
        return [float(w) for w in self.bars.opts.get("width") or []]

    def draw(self, causes: tuple[JitterCause, ...] | list[JitterCause]) -> None:
        for label in self.labels:
            self.plot.removeItem(label)
        self.labels = []
        ys = list(range(len(causes)))
        widths = [100 * max(c.share or 0.0, 0.0) for c in causes]
        brushes = [pg.mkBrush(EXPLAINS_BRUSH if c.explains else QUIET_BRUSH) for c in causes]
        self.bars.setOpts(x0=[0.0] * len(causes), y=ys, width=widths, height=0.6, brushes=brushes)
        self.ticks.setData(x=[100 * c.tolerance for c in causes], y=ys)
        self.plot.getAxis("left").setTicks([[(y, c.title) for y, c in zip(ys, causes, strict=True)], []])
        top = max([*widths, *(100 * c.tolerance for c in causes), 1.0])
        for y, c, w in zip(ys, causes, widths, strict=True):
            text = pg.TextItem(signed(c.share), color=theme.TEXT, anchor=(0, 0.5))
            text.setPos(max(w, 100 * c.tolerance) + top * 0.015, y)  # clear of the bar and its tolerance tick
            self.plot.addItem(text)
            self.labels.append(text)
        # room on the right for the value labels
        self.plot.setXRange(-top * 0.02, top * 1.18, padding=0)
        self.plot.setYRange(-0.6, max(len(causes) - 0.4, 0.6), padding=0)


class JitterView(WorkerView):
    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(store, parent)
        self.report: JitterReport | None = None

        self._build_title("jitter_title")
        controls = self._build_controls()
        self._build_results()
        splitter = split(
            Qt.Orientation.Vertical,
            (self.causes_plot, titled("The numbers behind each cause", self.table)),
            sizes=(300, 320),
        )
        # The page scrolls rather than holding the main window at its height: its wrapped sentences and
        # the two panes together want more than a small window has.
        page = QWidget()
        self._lay_out(page, controls, self.headline, self.spread_label, splitter)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scrolled(page))
        self._update_buttons()

    def _build_controls(self) -> QHBoxLayout:
        """Runs, other shapes, and the Explain / Schedule file / Stop buttons, in one row."""
        self.runs_spin = int_spin(
            1, 50, 5, "Fresh processes: each loads the schedule afresh and times it in every layout"
        )
        self.shapes_edit = line_edit(
            "jitter_shapes",
            "Other shapes to carry the best schedule over to (a session only): M=8,16,32 · M=16..128",
            "optional, e.g. M=8,16,32",
        )
        self.explain_button = push_button(
            "Explain the spread",
            "Re-measure the session's best schedule and say which cause explains its spread",
            self.start,
            "explain_button",
        )
        self.explain_button.setDefault(True)
        self.file_button = push_button(
            "Schedule file…", "Explain the spread of an exported *.schedule.json instead", self._pick_file
        )
        self.stop_button = push_button(
            "Stop",
            "Stop: the worker processes are killed at once and nothing is stored",
            self.stop,
            "jitter_stop",
        )
        controls = captioned_fields(
            (("Runs", self.runs_spin), ("Other shapes", self.shapes_edit)), stretch=self.shapes_edit
        )
        for button in (self.explain_button, self.file_button, self.stop_button):
            controls.addWidget(button)
        return controls

    def _build_results(self) -> None:
        """The headline, the measured spread, the causes' bars and their table."""
        self.headline = QLabel(NOT_RUN)
        self.headline.setObjectName("jitter_headline")
        self.headline.setWordWrap(True)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.headline.setStyleSheet(
            f"font-size: 15px; padding: 8px 12px; background: {theme.NEUTRAL_BG}; border-radius: 4px; "
            f"color: {theme.TEXT};"
        )
        self.spread_label = QLabel()
        self.spread_label.setObjectName("jitter_spread")
        self.spread_label.setWordWrap(True)
        self.spread_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.causes_plot = CausesPlot()
        self.table = make_table(CAUSE_COLUMNS, stretch=len(CAUSE_COLUMNS) - 1)
        self.table.setWordWrap(True)
        self.table.setMinimumHeight(60)  # the splitter gives it room; the window stays resizable small

    # ---- state ---------------------------------------------------------------------------------
    def exportable(self):
        return self.causes_plot.scene()

    def set_session(self, session_id: int | None) -> None:
        record = self._load_session(session_id)
        if record is None:
            self.title.setText("No session selected: pick one, or explain an exported schedule file.")
        else:
            best = (
                "no successful trial yet" if record.best_ms is None else f"best {fmt_ms(record.best_ms)} ms"
            )
            self.title.setText(
                f"<b>Session {record.id}</b> {record.name} · {record.n_trials} trials, {best}. It ran fast in "
                "the session — would it jitter in production? Explain the spread re-measures its best "
                "schedule in fresh processes and says which cause explains the difference."
            )
        if not self.running:
            self._show(None)
        self._update_buttons()

    def _update_buttons(self) -> None:
        idle = not self.running
        self.explain_button.setEnabled(idle and self.session_id is not None)
        self.file_button.setEnabled(idle)
        self.stop_button.setEnabled(self._stoppable())
        self.runs_spin.setEnabled(idle)
        self.shapes_edit.setEnabled(idle)

    # ---- running -------------------------------------------------------------------------------
    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Explain an exported schedule",
            str(Path.home()),
            "Schedule files (*.schedule.json);;All (*)",
        )
        if path:
            self.start(path)

    def start(self, schedule_file: str | None = None) -> StreamWorker | None:
        """Explain the selected session's spread (or that of `schedule_file`) in a worker."""
        if self.running or (schedule_file is None and self.session_id is None):
            return None
        source: int | str = self.session_id if schedule_file is None else schedule_file  # type: ignore[assignment]
        shapes = self.shapes_edit.text().strip() or None
        runs = self.runs_spin.value()
        self._show(None)
        worker = self._launch(
            jitter_job,
            source,
            runs=runs,
            shapes=shapes if schedule_file is None else None,
        )
        what = (
            f"session {self.session_id}'s best schedule"
            if schedule_file is None
            else Path(schedule_file).name
        )
        self._set_stage(f"Re-measuring {what} in {runs} fresh process(es), every buffer layout…")
        self.headline.setText("Measuring…")
        worker.start()
        self._update_buttons()
        return worker

    def _on_progress(self, item: tuple) -> None:
        _, done, total, text = item
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.progress.setFormat("%v / %m")
        self._set_stage(text)

    def _on_done(self, report: JitterReport | None) -> None:
        if report is None:
            self._show(None)
            self.headline.setText("Stopped before the end: nothing was stored.")
            self._set_stage("Stopped.")
            return
        self._show(report)
        stored = (
            f" The validation behind it is stored (id {report.validation_id})."
            if report.validation_id
            else ""
        )
        self._set_stage("Done." + stored)

    def _show_failure(self, message: str) -> None:
        self.headline.setText(f"Cannot explain the spread: {message}")
        self._set_stage("")

    # ---- drawing -------------------------------------------------------------------------------
    def _show(self, report: JitterReport | None) -> None:
        self.report = report
        if report is None:
            self.last_error = ""
            self.headline.setText(NOT_RUN)
            self.spread_label.setText("")
            self.causes_plot.draw([])
            self.table.setRowCount(0)
            return
        self.headline.setText(report.headline[0].upper() + report.headline[1:])
        s = report.spread
        self.spread_label.setText(
            f"<b>Measured</b>: {report.label} · {s.runs} of {report.runs_asked} fresh processes: median "
            f"{fmt_ms(s.median_ms)} ms (min {fmt_ms(s.min_ms)}, max {fmt_ms(s.max_ms)}, CV {pct(s.cv)}) · "
            f"layouts {', '.join(report.layouts) or '—'} · shapes {', '.join(report.shapes) or '—'}"
        )
        self.causes_plot.draw(report.causes)
        self._fill_table(report.causes)

    def _fill_table(self, causes: tuple[JitterCause, ...]) -> None:
        self.table.setRowCount(len(causes))
        for i, c in enumerate(causes):
            cells = (c.title, signed(c.share), pct(c.tolerance), "yes" if c.explains else "no", c.sentence)
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(c.sentence)
                if j in (1, 2):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c.explains:
                    item.setBackground(EXPLAINS_ROW)
                self.table.setItem(i, j, item)
        self.table.resizeRowsToContents()

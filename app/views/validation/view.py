"""The Validation panel: do the selected session's numbers hold?

"Validate" re-measures the session's K fastest schedules in fresh processes (tunelab.core.trust.validate) and says
so in plain words: stable, noisy (and why: another busy process, throttling, first-run cost…) or
regressed. With a shape list it also carries the best schedule over to those shapes
(tunelab.core.trust.shapes.across_shapes); its rows appear as each shape is measured, fall-offs highlighted, with
GFLOP/s per shape plotted against the schedules tuned for those shapes. "Shapes only" skips the
re-measurement. Runs stored in the store (store.validations) are listed and can be opened again.

Everything slow runs in a StreamWorker with its own Store; this widget only draws what it reports.
"""

from __future__ import annotations

import importlib.util
import math
import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from tunelab.app.widgets.formatting import fmt_gflops, fmt_ms
from tunelab.app.workers.worker import Cancelled, StreamWorker, keep_alive
from tunelab.core.errors import TunelabError
from tunelab.core.store.database import Store

VERDICT_STYLE = {  # verdict -> (headline, text colour, background)
    "stable": ("Stable", "#1e8e3e", "#e6f4ea"),
    "noisy": ("Noisy", "#b06000", "#fef7e0"),
    "regressed": ("Regressed", "#d93025", "#fce8e6"),
}
ROW_BRUSH = {"noisy": QBrush(QColor("#fef7e0")), "regressed": QBrush(QColor("#fce8e6"))}
FALLS_OFF_BRUSH = QBrush(QColor("#fce8e6"))
SCHEDULE_COLUMNS = ("Schedule", "Recorded ms", "Re-measured ms", "Ratio", "CV", "Runs", "Quiet runs", "Throttled",
                    "Placement", "Machine", "Verdict", "Cause")
SHAPE_COLUMNS = ("Shape", "Status", "Latency ms", "GFLOP/s", "Tuned ms", "× tuned", "Falls off", "Why")
PAST_COLUMNS = ("When", "Verdict", "Runs", "Summary")
BAR_BRUSH = (42, 111, 219, 200)
BAR_OFF_BRUSH = (217, 48, 37, 200)
TUNED_BRUSH = (128, 134, 139, 150)
RATIO_PEN = "#e37400"
MAX_RATIO = 1.25  # tunelab.core.trust.shapes.MAX_RATIO (importing tunelab.core.trust.shapes loads TVM); a result's "rule" overrides it


def validate_available() -> bool:
    return importlib.util.find_spec("tunelab.core.trust.validate") is not None


def validation_job(store: Store, session_id: int, *, top_k: int, runs: int, shapes: str, remeasure: bool,
                   emit, is_cancelled, task: int = 0) -> dict[str, Any]:
    """Runs in the worker. Emits ("stage", text), ("progress", done, total, text), ("report", report),
    ("shapes", n), ("row", row); returns {"report", "across", "cancelled"}. `task` picks the shape of a
    session that tunes several (0: its primary shape, the one the shape list starts from).

    The re-measurement is tunelab.core.trust.validate.validate_session (not stored by itself); the shapes are
    tunelab.core.trust.shapes.across_shapes with `on_row` forwarded, so rows appear as they are measured. The report
    then takes the shape rows (as validate_session(shapes=...) does) and is stored.

    `is_cancelled` reaches the re-measurement too: a stop kills its worker processes at once (the result
    is {"report": None, "across": None, "cancelled": True}). A stopped run stores nothing, also when the
    stop came while the shapes were measured (its report is returned to show, without an "id").
    """
    record = store.session(session_id)
    shapes = (shapes or "").strip()
    shape_list: list[dict[str, int]] = []
    if shapes and task:
        raise TunelabError("the shape list carries the primary shape's best schedule over: pick the primary "
                           "shape (or clear the shapes) to validate another one")
    if shapes:
        from tunelab.core.trust.shapes import parse_shapes
        from tunelab.core.workloads.catalog import get_workload

        shape_list = parse_shapes(get_workload(record.workload, record.custom_source), shapes, record.shape)
    report = None
    if remeasure:
        try:
            from tunelab.core.trust.validate import ValidationCancelled, validate_session
        except ImportError as exc:
            raise TunelabError("this build of tunelab has no tunelab.core.trust.validate: only the shapes can be checked") from exc
        emit(("stage", f"Re-measuring the {top_k} fastest schedule(s) of session {session_id} in {runs} fresh "
                       "process(es)…"))
        which = {"task": task} if task else {}  # older tunelab.core.trust.validate: no tasks
        try:
            report = validate_session(store, session_id, top_k=top_k, runs=runs, record=False, **which,
                                      on_progress=lambda done, total, text: emit(("progress", done, total, text)),
                                      is_cancelled=is_cancelled)
        except ValidationCancelled:
            return {"report": None, "across": None, "cancelled": True}
        emit(("report", report))
    across = None
    cancelled = is_cancelled()
    if shape_list and not cancelled:
        from tunelab.core.trust.shapes import across_shapes

        emit(("shapes", len(shape_list)))
        emit(("stage", f"Measuring the best schedule of session {session_id} on {len(shape_list)} shape(s)…"))

        def on_row(row: dict[str, Any]) -> None:
            emit(("row", row))
            if is_cancelled():
                raise Cancelled("stopped")

        try:
            across = across_shapes(store, session_id, shapes, on_row=on_row)
        except Cancelled:
            cancelled = True
    if report is not None:
        if across is not None:
            report["across_shapes"] = {k: v for k, v in across.items() if k != "rows"}
            report["shapes"] = across["rows"]
        if not cancelled and callable(getattr(store, "add_validation", None)):
            report["id"] = store.add_validation(report)
    return {"report": report, "across": across, "cancelled": cancelled}


def default_shapes(shape: dict[str, int]) -> str:
    """A shape list to suggest: the first parameter at a quarter, half, once and twice its value."""
    if not shape:
        return ""
    name, value = next(iter(shape.items()))
    values = sorted({max(1, value // 4), max(1, value // 2), value, value * 2})
    return f"{name}={','.join(map(str, values))}"


def _ratio(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.2f}×"


def _pct(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _change(ratio: float | None) -> str:
    """A ratio as a signed change: 1.12 -> "+12%"; None -> "—"."""
    if ratio is None:
        return "—"
    percent = round((ratio - 1) * 100)
    return f"{percent:+d}%" if percent else "0%"


def _varying_label(rows: list[dict[str, Any]]) -> list[str]:
    """Tick labels naming only the parameters that differ between the shapes."""
    shapes = [r.get("shape") or {} for r in rows]
    keys = [k for k in (shapes[0] if shapes else {}) if len({s.get(k) for s in shapes}) > 1]
    if not keys:
        return [r.get("shape_text", "") for r in rows]
    return [",".join(f"{k}={s.get(k)}" for k in keys) for s in shapes]


class ValidationView(QWidget):
    finished = Signal()  # a run ended (done, failed or stopped)
    failed = Signal(str)

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._purposes: dict[int, str | None] = {}  # stored validation id -> why it was made (see _purpose)
        self.session_id: int | None = None
        self.worker: StreamWorker | None = None
        self._run_session: int | None = None
        self._remeasuring = False
        self._rows: list[dict[str, Any]] = []
        self._n_shapes = 0
        self.report: dict[str, Any] | None = None
        self.across: dict[str, Any] | None = None
        self.last_error = ""

        self.title = QLabel("No session selected.")
        self.title.setObjectName("validation_title")
        self.title.setWordWrap(True)
        self.k_spin = QSpinBox()
        self.k_spin.setRange(1, 20)
        self.k_spin.setValue(3)
        self.k_spin.setToolTip("How many of the session's fastest schedules to re-measure")
        self.runs_spin = QSpinBox()
        self.runs_spin.setRange(1, 50)
        self.runs_spin.setValue(5)
        self.runs_spin.setToolTip("Fresh processes: each loads every schedule afresh and measures it once, "
                                  "in a rotated order")
        self.task_combo = QComboBox()
        self.task_combo.setToolTip("The session tunes several shapes: which one to re-measure")
        self.task_label = QLabel("Shape")
        self.task_combo.hide()  # shown for a session that tunes several shapes
        self.task_label.hide()
        self.shapes_edit = QLineEdit()
        self.shapes_edit.setObjectName("shapes_edit")
        self.shapes_edit.setToolTip("Other shapes to carry the best schedule over to (optional): "
                                    "M=8,16,32,64 · M=16..128 · M=64,N=64,K=64;M=128,N=128,K=128")
        self.shapes_edit.textChanged.connect(lambda _t: self._update_buttons())
        self.validate_button = QPushButton("Validate")
        self.validate_button.setObjectName("validate_button")
        self.validate_button.setDefault(True)
        self.validate_button.clicked.connect(lambda: self.start(remeasure=True))
        self.shapes_button = QPushButton("Shapes only")
        self.shapes_button.setToolTip("Carry the best schedule over to the shapes, without re-measuring")
        self.shapes_button.clicked.connect(lambda: self.start(remeasure=False))
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stop_button")
        self.stop_button.setToolTip("Stop: nothing of this run is stored (a re-measurement's worker processes "
                                    "are killed at once; the shapes stop after the one being measured)")
        self.stop_button.clicked.connect(self.stop)
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addWidget(self.task_label)
        controls.addWidget(self.task_combo)
        for label, widget in (("Top K", self.k_spin), ("Repeats", self.runs_spin), ("Other shapes", self.shapes_edit)):
            controls.addWidget(QLabel(label))
            controls.addWidget(widget, 1 if widget is self.shapes_edit else 0)
        for button in (self.validate_button, self.shapes_button, self.stop_button):
            controls.addWidget(button)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.hide()
        self.stage = QLabel()
        self.stage.setProperty("role", "hint")
        self.stage.setWordWrap(True)
        self.stage.hide()
        progress_row = QHBoxLayout()
        progress_row.setContentsMargins(0, 0, 0, 0)
        progress_row.addWidget(self.progress)
        progress_row.addWidget(self.stage, 1)

        # The verdict, in large plain words.
        self.verdict_box = QFrame()
        self.verdict_box.setObjectName("verdict_box")
        self.verdict_label = QLabel("Not validated yet")
        self.verdict_label.setObjectName("verdict_label")
        self.cause_label = QLabel("Re-measure the fastest schedules in fresh processes to see whether the "
                                  "session's figures hold.")
        self.cause_label.setObjectName("verdict_cause")
        self.cause_label.setWordWrap(True)
        self.cause_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.figures_label = QLabel()
        self.figures_label.setObjectName("verdict_figures")
        self.figures_label.setWordWrap(True)
        self.figures_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box = QVBoxLayout(self.verdict_box)
        box.setContentsMargins(12, 8, 12, 8)
        box.setSpacing(2)
        box.addWidget(self.verdict_label)
        box.addWidget(self.cause_label)
        box.addWidget(self.figures_label)
        self.figures_label.hide()
        self._style_verdict(None)

        self.schedule_table = self._table(SCHEDULE_COLUMNS, stretch=len(SCHEDULE_COLUMNS) - 1)
        self.past_table = self._table(PAST_COLUMNS, stretch=3)
        self.past_table.itemSelectionChanged.connect(self._on_past_selected)
        self.past_runs: list[dict[str, Any]] = []
        past = self._titled("Past validations of this session (pick one to show it)", self.past_table)
        self.shape_table = self._table(SHAPE_COLUMNS, stretch=len(SHAPE_COLUMNS) - 1)
        self.shapes_summary = QLabel()
        self.shapes_summary.setObjectName("shapes_summary")
        self.shapes_summary.setWordWrap(True)
        self.shapes_summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        shapes_page = QWidget()
        shapes_layout = QVBoxLayout(shapes_page)
        shapes_layout.setContentsMargins(0, 0, 0, 0)
        shapes_layout.addWidget(self.shapes_summary)
        shapes_layout.addWidget(self.shape_table, 1)

        self.plot_widget = pg.PlotWidget(background="w")
        self.plot_widget.setMinimumHeight(36)
        self.plot = self.plot_widget.getPlotItem()
        # The legend is a caption above the plot (a legend inside a short plot hides the bars).
        square = "<span style='color:{}'>&#9632;</span>"
        self.plot_caption = QLabel(
            f"<b>GFLOP/s per shape</b>: {square.format('#2a6fdb')} this schedule ({square.format('#d93025')} falls off) · "
            f"{square.format('#80868b')} the schedule tuned for that shape · "
            f"<span style='color:{RATIO_PEN}'>&#9670; × the tuned time</span> (right axis; dashed: the fall-off limit)")
        self.plot_caption.setWordWrap(True)
        self.plot_caption.setStyleSheet("color: #3c4043;")
        self.plot.setLabel("left", "GFLOP/s")
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=BAR_BRUSH)
        self.tuned_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=TUNED_BRUSH)
        self.plot.addItem(self.bars)
        self.plot.addItem(self.tuned_bars)
        self.ratio_view = pg.ViewBox()
        self.plot.showAxis("right")
        self.plot.scene().addItem(self.ratio_view)
        right = self.plot.getAxis("right")
        right.linkToView(self.ratio_view)
        right.setLabel("× tuned time", color=RATIO_PEN)
        right.enableAutoSIPrefix(False)
        self.ratio_view.setXLink(self.plot)
        self.ratio_view.setZValue(self.plot.vb.zValue() + 1)  # the ratio line over the bars
        self.ratio_curve = pg.PlotDataItem(pen=pg.mkPen(RATIO_PEN, width=2), symbol="d", symbolSize=10,
                                           symbolBrush=RATIO_PEN, symbolPen=None, connect="finite")
        self.ratio_view.addItem(self.ratio_curve)
        self.ratio_limit = pg.InfiniteLine(pos=MAX_RATIO, angle=0,
                                           pen=pg.mkPen(RATIO_PEN, style=Qt.PenStyle.DashLine))
        self.ratio_view.addItem(self.ratio_limit, ignoreBounds=True)
        self.plot.vb.sigResized.connect(self._sync_views)

        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(self._titled("Re-measured schedules", self.schedule_table))
        top.addWidget(past)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 2)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self._titled("Across shapes", shapes_page))
        plot_page = QWidget()
        plot_layout = QVBoxLayout(plot_page)
        plot_layout.setContentsMargins(0, 4, 0, 0)
        plot_layout.addWidget(self.plot_caption)
        plot_layout.addWidget(self.plot_widget, 1)
        bottom.addWidget(plot_page)
        bottom.setStretchFactor(0, 1)
        bottom.setStretchFactor(1, 1)
        bottom.setSizes([700, 560])
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(top)
        splitter.addWidget(bottom)
        splitter.setSizes([260, 360])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addLayout(controls)
        layout.addLayout(progress_row)
        layout.addWidget(self.verdict_box)
        layout.addWidget(splitter, 1)
        self._update_buttons()

    # ---- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _table(columns: tuple[str, ...], stretch: int) -> QTableWidget:
        table = QTableWidget(0, len(columns))
        table.setHorizontalHeaderLabels(columns)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.verticalHeader().setVisible(False)
        table.setWordWrap(False)
        table.setMinimumHeight(36)  # the window may be small: the splitters share what there is
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
        return table

    @staticmethod
    def _titled(text: str, widget: QWidget) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 4, 0, 0)
        label = QLabel(f"<b>{text}</b>")
        layout.addWidget(label)
        layout.addWidget(widget, 1)
        return page

    def _set_stage(self, text: str) -> None:
        self.stage.setText(text)
        self.stage.setVisible(bool(text))

    def _set_figures(self, text: str) -> None:
        self.figures_label.setText(text)
        self.figures_label.setVisible(bool(text))

    def _sync_views(self) -> None:
        self.ratio_view.setGeometry(self.plot.vb.sceneBoundingRect())
        self.ratio_view.linkedViewChanged(self.plot.vb, self.ratio_view.XAxis)

    def exportable(self):
        return self.plot_widget.scene()

    @property
    def running(self) -> bool:
        return self.worker is not None

    @property
    def verdict(self) -> str:
        return self.verdict_label.text()

    def shape_rows(self) -> list[dict[str, Any]]:
        return list(self._rows)

    # ---- session -------------------------------------------------------------------------------
    def set_session(self, session_id: int | None) -> None:
        self.session_id = session_id
        record = None
        if session_id is not None:
            try:
                record = self._store.session(session_id)
            except TunelabError as exc:
                self.title.setText(str(exc))
                self.session_id = None
        self._fill_tasks(record)
        if record is None:
            self.title.setText("No session selected.")
        else:
            best = "no successful trial yet" if record.best_ms is None else f"best {fmt_ms(record.best_ms)} ms"
            self.title.setText(f"<b>Session {record.id}</b> {record.name} · {record.n_trials} trials, {best}. "
                               "Validate re-measures its fastest schedules in fresh processes and, with shapes, "
                               "carries the best one over to them.")
            self.shapes_edit.setPlaceholderText(f"optional, e.g. {default_shapes(record.shape)}")
        if not self.running:
            self._clear_results()
            self.refresh_past()
            if self.past_runs:
                self.past_table.selectRow(0)  # show the latest stored run
        self._update_buttons()

    def _fill_tasks(self, record: Any) -> None:
        """The shape picker, shown for a session that tunes several shapes (tasks)."""
        tasks = []
        if record is not None and hasattr(self._store, "tasks"):
            try:
                tasks = self._store.tasks(record.id)
            except TunelabError:
                tasks = []
        self.task_combo.clear()
        for t in tasks:
            shape = ",".join(f"{k}={v}" for k, v in t.shape.items())
            self.task_combo.addItem(f"{shape}{' (primary)' if t.index == 0 else ''}", t.index)
        multi = len(tasks) > 1
        self.task_combo.setVisible(multi)
        self.task_label.setVisible(multi)

    @property
    def task(self) -> int:
        value = self.task_combo.currentData()
        return int(value) if value is not None else 0

    def refresh_past(self) -> None:
        """Re-read the stored validation runs of the session (newest first)."""
        self.past_runs = []
        if self.session_id is not None and callable(getattr(self._store, "validations", None)):
            try:
                self.past_runs = self._store.validations(self.session_id)
            except TunelabError as exc:
                self._set_stage(f"Cannot read past validations: {exc}")
        table = self.past_table
        table.blockSignals(True)
        table.setRowCount(len(self.past_runs))
        for row, run in enumerate(self.past_runs):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.get("created_at") or 0))
            k = len(run.get("results") or [])
            what = f"top {k} × {run.get('runs')}"
            if self._purpose(run) == "confirm":  # tunelab.core.trust.confirm: done by the session itself when it finished
                what = f"confirmation: {what}"
            values = (when, str(run.get("verdict")), what, str(run.get("summary") or ""))
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setToolTip(str(run.get("summary") or ""))
                if col == 1:
                    color = VERDICT_STYLE.get(str(run.get("verdict")), ("", "#202124", ""))[1]
                    item.setForeground(QColor(color))
                table.setItem(row, col, item)
        table.blockSignals(False)

    def _purpose(self, run: dict[str, Any]) -> str | None:
        """Why a stored validation was made ("confirm" for a session's own confirmation); cached per id."""
        cache = self._purposes
        if run["id"] not in cache:
            try:
                cache[run["id"]] = (self._store.validation(run["id"]).get("source") or {}).get("purpose")
            except TunelabError:
                cache[run["id"]] = None
        return cache[run["id"]]

    def _on_past_selected(self) -> None:
        rows = {i.row() for i in self.past_table.selectedIndexes()}
        if not rows or self.running:
            return
        run = self.past_runs[min(rows)]
        try:
            report = self._store.validation(run["id"])
        except (TunelabError, AttributeError) as exc:
            self._set_stage(f"Cannot open validation {run['id']}: {exc}")
            return
        self._show_report(report)
        self._rows = [r for r in report.get("shapes") or [] if "falls_off" in r]
        self.across = report.get("across_shapes")
        self._fill_shapes()
        self._set_stage(f"Stored validation {run['id']} of {time.strftime('%Y-%m-%d %H:%M', time.localtime(run.get('created_at') or 0))}.")

    # ---- running -------------------------------------------------------------------------------
    def _update_buttons(self) -> None:
        idle = not self.running and self.session_id is not None
        has_validate = validate_available()
        self.validate_button.setEnabled(idle and has_validate)
        self.validate_button.setToolTip("Re-measure the K fastest schedules in fresh processes, then the shapes"
                                        if has_validate else "This build of tunelab has no tunelab.core.trust.validate")
        self.shapes_button.setEnabled(idle and bool(self.shapes_edit.text().strip()))
        self.stop_button.setEnabled(self.running and not self.worker.cancelled)
        for w in (self.k_spin, self.runs_spin, self.shapes_edit, self.task_combo):
            w.setEnabled(not self.running)

    def start(self, remeasure: bool = True) -> StreamWorker | None:
        """Validate the selected session (re-measure when `remeasure`, then the shapes if any) in a worker."""
        if self.running or self.session_id is None:
            return None
        shapes = self.shapes_edit.text().strip()
        if not remeasure and not shapes:
            return None
        self._clear_results()
        self._run_session = self.session_id
        self._remeasuring = remeasure
        worker = StreamWorker(self._store.path, validation_job, self.session_id, top_k=self.k_spin.value(),
                              runs=self.runs_spin.value(), shapes=shapes, remeasure=remeasure, task=self.task)
        worker.progress.connect(self._on_progress)
        worker.succeeded.connect(self._on_done)
        worker.failed.connect(self._on_failed)
        worker.finished.connect(self._on_finished)
        self.worker = keep_alive(worker)
        self.progress.setRange(0, 0)
        self.progress.show()
        self._set_stage("Starting…")
        if remeasure:
            self.verdict_label.setText("Validating…")
            self._style_verdict(None)
        worker.start()
        self._update_buttons()
        return worker

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self._set_stage(self.stage.text() + " — stopping…")
            self._update_buttons()

    def _on_progress(self, item: tuple) -> None:
        kind = item[0]
        if kind == "stage":
            self._set_stage(item[1])
        elif kind == "progress":
            _, done, total, text = item
            self.progress.setRange(0, max(total, 1))
            self.progress.setValue(done)
            self.progress.setFormat("run %v / %m")
            self._set_stage(f"Re-measuring: {text}")
        elif kind == "report":
            self._show_report(item[1])
        elif kind == "shapes":
            self._n_shapes = int(item[1])
            self.progress.setRange(0, self._n_shapes)
            self.progress.setValue(0)
            self.progress.setFormat("shape %v / %m")
        elif kind == "row":
            self._rows.append(item[1])
            self.progress.setValue(len(self._rows))
            self._fill_shapes()

    def _on_done(self, result: dict[str, Any]) -> None:
        if result.get("cancelled") and result.get("report") is None and result.get("across") is None:
            self._show_stopped()
            return
        if result.get("report") is not None:
            self._show_report(result["report"])
        across = result.get("across")
        if across is not None:
            self.across = across
            self._rows = list(across["rows"])
            self._fill_shapes()
        stored = (result.get("report") or {}).get("id") is not None
        if result.get("cancelled"):
            self._set_stage("Stopped." + (" Nothing was stored." if result.get("report") is not None else ""))
        else:
            self._set_stage("Done." + (" The validation is stored with the session." if stored else ""))

    def _show_stopped(self) -> None:
        """A run stopped before it had anything to keep: nothing is stored, the past runs are as they were."""
        if self._remeasuring:
            self.verdict_label.setText("Stopped")
            self._style_verdict(None)
            self.cause_label.setText("The re-measurement was stopped before it finished; nothing was stored. "
                                     "Past validations are unchanged.")
            self._set_figures("")
        self._set_stage("Stopped.")

    def _on_failed(self, message: str, _details: str) -> None:
        self.last_error = message
        self._set_stage(f"<span style='color:#d93025'>Validation failed: {message}</span>")
        if self.report is None:
            self.verdict_label.setText("Not validated")
            self.cause_label.setText(message)
            self._style_verdict(None)
        self.failed.emit(message)

    def _on_finished(self) -> None:
        self.worker = None
        self.progress.hide()
        self.refresh_past()
        self._update_buttons()
        self.finished.emit()

    # ---- drawing -------------------------------------------------------------------------------
    def _clear_results(self) -> None:
        self.report = None
        self.across = None
        self._rows = []
        self.last_error = ""
        self.schedule_table.setRowCount(0)
        self.verdict_label.setText("Not validated yet")
        self.cause_label.setText("Re-measure the fastest schedules in fresh processes to see whether the "
                                 "session's figures hold.")
        self._set_figures("")
        self._style_verdict(None)
        self._fill_shapes()
        self._set_stage("")

    def _style_verdict(self, verdict: str | None) -> None:
        _, color, background = VERDICT_STYLE.get(verdict or "", ("", "#5f6368", "#f1f3f4"))
        self.verdict_box.setStyleSheet(f"QFrame#verdict_box {{ background: {background}; border-radius: 6px; }}")
        self.verdict_label.setStyleSheet(f"font-size: 26px; font-weight: 700; color: {color};")
        self.cause_label.setStyleSheet(f"font-size: 15px; color: {color};")
        self.figures_label.setStyleSheet("font-size: 13px; color: #202124;")

    def _show_report(self, report: dict[str, Any]) -> None:
        self.report = report
        verdict = str(report.get("verdict"))
        self.verdict_label.setText(VERDICT_STYLE.get(verdict, (verdict.capitalize(), "", ""))[0])
        self._style_verdict(verdict)
        cause = str(report.get("cause") or "")
        summary = str(report.get("summary") or "")
        at = summary.find(cause) if cause else -1
        if at >= 0:  # "[<schedule>: ]<cause>; <figures>": say the cause once
            cause, summary = summary[:at] + cause, summary[at + len(cause):].lstrip("; ")
        elif verdict == "stable" and not cause:
            cause = "The figures hold: the re-measurements agree with the recorded ones and with each other."
            summary = summary.removeprefix("the figures hold: ")
        summary = summary[:1].upper() + summary[1:]
        if report.get("ranking_holds") is False:
            summary += (". The ranking changed: recorded " + ", ".join(report.get("recorded_order") or [])
                        + "; re-measured " + ", ".join(report.get("remeasured_order") or []))
        self.cause_label.setText(cause[:1].upper() + cause[1:])
        self._set_figures(summary + ("." if summary and not summary.endswith(".") else ""))
        schedules = report.get("schedules") or []
        table = self.schedule_table
        table.setRowCount(len(schedules))
        for row, s in enumerate(schedules):
            confirmed = s.get("recorded_kind") == "confirmed"
            values = (str(s.get("label")), fmt_ms(s.get("recorded_ms")) + (" *" if confirmed else ""),
                      fmt_ms(s.get("remeasured_ms")), _ratio(s.get("ratio")), _pct(s.get("cv")),
                      f"{s.get('runs')} / {s.get('runs_tried', s.get('runs'))}", str(s.get("quiet_runs", "—")),
                      "yes" if s.get("throttled") else "no", _change(s.get("placement_ratio")),
                      _change(s.get("machine_drift")), str(s.get("verdict")), str(s.get("cause") or ""))
            tips = {1: "* confirmed in fresh processes when the session finished" if confirmed else
                       "the figure the session measured",
                    8: "how much slower with every buffer at the same page offset (tunelab.core.measure.placement)",
                    9: "how much slower the machine itself was than at recording, by a reference kernel"}
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setToolTip(tips.get(col) or str(s.get("cause") or s.get("verdict")))
                if 1 <= col <= 9:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                brush = ROW_BRUSH.get(str(s.get("verdict")))
                if brush is not None:
                    item.setBackground(brush)
                table.setItem(row, col, item)

    def _fill_shapes(self) -> None:
        rows = self._rows
        table = self.shape_table
        table.setRowCount(len(rows))
        bold = QFont()
        bold.setBold(True)
        for row, r in enumerate(rows):
            tuned = fmt_ms(r.get("tuned_ms"))
            if r.get("tuned_session_id") is not None:
                tuned += f" (#{r['tuned_session_id']})"
            falls = r.get("falls_off")
            values = (str(r.get("shape_text")), str(r.get("status")), fmt_ms(r.get("latency_ms")),
                      fmt_gflops(r.get("gflops")), tuned, _ratio(r.get("ratio_to_tuned")),
                      "—" if falls is None else ("yes" if falls else "no"),
                      "; ".join(r.get("reasons") or []) or str(r.get("error") or ""))
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setToolTip(values[-1] or text)
                if 2 <= col <= 5:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if falls:
                    item.setBackground(FALLS_OFF_BRUSH)
                    if col in (0, 6, 7):
                        item.setFont(bold)
                table.setItem(row, col, item)
        if self.across is not None:
            self.shapes_summary.setText(str(self.across.get("summary") or ""))
            limit = (self.across.get("rule") or {}).get("max_ratio_to_tuned")
            if limit:
                self.ratio_limit.setValue(float(limit))
        elif self.running and self._n_shapes:
            self.shapes_summary.setText(f"{len(rows)} of {self._n_shapes} shape(s) measured…")
        else:
            self.shapes_summary.setText("" if rows else "Give a shape list and press Validate (or Shapes only) to "
                                        "see how the best schedule does on other shapes.")
        self._draw_plot()

    def _draw_plot(self) -> None:
        rows = self._rows
        x = np.arange(len(rows), dtype=float)
        heights = [r.get("gflops") or 0.0 for r in rows]
        brushes = [pg.mkBrush(BAR_OFF_BRUSH if r.get("falls_off") else BAR_BRUSH) for r in rows]
        self.bars.setOpts(x=x - 0.2, height=heights, width=0.38, brushes=brushes)
        tuned = [r.get("tuned_gflops") or 0.0 for r in rows]
        self.tuned_bars.setOpts(x=x + 0.2, height=tuned, width=0.38)
        ratio = np.array([r.get("ratio_to_tuned") if r.get("ratio_to_tuned") is not None else np.nan
                          for r in rows], dtype=float)
        finite = np.isfinite(ratio)
        self.ratio_curve.setData(x[finite], ratio[finite])
        self.plot.getAxis("bottom").setTicks([list(zip(x.tolist(), _varying_label(rows), strict=True)), []])
        if len(rows):
            self.plot.setXRange(-0.6, len(rows) - 0.4, padding=0)
            top = max([*heights, *tuned, 1e-9])
            self.plot.setYRange(0, top * 1.1, padding=0)
            high = max(float(ratio[finite].max()) if finite.any() else 1.0, self.ratio_limit.value())
            self.ratio_view.setYRange(0, high * 1.15, padding=0)

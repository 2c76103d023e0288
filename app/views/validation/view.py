"""The Validation panel: do the selected session's numbers hold?

"Validate" re-measures the session's K fastest schedules in fresh processes and says so in plain words:
stable, noisy (and why: another busy process, throttling, first-run cost…) or regressed. With a shape
list it also carries the best schedule over to those shapes; their rows appear as each shape is
measured, fall-offs highlighted, with GFLOP/s per shape plotted against the schedules tuned for those
shapes. "Shapes only" skips the re-measurement. Runs stored in the store (store.validations) are listed
and can be opened again.

The work is one call of tunelab.core.usecases.validation.validate_and_store in a StreamWorker with its
own Store; this widget only draws what it reports (with tunelab.app.views.validation.drawing).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QWidget

from tunelab.app import theme
from tunelab.app.views.stated import superseded_words
from tunelab.app.views.validation.drawing import (
    PAST_COLUMNS,
    SCHEDULE_COLUMNS,
    SHAPE_COLUMNS,
    ShapesPlot,
    fill_past,
    fill_schedules,
    fill_shapes,
    make_table,
    titled,
    verdict_words,
    when,
)
from tunelab.app.views.validation.verdict_box import VerdictBox
from tunelab.app.views.worker_view import WorkerView
from tunelab.app.widgets.fields import captioned_fields, int_spin, line_edit, push_button
from tunelab.app.widgets.formatting import default_shapes, fmt_ms, fmt_shape
from tunelab.app.widgets.pages import captioned, split
from tunelab.app.workers.engine import StreamWorker
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store
from tunelab.core.usecases.export import ExportPick
from tunelab.core.usecases.validation import (
    AcrossShapes,
    FallsOffRule,
    ShapeRow,
    ValidationOutcome,
    ValidationReport,
    validate_and_store,
)

NOT_VALIDATED = (
    "Re-measure the fastest schedules in fresh processes to see whether the session's figures hold."
)


def validation_job(store: Store, session_id: int, *, emit, is_cancelled, **request: Any) -> ValidationOutcome:
    """Runs in the worker: the use case, with what it reports passed on to the GUI thread as
    ("progress", done, total, text), ("report", report), ("shapes", n, rule) and ("row", row)."""
    return validate_and_store(
        store,
        session_id,
        **request,
        is_cancelled=is_cancelled,
        on_progress=lambda done, total, text: emit(("progress", done, total, text)),
        on_report=lambda report: emit(("report", report)),
        on_shapes=lambda shapes, rule: emit(("shapes", len(shapes), rule)),
        on_row=lambda row: emit(("row", row)),
    )


class ValidationView(WorkerView):
    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(store, parent)
        self._stated: ExportPick | None = None  # the shown session's confirmed pick (set_stated)
        self._title_record: Any = None
        self._purposes: dict[int, str | None] = {}  # stored validation id -> why it was made (see _purpose)
        self._run_session: int | None = None
        self._remeasuring = False
        self._rows: list[ShapeRow] = []
        self._n_shapes = 0
        self.report: ValidationReport | None = None
        self.across: AcrossShapes | None = None
        self._rule: FallsOffRule | None = None  # the falls-off rule of the shapes shown, once known

        self._build_title("validation_title")
        controls = self._build_controls()
        # The verdict, in large plain words.
        self.verdict_box = VerdictBox("Not validated yet", NOT_VALIDATED)
        self.verdict_label = self.verdict_box.verdict_label
        self.cause_label = self.verdict_box.cause_label
        self.figures_label = self.verdict_box.figures_label
        self._lay_out(self, controls, self.verdict_box, self._build_tables())
        self.stage.hide()
        self._update_buttons()

    def _build_controls(self) -> QHBoxLayout:
        """Shape (for several), Top K, Repeats, other shapes, and the Validate / Shapes only / Stop buttons."""
        self.k_spin = int_spin(1, 20, 3, "How many of the session's fastest schedules to re-measure")
        self.runs_spin = int_spin(
            1,
            50,
            5,
            "Fresh processes: each loads every schedule afresh and measures it once, in a rotated order",
        )
        self.task_combo = QComboBox()
        self.task_combo.setToolTip("The session tunes several shapes: which one to re-measure")
        self.task_label = QLabel("Shape")
        self.task_combo.hide()  # shown for a session that tunes several shapes
        self.task_label.hide()
        self.shapes_edit = line_edit(
            "shapes_edit",
            "Other shapes to carry the best schedule over to (optional): "
            "M=8,16,32,64 · M=16..128 · M=64,N=64,K=64;M=128,N=128,K=128",
        )
        self.shapes_edit.textChanged.connect(lambda _t: self._update_buttons())
        self.validate_button = push_button(
            "Validate",
            "Re-measure the K fastest schedules in fresh processes, then the shapes",
            lambda: self.start(remeasure=True),
            "validate_button",
        )
        self.validate_button.setDefault(True)
        self.shapes_button = push_button(
            "Shapes only",
            "Carry the best schedule over to the shapes, without re-measuring",
            lambda: self.start(remeasure=False),
        )
        self.stop_button = push_button(
            "Stop",
            "Stop: nothing of this run is stored (a re-measurement's worker processes "
            "are killed at once; the shapes stop after the one being measured)",
            self.stop,
            "stop_button",
        )
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addWidget(self.task_label)
        controls.addWidget(self.task_combo)
        fields = (("Top K", self.k_spin), ("Repeats", self.runs_spin), ("Other shapes", self.shapes_edit))
        captioned_fields(fields, stretch=self.shapes_edit, layout=controls)
        for button in (self.validate_button, self.shapes_button, self.stop_button):
            controls.addWidget(button)
        return controls

    def _build_tables(self) -> QSplitter:
        """The re-measured schedules and past runs above, the shapes' table and plot below."""
        self.schedule_table = make_table(SCHEDULE_COLUMNS, stretch=len(SCHEDULE_COLUMNS) - 1)
        self.past_table = make_table(PAST_COLUMNS, stretch=3)
        self.past_table.itemSelectionChanged.connect(self._on_past_selected)
        self.past_runs: list[dict[str, Any]] = []
        past = titled("Past validations of this session (pick one to show it)", self.past_table)
        self.shape_table = make_table(SHAPE_COLUMNS, stretch=len(SHAPE_COLUMNS) - 1)
        self.shapes_summary = QLabel()
        self.shapes_summary.setObjectName("shapes_summary")
        self.shapes_summary.setWordWrap(True)
        self.shapes_summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        shapes_page = captioned(self.shapes_summary, self.shape_table)
        self.shapes_plot = ShapesPlot()
        self.bars = self.shapes_plot.bars

        top = split(
            Qt.Orientation.Horizontal, (titled("Re-measured schedules", self.schedule_table), past), (3, 2)
        )
        bottom = split(
            Qt.Orientation.Horizontal,
            (titled("Across shapes", shapes_page), self.shapes_plot),
            (1, 1),
            (700, 560),
        )
        return split(Qt.Orientation.Vertical, (top, bottom), sizes=(260, 360))

    # ---- helpers -------------------------------------------------------------------------------
    def _set_stage(self, text: str) -> None:
        self.stage.setText(text)
        self.stage.setVisible(bool(text))

    def exportable(self):
        return self.shapes_plot.scene()

    @property
    def verdict(self) -> str:
        return self.verdict_label.text()

    def shape_rows(self) -> list[ShapeRow]:
        return list(self._rows)

    # ---- session -------------------------------------------------------------------------------
    def set_session(self, session_id: int | None) -> None:
        record = self._load_session(session_id)
        self._fill_tasks(record)
        self._show_title(record)
        if record is not None:
            self.shapes_edit.setPlaceholderText(f"optional, e.g. {default_shapes(record.shape)}")
        if not self.running:
            self._clear_results()
            self.refresh_past()
            self._show_latest_past()
        self._update_buttons()

    def session_updated(self, record: Any) -> None:
        """The shown session changed in the store (trials added, finished, confirmed): its header says
        so, and a validation stored meanwhile (the session's own confirmation) is listed and, when none
        is shown yet, shown: the panel never reads "Not validated yet" beside a stored validation."""
        if record is None or record.id != self.session_id:
            return
        self._show_title(record)
        if self.running:
            return
        try:
            ids = [run["id"] for run in self._store.validations(record.id)]
        except TunelabError:
            return
        if ids != [run["id"] for run in self.past_runs]:
            shown = self.report is not None
            self.refresh_past()
            if not shown:
                self._show_latest_past()

    def set_stated(self, pick: ExportPick | None) -> None:
        """The shown session's confirmed figure (tunelab.app.views.stated), or None: the header states it,
        as the Live header and the browser do, rather than the session's own best it supersedes. Kept
        whichever session it is of: the header only states it for its own session."""
        if pick is not self._stated:
            self._stated = pick
            self._show_title(self._title_record)

    def _show_title(self, record: Any) -> None:
        self._title_record = record
        if record is None:
            self.title.setText("No session selected." if self.session_id is None else self.title.text())
            return
        best = "no successful trial yet" if record.best_ms is None else f"best {fmt_ms(record.best_ms)} ms"
        if self._stated is not None and self._stated.trial.session_id == record.id:
            best = superseded_words(self._stated)
        self.title.setText(
            f"<b>Session {record.id}</b> {record.name} · {record.n_trials} trials, {best}. "
            "Validate re-measures its fastest schedules in fresh processes and, with shapes, "
            "carries the best one over to them."
        )

    def _show_latest_past(self) -> None:
        """Select and show the latest stored run. Shown here, not through the selection signal: a
        selection already on row 0 (the previous session's, or the same one refreshed) emits nothing."""
        if not self.past_runs:
            return
        self.past_table.blockSignals(True)
        self.past_table.clearSelection()
        self.past_table.selectRow(0)
        self.past_table.blockSignals(False)
        self._show_past(0)

    def _fill_tasks(self, record: Any) -> None:
        """The shape picker, shown for a session that tunes several shapes (tasks)."""
        tasks = []
        if record is not None:
            try:
                tasks = self._store.tasks(record.id)
            except TunelabError:
                tasks = []
        self.task_combo.clear()
        for t in tasks:
            self.task_combo.addItem(f"{fmt_shape(t.shape)}{' (primary)' if t.index == 0 else ''}", t.index)
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
        if self.session_id is not None:
            try:
                self.past_runs = self._store.validations(self.session_id)
            except TunelabError as exc:
                self._set_stage(f"Cannot read past validations: {exc}")
        fill_past(self.past_table, self.past_runs, self._purpose)

    def _purpose(self, run: dict[str, Any]) -> str | None:
        """Why a stored validation was made ("confirm" for a session's own confirmation); cached per id."""
        cache = self._purposes
        if run["id"] not in cache:
            try:
                cache[run["id"]] = ValidationReport.from_json(
                    self._store.validation(run["id"])
                ).source.purpose
            except TunelabError:
                cache[run["id"]] = None
        return cache[run["id"]]

    def _on_past_selected(self) -> None:
        rows = {i.row() for i in self.past_table.selectedIndexes()}
        if not rows or self.running:
            return
        self._show_past(min(rows))

    def _show_past(self, row: int) -> None:
        run = self.past_runs[row]
        try:
            report = ValidationReport.from_json(self._store.validation(run["id"]))
        except TunelabError as exc:
            self._set_stage(f"Cannot open validation {run['id']}: {exc}")
            return
        self._show_report(report)
        self._rows = [r for r in report.shapes if isinstance(r, ShapeRow)]
        self.across = report.across_shapes
        self._rule = self.across.rule if self.across is not None else None
        self._fill_shapes()
        self._set_stage(f"Stored validation {run['id']} of {when(run)}.")

    # ---- running -------------------------------------------------------------------------------
    def _update_buttons(self) -> None:
        idle = not self.running and self.session_id is not None
        self.validate_button.setEnabled(idle)
        self.shapes_button.setEnabled(idle and bool(self.shapes_edit.text().strip()))
        self.stop_button.setEnabled(self._stoppable())
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
        top_k, runs = self.k_spin.value(), self.runs_spin.value()
        worker = self._launch(
            validation_job,
            self.session_id,
            top_k=top_k,
            runs=runs,
            shapes=shapes or None,
            remeasure=remeasure,
            task=self.task,
        )
        self._set_stage(
            f"Re-measuring the {top_k} fastest schedule(s) of session {self.session_id} in {runs} "
            "fresh process(es)…"
            if remeasure
            else "Starting…"
        )
        if remeasure:
            self.verdict_label.setText("Validating…")
            self.verdict_box.style_verdict(None)
        worker.start()
        self._update_buttons()
        return worker

    def _on_progress(self, item: tuple) -> None:
        kind = item[0]
        if kind == "progress":
            _, done, total, text = item
            self.progress.setRange(0, max(total, 1))
            self.progress.setValue(done)
            self.progress.setFormat("run %v / %m")
            self._set_stage(f"Re-measuring: {text}")
        elif kind == "report":
            self._show_report(item[1])
        elif kind == "shapes":
            _, self._n_shapes, self._rule = item
            self.progress.setRange(0, self._n_shapes)
            self.progress.setValue(0)
            self.progress.setFormat("shape %v / %m")
            self._set_stage(
                f"Measuring the best schedule of session {self._run_session} on {self._n_shapes} shape(s)…"
            )
        elif kind == "row":
            self._rows.append(item[1])
            self.progress.setValue(len(self._rows))
            self._fill_shapes()

    def _on_done(self, outcome: ValidationOutcome) -> None:
        if outcome.cancelled and outcome.report is None and outcome.across is None:
            self._show_stopped()
            return
        if outcome.report is not None:
            self._show_report(outcome.report)
        if outcome.across is not None:
            self.across = outcome.across
            self._rule = outcome.across.rule
            self._rows = list(outcome.across.rows)
            self._fill_shapes()
        if outcome.cancelled:
            self._set_stage("Stopped." + (" Nothing was stored." if outcome.report is not None else ""))
        else:
            self._set_stage(
                "Done." + (" The validation is stored with the session." if outcome.stored else "")
            )

    def _show_stopped(self) -> None:
        """A run stopped before it had anything to keep: nothing is stored, the past runs are as they were."""
        if self._remeasuring:
            self.verdict_box.say(
                "Stopped",
                "The re-measurement was stopped before it finished; nothing was stored. "
                "Past validations are unchanged.",
            )
        self._set_stage("Stopped.")

    def _show_failure(self, message: str) -> None:
        self._set_stage(f"<span style='color:{theme.ERROR}'>Validation failed: {message}</span>")
        if self.report is None:
            self.verdict_label.setText("Not validated")
            self.cause_label.setText(message)
            self.verdict_box.style_verdict(None)

    def _run_ended(self) -> None:
        self.refresh_past()

    # ---- drawing -------------------------------------------------------------------------------
    def _clear_results(self) -> None:
        self.report = None
        self.across = None
        self._rule = None
        self._rows = []
        self.last_error = ""
        self.schedule_table.setRowCount(0)
        self.verdict_box.say("Not validated yet", NOT_VALIDATED)
        self._fill_shapes()
        self._set_stage("")

    def _show_report(self, report: ValidationReport) -> None:
        self.report = report
        headline, cause, figures = verdict_words(report)
        self.verdict_box.say(headline, cause, report.verdict, figures)
        fill_schedules(self.schedule_table, report.schedules, self._labels(report))

    def _labels(self, report: ValidationReport) -> dict[int, str]:
        """Each re-measured trial named by its number within the session ("trial #12"), as every view
        names it; a report stored before trials were numbered says "trial <id>"."""
        out = {}
        for s in report.schedules:
            if s.trial_id is not None:
                try:
                    out[s.trial_id] = f"trial #{self._store.trial(s.trial_id).number}"
                except TunelabError:
                    pass
        return out

    def _fill_shapes(self) -> None:
        rows = self._rows
        fill_shapes(self.shape_table, rows)
        if self.across is not None:
            self.shapes_summary.setText(self.across.summary)
        elif self.running and self._n_shapes:
            self.shapes_summary.setText(f"{len(rows)} of {self._n_shapes} shape(s) measured…")
        else:
            self.shapes_summary.setText(
                ""
                if rows
                else "Give a shape list and press Validate (or Shapes only) to "
                "see how the best schedule does on other shapes."
            )
        self.shapes_plot.draw(rows, self._rule.max_ratio_to_tuned if self._rule is not None else None)

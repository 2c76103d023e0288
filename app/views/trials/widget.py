"""The trials table widget: the filtered, sorted trials of a session with a detail pane (config,
samples, error); rows copy as TSV and the shown rows export to CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PySide6.QtCore import QEvent, QItemSelection, QItemSelectionModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from tunelab.app import theme
from tunelab.app.views.trials.columns import COLUMNS, CONFIG_COL, DEVICE_COL, USUAL_TEXT
from tunelab.app.views.trials.model import TrialTableModel, config_of
from tunelab.app.views.trials.proxy import TrialSortFilterProxy
from tunelab.app.widgets.buffers import TrialColumns, columns_of, n_rows, rows_after
from tunelab.app.widgets.formatting import fmt_ms
from tunelab.app.widgets.pages import split
from tunelab.app.widgets.row_table import sorted_rows
from tunelab.app.workers.following import read_new
from tunelab.core.errors import TunelabError
from tunelab.core.faults import describe_failures
from tunelab.core.records import TrialRecord, trial_label
from tunelab.core.stats import sample_stats
from tunelab.core.store import Store

CSV_FIELDS = (
    "id",
    "number",
    "index",
    "round",
    "status",
    "latency_ms",
    "mean_ms",
    "std_ms",
    "min_ms",
    "max_ms",
    "q1_ms",
    "q3_ms",
    "predicted_ms",
    "build_s",
    "run_s",
    "started_at",
    "finished_at",
    "config",
    "error",
    "device",
)


def csv_row(t: TrialRecord) -> list:
    return [
        t.id,
        t.number,
        t.index,
        t.round,
        t.status,
        t.latency_ms,
        t.mean_ms,
        t.std_ms,
        t.min_ms,
        t.max_ms,
        t.q1_ms,
        t.q3_ms,
        t.predicted_ms,
        t.build_s,
        t.run_s,
        t.started_at,
        t.finished_at,
        json.dumps(config_of(t), separators=(",", ":")),
        t.error or "",
        t.device or "",
    ]


_CELL_PADDING = 14  # a cell's margins on both sides, with room to spare


class TrialsTable(QWidget):
    """The trials of the session given to `set_session`; `poll()` appends newly stored ones."""

    trial_selected = Signal(int)  # -1: none

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self.session_id: int | None = None
        self._last_id = 0
        self.model = TrialTableModel(self, store)
        self.proxy = TrialSortFilterProxy(self)
        self.proxy.setSourceModel(self.model)

        top = self._build_bar()
        self._build_table()
        self._build_details()

        splitter = split(Qt.Orientation.Vertical, (self.table, self.details), (3, 1))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        self._update_count()

    def _build_bar(self) -> QHBoxLayout:
        """The filter, the failures by class, the count, Copy rows and Export CSV."""
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter: any text in any column (status, knob value, error…)")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._on_filter_changed)
        self.count_label = QLabel()
        self.count_label.setProperty("role", "hint")
        # The failures by class ("21 of 32 failed: 19 SIGILL, 2 build error"); sort by the Failure
        # column to see each class together.
        self.failures_label = QLabel()
        self.failures_label.setObjectName("failures_label")
        self.failures_label.setStyleSheet(f"color: {theme.ERROR};")
        self.failures_label.setToolTip("Sort by the Failure column to group the failed trials by class")
        copy_button = QPushButton("Copy rows")
        copy_button.clicked.connect(self.copy_selection)
        self.csv_button = QPushButton("Export CSV…")
        self.csv_button.clicked.connect(self._on_export_csv)
        top = QHBoxLayout()
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.failures_label)
        top.addWidget(self.count_label)
        top.addWidget(copy_button)
        top.addWidget(self.csv_button)
        return top

    def _build_table(self) -> None:
        """The trials' table: sortable, the config taking the spare width, Copy and Copy config JSON."""
        self.table = sorted_rows(
            self.proxy, Qt.SortOrder.AscendingOrder, QAbstractItemView.SelectionMode.ExtendedSelection
        )
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        # The config takes the width the other columns leave, so that all of them stay in sight in a
        # 1280-pixel window (a wider one widens the config): its cells elide, the tooltip and the
        # Knobs tab hold the whole config.
        header.setSectionResizeMode(CONFIG_COL, QHeaderView.ResizeMode.Stretch)
        self.table.ensurePolished()  # the header's font and padding (the app's style sheet) are known
        self._fit_columns()
        self._show_device_column()
        self.table.selectionModel().currentRowChanged.connect(self._on_current_changed)
        copy_action = QAction("Copy", self.table)
        copy_action.setShortcut(QKeySequence.StandardKey.Copy)
        copy_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy_action.triggered.connect(self.copy_selection)
        self.table.addAction(copy_action)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        copy_config = QAction("Copy config JSON", self.table)
        copy_config.triggered.connect(self._on_copy_config)
        self.table.addAction(copy_config)

    def _build_details(self) -> None:
        """The selected trial's knobs, config JSON, samples and error, one tab each."""
        self.details = QTabWidget()
        # The knobs as name | value rows; the JSON tab keeps the exact config to copy.
        self.knob_table = QTableWidget(0, 2)
        self.knob_table.setHorizontalHeaderLabels(("Knob", "Value"))
        self.knob_table.verticalHeader().hide()
        self.knob_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.knob_table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.knob_table.horizontalHeader().setStretchLastSection(True)
        self.details.addTab(self.knob_table, "Knobs")
        self.config_text = QPlainTextEdit(readOnly=True)
        self.samples_text = QPlainTextEdit(readOnly=True)
        self.error_text = QPlainTextEdit(readOnly=True)
        for text in (self.config_text, self.samples_text, self.error_text):
            text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.details.addTab(self.config_text, "Config JSON")
        self.details.addTab(self.samples_text, "Samples")
        self.details.addTab(self.error_text, "Error")

    def _fit_columns(self) -> None:
        """Every column but the config as wide as its title or its usual text, whichever is wider."""
        header = self.table.horizontalHeader()
        cell = self.table.fontMetrics()
        for col, text in USUAL_TEXT.items():
            width = max(header.sectionSizeHint(col), cell.horizontalAdvance(text) + _CELL_PADDING)
            self.table.setColumnWidth(col, width)

    def _show_device_column(self) -> None:
        """The Device column only for a session measured (in part) on RPC servers: for one measured
        here it would say "this machine" on every row, in the width the config needs."""
        self.table.setColumnHidden(DEVICE_COL, not self.model.has_remote)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.FontChange):
            self._fit_columns()

    # ---- reading -------------------------------------------------------------------------------
    def set_session(
        self, session_id, trials: list[TrialRecord] | None = None, columns: TrialColumns | None = None
    ) -> None:
        """Show session `session_id` (an id, a record with `.id`, or None); `columns` (what
        `Store.trial_columns` returns) or `trials` (TrialRecords): its trials as already read (in id
        order), so that the store is not read again."""
        if session_id is not None and not isinstance(session_id, int):
            session_id = session_id.id
        self.session_id = session_id
        self._last_id = 0
        self._show_details(None)
        if session_id is None:
            self.model.set_columns(columns_of([]))
        elif columns is not None:
            self.model.set_columns(columns, session_id)
        elif trials is not None:
            self.model.set_columns(columns_of(trials), session_id, trials)
        else:
            self.model.set_columns(columns_of([]), session_id)
            self._show_device_column()
            self.poll()
            return
        if self.model.rowCount():
            self._last_id = self.model.trial_id(self.model.rowCount() - 1)
        self._update_count()
        self._show_device_column()

    def poll(self) -> int:
        columns = read_new(self._store, self.session_id, self._last_id, self.count_label.setText)
        return 0 if columns is None else self.add(columns)

    def add(self, columns: TrialColumns) -> int:
        """Append newly stored trials (the main window reads them once for every view)."""
        if self.session_id is None:
            return 0
        new = rows_after(columns, self._last_id)
        n = n_rows(new)
        if n:
            self._last_id = int(new["id"][-1])
            self.model.append_columns(new)
            self._update_count()
            self._show_device_column()
        return n

    def select_trial(self, trial_id: int) -> None:
        row = self.model.row_of(trial_id)
        if row is None:
            return
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if index.isValid():
            self.table.selectRow(index.row())
            self.table.scrollTo(index)

    def selected_trial(self) -> int | None:
        index = self.table.selectionModel().currentIndex()
        if not index.isValid():
            return None
        return self.model.trial_id(self.proxy.mapToSource(index).row())

    def visible_trials(self) -> list[TrialRecord]:
        """The rows as shown: filtered and sorted."""
        rows = self.model.trials()
        return [rows[r] for r in self.proxy.source_rows().tolist()]

    # ---- copy and export -----------------------------------------------------------------------
    def selection_text(self) -> str:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        lines = ["\t".join(COLUMNS)]
        source = self.proxy.source_rows()
        for r in rows:
            row = int(source[r])
            lines.append("\t".join(self.model.display_text(row, c) for c in range(len(COLUMNS))))
        return "\n".join(lines)

    def copy_selection(self) -> None:
        QGuiApplication.clipboard().setText(self.selection_text())

    def export_csv(self, path: str | Path) -> int:
        """Write the visible rows (every field, config as JSON) to `path`; returns how many."""
        trials = self.visible_trials()
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_FIELDS)
            writer.writerows(csv_row(t) for t in trials)
        return len(trials)

    def _on_export_csv(self) -> None:
        if self.session_id is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export trials", f"session-{self.session_id}-trials.csv", "CSV (*.csv)"
        )
        if path:
            self.export_csv(path)

    def _on_copy_config(self) -> None:
        trial_id = self.selected_trial()
        if trial_id is not None:
            row = self.model.row_of(trial_id)
            if row is None:  # not loaded in this view (filtered out since it was selected)
                return
            QGuiApplication.clipboard().setText(json.dumps(self.model.config(row), indent=2))

    # ---- slots ---------------------------------------------------------------------------------
    def _on_filter_changed(self, text: str) -> None:
        # The proxy resets on a filter change; keep the selected trials that stay visible.
        selection = self.table.selectionModel()
        source = self.proxy.source_rows()
        selected = (
            np.unique(source[[i.row() for i in selection.selectedRows()]])
            if selection.hasSelection()
            else np.zeros(0, dtype=np.int64)
        )
        current = self.selected_trial()
        self.proxy.setFilterFixedString(text)
        self._restore_selection(selected, current)
        self._update_count()

    def _restore_selection(self, source_rows: np.ndarray, current_id: int | None) -> None:
        selection_model = self.table.selectionModel()
        rows = np.sort(self.proxy.mapped_rows(source_rows))
        if len(rows):
            selection = QItemSelection()
            breaks = np.flatnonzero(np.diff(rows) != 1)
            starts = np.concatenate(([0], breaks + 1))
            ends = np.concatenate((breaks, [len(rows) - 1]))
            last = len(COLUMNS) - 1
            for s, e in zip(rows[starts].tolist(), rows[ends].tolist(), strict=True):
                selection.select(self.proxy.index(s, 0), self.proxy.index(e, last))
            selection_model.select(selection, QItemSelectionModel.SelectionFlag.ClearAndSelect)
        row = None if current_id is None else self.model.row_of(current_id)
        index = QModelIndex() if row is None else self.proxy.mapFromSource(self.model.index(row, 0))
        if index.isValid():
            selection_model.setCurrentIndex(index, QItemSelectionModel.SelectionFlag.NoUpdate)
        elif current_id is not None:
            self._show_details(None)
            self.trial_selected.emit(-1)

    def _update_count(self) -> None:
        shown, total = self.proxy.rowCount(), self.model.rowCount()
        self.count_label.setText(f"{total} trials" if shown == total else f"{shown} of {total} trials")
        failed = describe_failures(self.model.failures(), total)
        self.failures_label.setText(failed)
        self.failures_label.setVisible(bool(failed))

    def _show_knobs(self, config: dict) -> None:
        """One row per knob: its name and its value on one line ([8, 4, 2], not a number per line)."""
        self.knob_table.setRowCount(len(config))
        for row, (name, value) in enumerate(config.items()):
            text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
            for col, cell in enumerate((str(name), text)):
                item = QTableWidgetItem(cell)
                item.setToolTip(cell)
                self.knob_table.setItem(row, col, item)

    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            self._show_details(None)
            self.trial_selected.emit(-1)
            return
        trial = self.model.trial(self.proxy.mapToSource(current).row())
        self._show_details(trial)
        self.trial_selected.emit(trial.id)

    def _show_details(self, trial: TrialRecord | None) -> None:
        if trial is None:
            for text in (self.config_text, self.samples_text, self.error_text):
                text.setPlainText("")
            self.knob_table.setRowCount(0)
            return
        try:
            samples = self._store.samples(trial.id)
        except TunelabError as exc:
            samples, note = [], str(exc)
        else:
            note = ""
        config = config_of(trial)
        self.config_text.setPlainText(json.dumps(config, indent=2))
        self._show_knobs(config)
        lines = [
            f"trial {trial_label(trial.number, trial.session_id, trial.id)}, round {trial.round} · {trial.status}",
            "",
        ]
        if samples:
            stats = sample_stats(samples)
            spread = f"; CV {100 * stats.cv:.1f}%, IQR {fmt_ms(stats.iqr)} ms" if stats is not None else ""
            lines.append(
                f"{len(samples)} samples (ms): median {fmt_ms(trial.latency_ms)}, mean {fmt_ms(trial.mean_ms)}, "
                f"std {fmt_ms(trial.std_ms)}, min {fmt_ms(trial.min_ms)}, max {fmt_ms(trial.max_ms)}{spread}"
            )
            lines += [f"  {i:3d}  {ms:.6g}" for i, ms in enumerate(samples)]
        else:
            lines.append(note or "no samples: the trial failed before it was timed")
        if trial.build_s is not None or trial.run_s is not None:
            lines += ["", f"build {fmt_ms(trial.build_s)} s · run {fmt_ms(trial.run_s)} s"]
        self.samples_text.setPlainText("\n".join(lines))
        self.error_text.setPlainText(trial.error or "no error")
        if trial.error and not trial.ok:
            self.details.setCurrentWidget(self.error_text)

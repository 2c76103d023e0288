"""The trials table: every trial of a session, sortable and filterable, with its config, raw samples
and error text; rows copy as TSV and the (filtered, sorted) table exports to CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QAction, QBrush, QColor, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.formatting import config_summary, first_line, fmt_ms
from core.errors import TunelabError
from core.records import TrialRecord
from core.store import Store

COLUMNS = ("ID", "Index", "Round", "Status", "Latency ms", "Mean ms", "Std ms", "Predicted ms", "Config", "Error")
NUMERIC = {0, 1, 2, 4, 5, 6, 7}
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
CSV_FIELDS = ("id", "index", "round", "status", "latency_ms", "mean_ms", "std_ms", "min_ms", "max_ms",
              "predicted_ms", "build_s", "run_s", "started_at", "finished_at", "config", "error")


class TrialTableModel(QAbstractTableModel):
    """Trials as rows; `append` adds newly stored ones at the end (no reset, selection kept)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[TrialRecord] = []

    def set_trials(self, trials: list[TrialRecord]) -> None:
        self.beginResetModel()
        self._rows = list(trials)
        self.endResetModel()

    def append(self, trials: list[TrialRecord]) -> None:
        if not trials:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(trials) - 1)
        self._rows.extend(trials)
        self.endInsertRows()

    def trial(self, row: int) -> TrialRecord:
        return self._rows[row]

    def row_of(self, trial_id: int) -> int | None:
        return next((i for i, t in enumerate(self._rows) if t.id == trial_id), None)

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        t = self._rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return display(t, col)
        if role == SORT_ROLE:
            return sort_key(t, col)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and not t.ok and col in (3, 9):
            return QBrush(QColor("#d93025"))
        if role == Qt.ItemDataRole.ToolTipRole and col == 9 and t.error:
            return t.error[:2000]
        if role == Qt.ItemDataRole.ToolTipRole and col == 8:
            return json.dumps(t.config, indent=1)
        return None


def display(t: TrialRecord, col: int) -> str:
    values = (str(t.id), str(t.index), str(t.round), t.status, fmt_ms(t.latency_ms), fmt_ms(t.mean_ms),
              fmt_ms(t.std_ms), fmt_ms(t.predicted_ms), config_summary(t.config), first_line(t.error))
    return values[col]


def sort_key(t: TrialRecord, col: int):
    inf = float("inf")

    def num(v: float | None) -> float:
        return inf if v is None else float(v)

    keys = (t.id, t.index, t.round, t.status, num(t.latency_ms), num(t.mean_ms), num(t.std_ms),
            num(t.predicted_ms), config_summary(t.config), t.error or "")
    return keys[col]


def csv_row(t: TrialRecord) -> list:
    return [t.id, t.index, t.round, t.status, t.latency_ms, t.mean_ms, t.std_ms, t.min_ms, t.max_ms,
            t.predicted_ms, t.build_s, t.run_s, t.started_at, t.finished_at,
            json.dumps(t.config, separators=(",", ":")), t.error or ""]


class TrialsTable(QWidget):
    """The trials of the session given to `set_session`; `poll()` appends newly stored ones."""

    trial_selected = Signal(int)  # -1: none

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self.session_id: int | None = None
        self._last_id = 0
        self.model = TrialTableModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)

        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter: any text in any column (status, knob value, error…)")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._on_filter_changed)
        self.count_label = QLabel()
        self.count_label.setProperty("role", "hint")
        copy_button = QPushButton("Copy rows")
        copy_button.clicked.connect(self.copy_selection)
        self.csv_button = QPushButton("Export CSV…")
        self.csv_button.clicked.connect(self._on_export_csv)
        top = QHBoxLayout()
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.count_label)
        top.addWidget(copy_button)
        top.addWidget(self.csv_button)

        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for col, width in enumerate((56, 60, 64, 96, 96, 96, 90, 112, 440)):
            self.table.setColumnWidth(col, width)
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

        self.details = QTabWidget()
        self.config_text = QPlainTextEdit(readOnly=True)
        self.samples_text = QPlainTextEdit(readOnly=True)
        self.error_text = QPlainTextEdit(readOnly=True)
        for text in (self.config_text, self.samples_text, self.error_text):
            text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.details.addTab(self.config_text, "Config")
        self.details.addTab(self.samples_text, "Samples")
        self.details.addTab(self.error_text, "Error")

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self.details)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        self._update_count()

    # ---- reading -------------------------------------------------------------------------------
    def set_session(self, session_id: int | None) -> None:
        self.session_id = session_id
        self._last_id = 0
        self.model.set_trials([])
        self._show_details(None)
        self.poll()

    def poll(self) -> int:
        if self.session_id is None:
            return 0
        try:
            trials = self._store.trials(self.session_id, since_id=self._last_id)
        except TunelabError as exc:
            self.count_label.setText(str(exc))
            return 0
        if trials:
            self._last_id = trials[-1].id
            self.model.append(trials)
            self._update_count()
        return len(trials)

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
        return self.model.trial(self.proxy.mapToSource(index).row()).id

    def visible_trials(self) -> list[TrialRecord]:
        """The rows as shown: filtered and sorted."""
        return [self.model.trial(self.proxy.mapToSource(self.proxy.index(r, 0)).row())
                for r in range(self.proxy.rowCount())]

    # ---- copy and export -----------------------------------------------------------------------
    def selection_text(self) -> str:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        lines = ["\t".join(COLUMNS)]
        for r in rows:
            t = self.model.trial(self.proxy.mapToSource(self.proxy.index(r, 0)).row())
            lines.append("\t".join(display(t, c) for c in range(len(COLUMNS))))
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
        path, _ = QFileDialog.getSaveFileName(self, "Export trials", f"session-{self.session_id}-trials.csv",
                                              "CSV (*.csv)")
        if path:
            self.export_csv(path)

    def _on_copy_config(self) -> None:
        trial_id = self.selected_trial()
        if trial_id is not None:
            row = self.model.row_of(trial_id)
            QGuiApplication.clipboard().setText(json.dumps(self.model.trial(row).config, indent=2))

    # ---- slots ---------------------------------------------------------------------------------
    def _on_filter_changed(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        self._update_count()

    def _update_count(self) -> None:
        shown, total = self.proxy.rowCount(), self.model.rowCount()
        self.count_label.setText(f"{total} trials" if shown == total else f"{shown} of {total} trials")

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
            return
        try:
            samples = self._store.samples(trial.id)
        except TunelabError as exc:
            samples, note = [], str(exc)
        else:
            note = ""
        self.config_text.setPlainText(json.dumps(trial.config, indent=2))
        lines = [f"trial {trial.id} (index {trial.index}, round {trial.round}) · {trial.status}", ""]
        if samples:
            lines.append(f"{len(samples)} samples (ms): median {fmt_ms(trial.latency_ms)}, mean {fmt_ms(trial.mean_ms)}, "
                         f"std {fmt_ms(trial.std_ms)}, min {fmt_ms(trial.min_ms)}, max {fmt_ms(trial.max_ms)}")
            lines += [f"  {i:3d}  {ms:.6g}" for i, ms in enumerate(samples)]
        else:
            lines.append(note or "no samples: the trial failed before it was timed")
        if trial.build_s is not None or trial.run_s is not None:
            lines += ["", f"build {fmt_ms(trial.build_s)} s · run {fmt_ms(trial.run_s)} s"]
        self.samples_text.setPlainText("\n".join(lines))
        self.error_text.setPlainText(trial.error or "no error")
        if trial.error and not trial.ok:
            self.details.setCurrentWidget(self.error_text)

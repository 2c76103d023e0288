"""The session browser: every session in the store, live, with Resume for the ones that stopped early."""

from __future__ import annotations

import os
import socket

import psutil
from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QAction, QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from tunelab.app import theme
from tunelab.app.resources import icon
from tunelab.app.views.stated import MARK_LEGEND, StatedFigures, stated_words
from tunelab.app.views.target_words import TargetWords, target_text
from tunelab.app.widgets.formatting import fmt_gflops, fmt_ms, fmt_shape, gflops
from tunelab.app.widgets.row_table import sorted_rows
from tunelab.app.widgets.table_model import HeaderedTableModel
from tunelab.app.workers.store_watcher import StoreWatcher
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store
from tunelab.core.usecases.export import StatedBest

COLUMNS = ("ID", "Name", "Status", "Workload", "Target", "Tuner", "Trials", "Best ms", "GFLOP/s")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
RESUMABLE = ("crashed", "cancelled", "paused", "created", "failed")
STATUS_COLOURS = {
    "running": theme.GOOD,
    "paused": theme.WARN,
    "crashed": theme.ERROR,
    "failed": theme.ERROR,
    "cancelled": theme.TEXT_FAINT,
    "created": theme.TEXT_FAINT,
}
_HOST = socket.gethostname()


def status_text(record: SessionRecord) -> str:
    return "crashed — resumable" if record.status == "crashed" else record.status


def owned_by_live_process(record: SessionRecord) -> bool:
    """True when another process on this host still holds the session (a paused CLI run)."""
    if record.pid is None or record.hostname != _HOST or record.pid == os.getpid():
        return False
    try:
        return psutil.pid_exists(record.pid)
    except Exception:  # noqa: BLE001 - unknowable: assume alive, do not offer to resume
        return True


def is_resumable(record: SessionRecord) -> bool:
    if record.status not in RESUMABLE:
        return False
    return not (record.status in ("paused", "created") and owned_by_live_process(record))


class SessionTableModel(HeaderedTableModel):
    """The store's sessions as rows; `set_sessions` replaces them with a fresh read."""

    columns = COLUMNS

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._rows: list[SessionRecord] = []
        self._stated: dict[int, StatedBest] = {}  # each session's one best, by session id (StatedFigures)
        self.target_words = TargetWords(self)
        self.target_words.described.connect(self._on_targets_described)
        self.active_session: int | None = None  # the one this window is tuning

    def set_sessions(self, records: list[SessionRecord], stated: dict[int, StatedBest] | None = None) -> None:
        """`stated`: the sessions' stated bests (what an export states, with its kind), shown as their best."""
        self.target_words.ask(records)
        old_stated, self._stated = self._stated, dict(stated or {})
        if [r.id for r in records] == [r.id for r in self._rows]:
            # Same sessions: only the rows whose record (or confirmed figure) changed are announced.
            old, self._rows = self._rows, list(records)
            last = len(COLUMNS) - 1
            for row, (before, now) in enumerate(zip(old, self._rows, strict=True)):
                if before != now or old_stated.get(now.id) is not self._stated.get(now.id):
                    self.dataChanged.emit(self.index(row, 0), self.index(row, last))
            return
        self.beginResetModel()
        self._rows = list(records)
        self.endResetModel()

    def _on_targets_described(self) -> None:
        if self._rows:
            self.dataChanged.emit(self.index(0, 4), self.index(len(self._rows) - 1, 4))

    def stated(self, session_id: int) -> StatedBest | None:
        return self._stated.get(session_id)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if (
            orientation == Qt.Orientation.Horizontal
            and role == Qt.ItemDataRole.ToolTipRole
            and section in (7, 8)
        ):
            return f"The figure an export states: {MARK_LEGEND}"
        return super().headerData(section, orientation, role)

    def record(self, row: int) -> SessionRecord:
        return self._rows[row]

    def row_of(self, session_id: int) -> int | None:
        return next((i for i, r in enumerate(self._rows) if r.id == session_id), None)

    def records(self) -> list[SessionRecord]:
        return list(self._rows)

    def n_rows(self) -> int:
        return len(self._rows)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self._rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(r, col)
        if role == SORT_ROLE:
            return self._sort_key(r, col)
        if role == Qt.ItemDataRole.ForegroundRole and col == 2 and r.status in STATUS_COLOURS:
            return QBrush(QColor(STATUS_COLOURS[r.status]))
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (0, 6, 7, 8):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(r, col)
        return None

    def _display(self, r: SessionRecord, col: int) -> str:
        if col == 0:
            return str(r.id)
        if col == 1:
            return r.name
        if col == 2:
            text = status_text(r)
            return f"{text} (here)" if r.id == self.active_session and r.status == "running" else text
        if col == 3:
            return f"{r.workload} {r.dtype}"
        if col == 4:
            return target_text(r)
        if col == 5:
            return f"{r.tuner} · {r.space_kind}"
        if col == 6:
            return f"{r.n_trials} / {r.trials_budget}"
        stated = self._stated.get(r.id)
        if col == 7:
            # The figure an export states, marked with its kind: ✓ only where it can be held to.
            return fmt_ms(r.best_ms) if stated is None else f"{fmt_ms(stated.ms)} {stated.mark}"
        return fmt_gflops(r.best_gflops if stated is None else stated.gflops)

    def _sort_key(self, r: SessionRecord, col: int):
        inf = float("inf")
        stated = self._stated.get(r.id)
        best_ms = stated.ms if stated is not None else r.best_ms
        keys = (
            r.id,
            r.name.lower(),
            r.status,
            r.workload,
            target_text(r),
            r.tuner,
            r.n_trials,
            best_ms if best_ms is not None else inf,
            (gflops(r.flops, best_ms) if best_ms else None) or 0.0,
        )
        return keys[col]

    def _tooltip(self, r: SessionRecord, col: int) -> str | None:
        stated = self._stated.get(r.id)
        if col in (7, 8) and stated is not None:
            return stated_words(stated)
        if col == 2 and r.error:
            return r.error
        if col == 2 and r.status == "crashed":
            return "The process running this session stopped without finishing it. Resume continues where it stopped."
        if col in (1, 3):
            return f"{r.workload} {fmt_shape(r.shape)} {r.dtype}"
        if col == 6:
            return f"{r.n_trials} trials stored ({r.n_failed} failed) of a budget of {r.trials_budget}"
        return None


class SessionBrowser(QWidget):
    """The table of sessions. Polls the store through a StoreWatcher (its own unless given one)."""

    session_selected = Signal(int)  # -1: nothing selected
    resume_requested = Signal(int)

    def __init__(
        self, store: Store, watcher: StoreWatcher | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._store = store
        self.stated = StatedFigures(store)  # confirmed figures, shared with the main window's views
        self.model = SessionTableModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = sorted_rows(
            self.proxy, Qt.SortOrder.DescendingOrder, QAbstractItemView.SelectionMode.SingleSelection
        )
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._on_context_menu)
        self.table.doubleClicked.connect(self._on_double_clicked)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)

        self.resume_button = QPushButton(icon("resume"), "Resume")
        self.resume_button.setToolTip("Continue the selected session where it stopped")
        self.resume_button.setEnabled(False)
        self.resume_button.clicked.connect(self._on_resume_clicked)
        self.summary = QLabel()
        self.summary.setProperty("role", "hint")
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.resume_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.table)

        self._selected: int | None = None
        if watcher is None:
            watcher = StoreWatcher(store, parent=self)
            watcher.start()
        self.watcher = watcher
        # The watcher's read of the sessions is shared (the main window's Compare and run bar use it).
        watcher.sessions_changed.connect(self._on_sessions_changed)
        watcher.failed.connect(self.summary.setText)
        self._show(watcher.sessions())

    # ---- reading -------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read every session again (the watcher only re-reads those that changed)."""
        try:
            records = self._store.sessions()
        except TunelabError as exc:
            self.summary.setText(str(exc))
            return
        self._show(records)

    def _on_sessions_changed(self) -> None:
        self._show(self.watcher.sessions())

    def _show(self, records: list[SessionRecord]) -> None:
        selected = self._selected
        self.stated.refresh(records)
        self.model.set_sessions(
            records, {r.id: s for r in records if (s := self.stated.stated(r.id)) is not None}
        )
        if selected is not None and self.selected_session() != selected:
            self.select_session(selected, emit=False)
        running = sum(r.status == "running" for r in records)
        crashed = sum(r.status == "crashed" for r in records)
        parts = [f"{len(records)} session{'s' * (len(records) != 1)}"]
        if running:
            parts.append(f"{running} running")
        if crashed:
            parts.append(f"{crashed} crashed")
        self.summary.setText(" · ".join(parts) + f"   —   {self._store.path}")
        self._update_buttons()

    def record(self, session_id: int) -> SessionRecord | None:
        row = self.model.row_of(session_id)
        return None if row is None else self.model.record(row)

    def selected_session(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self.model.record(self.proxy.mapToSource(rows[0]).row()).id

    def select_session(self, session_id: int, emit: bool = True) -> None:
        row = self.model.row_of(session_id)
        if row is None:  # a session created a moment ago: the watcher reads just what is new
            self.watcher.poll()
            self._show(self.watcher.sessions())
            row = self.model.row_of(session_id)
            if row is None:
                return
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not emit:
            self.table.selectionModel().blockSignals(True)
        self.table.selectRow(index.row())
        self.table.scrollTo(index)
        if not emit:
            self.table.selectionModel().blockSignals(False)
            self._selected = session_id
            self._update_buttons()

    def set_active_session(self, session_id: int | None) -> None:
        """The session this window's worker is tuning (not offered for Resume)."""
        self.model.active_session = session_id
        self._show(self.watcher.sessions())
        n = self.model.rowCount()
        if n:  # the status column says "(here)" for it
            self.model.dataChanged.emit(self.model.index(0, 2), self.model.index(n - 1, 2))

    # ---- slots ---------------------------------------------------------------------------------
    def _on_selection_changed(self, *_: object) -> None:
        selected = self.selected_session()
        if selected == self._selected:
            self._update_buttons()
            return
        self._selected = selected
        self._update_buttons()
        self.session_selected.emit(-1 if selected is None else selected)

    def _resumable(self, session_id: int | None) -> bool:
        if session_id is None or session_id == self.model.active_session:
            return False
        record = self.record(session_id)
        return record is not None and is_resumable(record)

    def _update_buttons(self) -> None:
        self.resume_button.setEnabled(self._resumable(self._selected) and self.model.active_session is None)

    def _on_resume_clicked(self) -> None:
        if self._selected is not None and self._resumable(self._selected):
            self.resume_requested.emit(self._selected)

    def _on_double_clicked(self, index: QModelIndex) -> None:
        record = self.model.record(self.proxy.mapToSource(index).row())
        if record.status == "crashed" and self._resumable(record.id) and self.model.active_session is None:
            self.resume_requested.emit(record.id)

    def _on_context_menu(self, pos) -> None:
        index = self.table.indexAt(pos)
        if not index.isValid():
            return
        record = self.model.record(self.proxy.mapToSource(index).row())
        menu = QMenu(self)
        resume = QAction(icon("resume"), f"Resume session {record.id}", menu)
        resume.setEnabled(self._resumable(record.id) and self.model.active_session is None)
        resume.triggered.connect(lambda: self.resume_requested.emit(record.id))
        menu.addAction(resume)
        menu.exec(self.table.viewport().mapToGlobal(pos))

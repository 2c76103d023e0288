"""The trials table: every trial of a session, sortable and filterable, with its config, raw samples
and error text; rows copy as TSV and the (filtered, sorted) table exports to CSV."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
from PySide6.QtCore import (
    QAbstractProxyModel,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
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
from tunelab.app.widgets.buffers import TrialColumns, columns_of, concat_columns, n_rows, rows_after
from tunelab.app.widgets.formatting import config_summary, first_line, fmt_ms
from tunelab.app.widgets.table_model import HeaderedTableModel
from tunelab.app.workers.following import read_new
from tunelab.core.errors import TunelabError
from tunelab.core.records import TRIAL_STATUSES, Config, TrialRecord
from tunelab.core.store.database import Store

COLUMNS = ("ID", "Index", "Round", "Status", "Latency ms", "Mean ms", "Std ms", "Predicted ms", "Config", "Error")
NUMERIC = {0, 1, 2, 4, 5, 6, 7}
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
CSV_FIELDS = ("id", "index", "round", "status", "latency_ms", "mean_ms", "std_ms", "min_ms", "max_ms",
              "predicted_ms", "build_s", "run_s", "started_at", "finished_at", "config", "error")
_INT_FIELDS = {0: "id", 1: "index", 2: "round"}
_FLOAT_FIELDS = {4: "latency_ms", 5: "mean_ms", 6: "std_ms", 7: "predicted_ms"}
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
CONFIG_PREFETCH = 96  # configs the proxy reads at once: about two screens of rows, in its order
_FILTER_SEP = "\x1f"  # between the columns of a row's filter text: no typed filter contains it


def _config_of(t: TrialRecord) -> dict:
    """The trial's config as a dict (decoded here when a store hands it over as JSON text)."""
    config = t.config
    if isinstance(config, (str, bytes)):
        config = json.loads(config)
    return config


_SCALARS = frozenset((int, str, bool, float))


class _SummaryCache:
    """`config_summary` for many configs: the `key=value` pieces are cached by (key, type, value)
    (lists and the like by their repr), so a row costs a few dict look-ups instead of formatting
    every value again."""

    def __init__(self) -> None:
        self._pieces: dict[tuple, str] = {}

    def __call__(self, config: dict) -> str:
        return self.many([config])[0]

    def many(self, configs) -> list[str]:
        pieces = self._pieces
        get = pieces.get
        out = []
        for config in configs:
            if len(config) == 2 and "sketch" in config and "decisions" in config:
                out.append(config_summary(config))
                continue
            parts = []
            for k, v in config.items():
                cls = v.__class__
                key = (k, cls, v) if cls in _SCALARS else (k, cls, repr(v))
                piece = get(key)
                if piece is None:
                    piece = pieces[key] = config_summary({k: v})
                parts.append(piece)
            out.append(" ".join(parts))
        return out


class TrialTableModel(HeaderedTableModel):
    """Trials as rows, in id order; `append_columns` adds newly stored ones at the end (no reset,
    selection kept).

    The rows are the columns `Store.trial_columns` reads (NumPy arrays, no record per trial), so a
    100,000-trial session loads in a few milliseconds. A config is decoded only when its row is
    shown (a block of rows at a time, through `Store.trial_configs`), or for every row the first time
    the table is sorted or filtered by config. Sorting and filtering happen on NumPy arrays
    (`sort_order`, `filter_mask`); display text is made only for the rows a view asks for (the config
    summary and the error's first line are cached per row).
    """

    columns = COLUMNS

    CONFIG_BLOCK = 64  # configs read at once for the rows around one asked for by its row number

    def __init__(self, parent=None, store: Store | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._session_id: int | None = None
        self._cols: TrialColumns = columns_of([])
        self._records: list[TrialRecord] = []  # rows 0..len-1 as records, when they were handed over
        self._configs: list[Config | None] = []  # decoded on demand
        self._clear_caches()

    def _clear_caches(self) -> None:
        self._summaries: list[str | None] = [None] * self.rowCount()  # config_summary per row, on demand
        self._str_keys: dict[int, list[str]] = {}  # string sort keys per column
        self._ranks: dict[int, np.ndarray] = {}  # string columns' keys as ranks (argsort-able)
        self._filter_text: list[str] | None = None  # lowercase display text of every column, per row
        self._summary = _SummaryCache()
        self._first_lines: dict[str, str] = {}

    def set_columns(self, columns: TrialColumns, session_id: int | None = None,
                    records: list[TrialRecord] | None = None) -> None:
        """Show these trials (`Store.trial_columns` of session `session_id`); `records`, when the
        caller has them, are the same trials as TrialRecords (their configs are then not read)."""
        self.beginResetModel()
        self._session_id = session_id
        self._cols = columns
        self._records = list(records) if records is not None else []
        self._configs = [_config_of(t) for t in self._records]
        self._configs += [None] * (n_rows(columns) - len(self._records))
        self._clear_caches()
        self.endResetModel()

    def set_trials(self, trials: list[TrialRecord]) -> None:
        self.set_columns(columns_of(trials), trials[0].session_id if trials else None, trials)

    def append_columns(self, columns: TrialColumns, records: list[TrialRecord] | None = None) -> None:
        n = n_rows(columns)
        if not n:
            return
        first = self.rowCount()
        self.beginInsertRows(QModelIndex(), first, first + n - 1)
        self._cols = concat_columns(self._cols, columns)
        if records is not None and len(self._records) == first:
            self._records.extend(records)
            self._configs.extend(_config_of(t) for t in records)
        else:
            self._configs.extend([None] * n)
        self._summaries.extend([None] * n)
        self._extend_caches(first)
        self.endInsertRows()

    def append(self, trials: list[TrialRecord]) -> None:
        if trials:
            if self._session_id is None:
                self._session_id = trials[0].session_id
            self.append_columns(columns_of(trials), trials)

    def _extend_caches(self, first: int) -> None:
        last = self.rowCount()
        for col, keys in self._str_keys.items():
            keys.extend(self._string_keys(col, first, last))
            self._ranks.pop(col, None)
        if self._filter_text is not None:
            self._filter_text.extend(self._filter_texts(first, last))

    # ---- rows ----------------------------------------------------------------------------------
    def column(self, name: str) -> np.ndarray:
        """One field of every row (a `Store.trial_columns` name)."""
        return self._cols[name]

    def trial_id(self, row: int) -> int:
        return int(self._cols["id"][row])

    def trial(self, row: int) -> TrialRecord:
        """Row `row` as a full record (read from the store, with its samples, unless handed over)."""
        if row < len(self._records):
            return self._records[row]
        if self._store is not None:
            try:
                return self._store.trial(self.trial_id(row))
            except TunelabError:
                pass
        return self._record_of(row)

    def trials(self) -> list[TrialRecord]:
        """Every row as a record (one read of the session when they were not handed over)."""
        n = self.rowCount()
        if len(self._records) == n:
            return list(self._records)
        read: dict[int, TrialRecord] = {}
        if self._store is not None and self._session_id is not None:
            try:
                read = {t.id: t for t in self._store.trials(self._session_id)}
            except TunelabError:
                read = {}
        ids = self._cols["id"].tolist()
        return [self._records[r] if r < len(self._records) else read.get(ids[r]) or self._record_of(r)
                for r in range(n)]

    def _record_of(self, row: int) -> TrialRecord:
        """A record made from the columns alone (fields they lack are None)."""
        c = self._cols

        def number(name: str) -> float | None:
            v = float(c[name][row])
            return None if math.isnan(v) else v

        task = int(c["task_id"][row])
        return TrialRecord(
            id=self.trial_id(row), session_id=self._session_id or 0, index=int(c["index"][row]),
            round=int(c["round"][row]), config=self.config(row), status=self.status(row),
            error=c["error"][row], latency_ms=number("latency_ms"), mean_ms=number("mean_ms"),
            std_ms=number("std_ms"), min_ms=None, max_ms=None, predicted_ms=number("predicted_ms"),
            build_s=None, run_s=None, started_at=float(c["started_at"][row]),
            finished_at=float(c["finished_at"][row]), trace_json=None, task_id=None if task < 0 else task)

    def row_of(self, trial_id: int) -> int | None:
        ids = self._cols["id"]  # ascending
        row = int(np.searchsorted(ids, trial_id))
        return row if row < len(ids) and ids[row] == trial_id else None

    def status(self, row: int) -> str:
        code = int(self._cols["status"][row])
        return TRIAL_STATUSES[code] if 0 <= code < len(TRIAL_STATUSES) else "?"

    def is_ok(self, row: int) -> bool:
        return bool(self._cols["ok"][row])

    def config(self, row: int) -> Config:
        config = self._configs[row]
        if config is None:
            block = self.CONFIG_BLOCK
            first = row - row % block
            self._load_configs(first, min(first + block, self.rowCount()))
            config = self._configs[row]
        return config if config is not None else {}

    def _load_configs(self, first: int, last: int) -> None:
        """Decode the configs of rows first..last-1 that are not decoded yet (one store read)."""
        self.load_configs(range(first, last))

    def has_config(self, row: int) -> bool:
        return self._configs[row] is not None

    def load_configs(self, rows) -> None:
        """Decode the configs of these rows that are not decoded yet, in one store read (the proxy
        asks for the rows it is about to show, in its sorted order)."""
        missing = [r for r in rows if self._configs[r] is None]
        if not missing or self._store is None or self._session_id is None:
            return
        ids = self._cols["id"]
        try:
            if len(missing) > len(ids) // 2:  # most of the session: one scan beats a list of ids
                read = self._store.trial_configs(self._session_id)
            else:
                read = self._store.trial_configs(self._session_id, ids[missing].tolist())
        except TunelabError:
            return
        for r in missing:
            self._configs[r] = read.get(int(ids[r]))

    def summary(self, row: int) -> str:
        text = self._summaries[row]
        if text is None:
            text = self._summaries[row] = self._summary(self.config(row))
        return text

    def summaries(self, first: int, last: int) -> list[str]:
        """The config summaries of rows first..last-1 (made, in one go, for those not made yet)."""
        cached = self._summaries[first:last]
        missing = [i for i, s in enumerate(cached) if s is None]
        if missing:
            self._load_configs(first + missing[0], first + missing[-1] + 1)
            made = self._summary.many(self._configs[first + i] or {} for i in missing)
            for i, text in zip(missing, made, strict=True):
                cached[i] = self._summaries[first + i] = text
        return cached

    def error(self, row: int) -> str | None:
        return self._cols["error"][row]

    def error_line(self, row: int) -> str:
        error = self._cols["error"][row]
        if not error:
            return ""
        line = self._first_lines.get(error)
        if line is None:
            line = self._first_lines[error] = first_line(error)
        return line

    def display_text(self, row: int, col: int) -> str:
        if col == 8:
            return self.summary(row)
        if col == 9:
            return self.error_line(row)
        if col in _FLOAT_FIELDS:
            return fmt_ms(float(self._cols[_FLOAT_FIELDS[col]][row]))
        if col == 3:
            return self.status(row)
        return str(int(self._cols[_INT_FIELDS[col]][row]))

    # ---- sorting and filtering -----------------------------------------------------------------
    def _string_keys(self, col: int, first: int, last: int) -> list[str]:
        if col == 3:
            return [self.status(r) for r in range(first, last)]
        if col == 8:
            return self.summaries(first, last)
        return [e or "" for e in self._cols["error"][first:last].tolist()]

    def sort_keys(self, col: int) -> np.ndarray:
        """Column `col`'s sort keys for every row: numbers (NaN for none) or string ranks."""
        if col in _INT_FIELDS:
            return self._cols[_INT_FIELDS[col]]
        if col in _FLOAT_FIELDS:
            return self._cols[_FLOAT_FIELDS[col]]  # NaN (none) sorts last
        ranks = self._ranks.get(col)
        if ranks is None:
            strings = self._str_keys.get(col)
            if strings is None:
                strings = self._str_keys[col] = self._string_keys(col, 0, self.rowCount())
            rank = {s: i for i, s in enumerate(sorted(set(strings)))}
            ranks = self._ranks[col] = np.fromiter(map(rank.__getitem__, strings), dtype=np.int64,
                                                    count=len(strings))
        return ranks

    def sort_order(self, col: int, order: Qt.SortOrder) -> np.ndarray:
        """Row numbers in the order of column `col` (stable; rows without a value last either way)."""
        if col < 0 or col >= len(COLUMNS):
            return np.arange(self.rowCount(), dtype=np.int64)
        keys = self.sort_keys(col)
        if order == Qt.SortOrder.AscendingOrder:
            return np.argsort(keys, kind="stable")
        if keys.dtype.kind == "f":
            return np.argsort(-keys, kind="stable")  # NaN stays NaN: last
        # Stable descending: sort the reversed keys ascending, then reverse (ties keep row order).
        n = len(keys)
        return (n - 1 - np.argsort(keys[::-1], kind="stable"))[::-1]

    def _filter_texts(self, first: int, last: int) -> list[str]:
        c = self._cols
        cols = [list(map(str, c[_INT_FIELDS[k]][first:last].tolist())) for k in (0, 1, 2)]
        cols.append([self.status(r) for r in range(first, last)])
        cols += [list(map(fmt_ms, c[_FLOAT_FIELDS[k]][first:last].tolist())) for k in (4, 5, 6, 7)]
        cols.append(self.summaries(first, last))
        cols.append([self.error_line(r) for r in range(first, last)])
        sep = _FILTER_SEP
        return [sep.join(parts).lower() for parts in zip(*cols, strict=True)]

    def filter_mask(self, text: str) -> np.ndarray | None:
        """Which rows show `text` (case-insensitive) in some column; None: every row (empty text)."""
        if not text:
            return None
        if self._filter_text is None:
            self._filter_text = self._filter_texts(0, self.rowCount())
        needle = text.lower()
        return np.fromiter((needle in s for s in self._filter_text), dtype=bool, count=len(self._filter_text))

    # ---- Qt model ------------------------------------------------------------------------------
    def n_rows(self) -> int:
        return len(self._cols["id"])

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        return self.data_at(index.row(), index.column(), role)

    def data_at(self, row: int, col: int, role: int):
        if role == Qt.ItemDataRole.DisplayRole:
            return self.display_text(row, col)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _RIGHT if col in NUMERIC else None
        if role == Qt.ItemDataRole.ForegroundRole:
            return _RED if col in (3, 9) and not self.is_ok(row) else None
        if role == Qt.ItemDataRole.ToolTipRole:
            error = self.error(row)
            if col == 9 and error:
                return error[:2000]
            if col == 8:
                return json.dumps(self.config(row), indent=1)
            return None
        if role == SORT_ROLE:
            if col in _INT_FIELDS:
                return int(self._cols[_INT_FIELDS[col]][row])
            if col in _FLOAT_FIELDS:
                v = float(self._cols[_FLOAT_FIELDS[col]][row])
                return float("inf") if math.isnan(v) else v
            return self.summary(row) if col == 8 else self._string_keys(col, row, row + 1)[0]
        return None


_RED = QBrush(QColor("#d93025"))


class TrialSortFilterProxy(QAbstractProxyModel):
    """The model's rows filtered and sorted: a row permutation (NumPy) over the source, rebuilt by
    `sort` (a header click) and `setFilterFixedString`, and kept up to date on appends.

    Sorting keeps the selection (persistent indexes are moved); a filter change resets the view
    (the table restores what is still visible). Stands in for QSortFilterProxyModel, whose
    per-comparison `data()` calls made sorting 100,000 rows take tens of seconds."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._model: TrialTableModel | None = None
        self._sort_column = -1
        self._sort_order = Qt.SortOrder.AscendingOrder
        self._filter = ""
        self._order = np.zeros(0, dtype=np.int64)  # every source row, sorted
        self._perm = np.zeros(0, dtype=np.int64)  # proxy row -> source row (sorted, filtered)
        self._inverse = np.zeros(0, dtype=np.int64)  # source row -> proxy row, -1 when filtered out

    def setSourceModel(self, model: TrialTableModel) -> None:  # noqa: N802
        if self._model is not None:
            self._model.modelAboutToBeReset.disconnect(self.beginResetModel)
            self._model.modelReset.disconnect(self._on_source_reset)
            self._model.rowsInserted.disconnect(self._on_rows_inserted)
        self.beginResetModel()
        super().setSourceModel(model)
        self._model = model
        model.modelAboutToBeReset.connect(self.beginResetModel)
        model.modelReset.connect(self._on_source_reset)
        model.rowsInserted.connect(self._on_rows_inserted)
        self._rebuild()
        self.endResetModel()

    # ---- the permutation -----------------------------------------------------------------------
    def _rebuild(self) -> None:
        n = 0 if self._model is None else self._model.rowCount()
        self._order = (np.arange(n, dtype=np.int64) if self._model is None
                       else self._model.sort_order(self._sort_column, self._sort_order))
        self._apply_filter()

    def _apply_filter(self) -> None:
        mask = None if self._model is None else self._model.filter_mask(self._filter)
        self._perm = self._order if mask is None else self._order[mask[self._order]]
        self._update_inverse()

    def _update_inverse(self) -> None:
        n = len(self._order)
        self._inverse = np.full(n, -1, dtype=np.int64)
        self._inverse[self._perm] = np.arange(len(self._perm), dtype=np.int64)

    def _on_source_reset(self) -> None:
        self._rebuild()
        self.endResetModel()

    def _on_rows_inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        if parent.isValid() or self._model is None:
            return
        new = np.arange(first, last + 1, dtype=np.int64)
        mask = self._model.filter_mask(self._filter)
        shown = new if mask is None else new[mask[first:last + 1]]
        # First as rows at the end (in id order), then moved into place if the sort says so.
        self._order = np.concatenate((self._order, new))
        if len(shown):
            end = len(self._perm)
            self.beginInsertRows(QModelIndex(), end, end + len(shown) - 1)
            self._perm = np.concatenate((self._perm, shown))
            self._inverse = np.concatenate((self._inverse, np.full(len(new), -1, dtype=np.int64)))
            self._inverse[shown] = np.arange(end, end + len(shown), dtype=np.int64)
            self.endInsertRows()
        else:
            self._inverse = np.concatenate((self._inverse, np.full(len(new), -1, dtype=np.int64)))
        if self._sort_column >= 0:
            order = self._model.sort_order(self._sort_column, self._sort_order)
            if not np.array_equal(order, self._order):
                self._relayout(order)

    def _relayout(self, order: np.ndarray) -> None:
        """Re-order the rows as `order` says, moving persistent indexes (selection, current)."""
        self.layoutAboutToBeChanged.emit()
        old = self.persistentIndexList()
        sources = [int(self._perm[i.row()]) for i in old]
        self._order = order
        self._apply_filter()
        new = []
        for index, src in zip(old, sources, strict=True):
            row = int(self._inverse[src])
            new.append(self.createIndex(row, index.column()) if row >= 0 else QModelIndex())
        self.changePersistentIndexList(old, new)
        self.layoutChanged.emit()

    # ---- sorting and filtering (QSortFilterProxyModel's names) ---------------------------------
    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        self._sort_column, self._sort_order = column, order
        if self._model is None:
            return
        self._relayout(self._model.sort_order(column, order))

    def sortColumn(self) -> int:  # noqa: N802
        return self._sort_column

    def sortOrder(self) -> Qt.SortOrder:  # noqa: N802
        return self._sort_order

    def setFilterFixedString(self, text: str) -> None:  # noqa: N802
        if text == self._filter:
            return
        self.beginResetModel()
        self._filter = text
        self._apply_filter()
        self.endResetModel()

    def filterText(self) -> str:  # noqa: N802
        return self._filter

    def mapped_rows(self, source_rows: np.ndarray) -> np.ndarray:
        """The proxy rows of `source_rows` that are shown."""
        rows = self._inverse[source_rows[source_rows < len(self._inverse)]]
        return rows[rows >= 0]

    def source_rows(self) -> np.ndarray:
        """The source row of every proxy row, in order."""
        return self._perm

    # ---- Qt proxy ------------------------------------------------------------------------------
    def mapToSource(self, index: QModelIndex | QPersistentModelIndex) -> QModelIndex:  # noqa: N802
        if self._model is None or not index.isValid() or index.row() >= len(self._perm):
            return QModelIndex()
        return self._model.index(int(self._perm[index.row()]), index.column())

    def mapFromSource(self, index: QModelIndex | QPersistentModelIndex) -> QModelIndex:  # noqa: N802
        if not index.isValid() or index.row() >= len(self._inverse):
            return QModelIndex()
        row = int(self._inverse[index.row()])
        return QModelIndex() if row < 0 else self.createIndex(row, index.column())

    def index(self, row: int, column: int, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        if parent.isValid() or not (0 <= row < len(self._perm) and 0 <= column < len(COLUMNS)):
            return QModelIndex()
        return self.createIndex(row, column)

    def parent(self, _index: QModelIndex | QPersistentModelIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        return QModelIndex()

    def sibling(self, row: int, column: int, _index: QModelIndex | QPersistentModelIndex) -> QModelIndex:
        return self.index(row, column)

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._perm)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(COLUMNS)

    def hasChildren(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> bool:  # noqa: B008, N802
        return not parent.isValid() and len(self._perm) > 0

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole and 0 <= section < len(COLUMNS):
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if self._model is None or not index.isValid() or index.row() >= len(self._perm):
            return None
        row = int(self._perm[index.row()])
        if index.column() == 8 and not self._model.has_config(row):
            # The config column of a row not read yet: read it with the rows shown after it (in this
            # order, which after a sort is scattered over the session) in one go.
            self._model.load_configs(self._perm[index.row(): index.row() + CONFIG_PREFETCH].tolist())
        return self._model.data_at(row, index.column(), role)


def display(t: TrialRecord, col: int) -> str:
    if col == 8:
        return config_summary(_config_of(t))
    values = (str(t.id), str(t.index), str(t.round), t.status, fmt_ms(t.latency_ms), fmt_ms(t.mean_ms),
              fmt_ms(t.std_ms), fmt_ms(t.predicted_ms), "", first_line(t.error))
    return values[col]


def sort_key(t: TrialRecord, col: int):
    """One cell's sort key (the model sorts whole columns with `TrialTableModel.sort_keys`)."""
    inf = float("inf")
    if col in _INT_FIELDS:
        return getattr(t, _INT_FIELDS[col])
    if col in _FLOAT_FIELDS:
        v = getattr(t, _FLOAT_FIELDS[col])
        return inf if v is None else float(v)
    if col == 3:
        return t.status
    if col == 8:
        return config_summary(_config_of(t))
    return t.error or ""


def csv_row(t: TrialRecord) -> list:
    return [t.id, t.index, t.round, t.status, t.latency_ms, t.mean_ms, t.std_ms, t.min_ms, t.max_ms,
            t.predicted_ms, t.build_s, t.run_s, t.started_at, t.finished_at,
            json.dumps(_config_of(t), separators=(",", ":")), t.error or ""]


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
    def set_session(self, session_id, trials: list[TrialRecord] | None = None,
                    columns: TrialColumns | None = None) -> None:
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
            self.poll()
            return
        if self.model.rowCount():
            self._last_id = self.model.trial_id(self.model.rowCount() - 1)
        self._update_count()

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
        path, _ = QFileDialog.getSaveFileName(self, "Export trials", f"session-{self.session_id}-trials.csv",
                                              "CSV (*.csv)")
        if path:
            self.export_csv(path)

    def _on_copy_config(self) -> None:
        trial_id = self.selected_trial()
        if trial_id is not None:
            row = self.model.row_of(trial_id)
            QGuiApplication.clipboard().setText(json.dumps(self.model.config(row), indent=2))

    # ---- slots ---------------------------------------------------------------------------------
    def _on_filter_changed(self, text: str) -> None:
        # The proxy resets on a filter change; keep the selected trials that stay visible.
        selection = self.table.selectionModel()
        source = self.proxy.source_rows()
        selected = np.unique(source[[i.row() for i in selection.selectedRows()]]) if selection.hasSelection() \
            else np.zeros(0, dtype=np.int64)
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
        self.config_text.setPlainText(json.dumps(_config_of(trial), indent=2))
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

"""The trials model's rows filtered and sorted for the table: a NumPy row permutation over the source
model, kept up to date on appends."""

from __future__ import annotations

from typing import overload

import numpy as np
from PySide6.QtCore import (
    QAbstractItemModel,
    QAbstractProxyModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
)

from tunelab.app.views.trials.model import COLUMNS, CONFIG_COL, TrialTableModel, header_data

CONFIG_PREFETCH = 96  # configs the proxy reads at once: about two screens of rows, in its order


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

    def setSourceModel(self, model: QAbstractItemModel) -> None:  # noqa: N802
        if not isinstance(model, TrialTableModel):  # its columns are what the permutation sorts
            raise TypeError(f"the trials proxy sorts a TrialTableModel, not a {type(model).__name__}")
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
        self._order = (
            np.arange(n, dtype=np.int64)
            if self._model is None
            else self._model.sort_order(self._sort_column, self._sort_order)
        )
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
        shown = new if mask is None else new[mask[first : last + 1]]
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

    def index(
        self,
        row: int,
        column: int,
        parent: QModelIndex | QPersistentModelIndex = QModelIndex(),  # noqa: B008
    ) -> QModelIndex:
        if parent.isValid() or not (0 <= row < len(self._perm) and 0 <= column < len(COLUMNS)):
            return QModelIndex()
        return self.createIndex(row, column)

    @overload
    def parent(self) -> QObject | None: ...
    @overload
    def parent(self, index: QModelIndex | QPersistentModelIndex, /) -> QModelIndex: ...
    def parent(self, *index: QModelIndex | QPersistentModelIndex) -> QObject | QModelIndex | None:
        """Without an index the QObject's parent (Qt's two parents share one name); with one, none: the
        rows are a flat table."""
        if not index:
            return super().parent()
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
        return header_data(section, orientation, role)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if self._model is None or not index.isValid() or index.row() >= len(self._perm):
            return None
        row = int(self._perm[index.row()])
        if index.column() == CONFIG_COL and not self._model.has_config(row):
            # The config column of a row not read yet: read it with the rows shown after it (in this
            # order, which after a sort is scattered over the session) in one go.
            self._model.load_configs(self._perm[index.row() : index.row() + CONFIG_PREFETCH].tolist())
        return self._model.data_at(row, index.column(), role)

"""The views' tables of whole rows: read-only ones selecting one row at a time, their columns as wide as
their text; sortable views of a model's rows."""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView


def sorted_rows(
    model: QAbstractItemModel, order: Qt.SortOrder, selection: QAbstractItemView.SelectionMode
) -> QTableView:
    """A striped view of `model` without row numbers, sorted by its first column in `order` until a
    header is clicked, selecting whole rows (`selection`: one or many)."""
    table = QTableView()
    table.setModel(model)
    table.setSortingEnabled(True)
    table.sortByColumn(0, order)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(selection)
    table.setAlternatingRowColors(True)
    table.verticalHeader().hide()
    return table


def single_row_table(table: QTableView) -> QHeaderView:
    """Make `table` read-only, selecting one whole row at a time, without row numbers or wrapped text,
    its columns sized to their contents; its horizontal header, for the caller's last touches."""
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().setVisible(False)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    return header

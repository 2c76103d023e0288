"""The views' read-only tables of whole rows: one row selected at a time, columns as wide as their text."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView


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

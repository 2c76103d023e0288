"""A combo box's items as the QStandardItems they are, to grey one or give it a tooltip."""

from __future__ import annotations

from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QComboBox


def combo_item(combo: QComboBox, index: int) -> QStandardItem:
    """The item at ``index`` of a combo box that keeps its own model (a QComboBox's default model is a
    QStandardItemModel; Qt types it as the abstract model)."""
    model = combo.model()
    if not isinstance(model, QStandardItemModel):
        raise TypeError(
            f"{combo.objectName() or 'the combo box'} has a model of its own: {type(model).__name__}"
        )
    item = model.item(index)
    if item is None:
        raise IndexError(f"no item {index} in {combo.objectName() or 'the combo box'}")
    return item

"""The input widgets the dialogs and views build alike: spin boxes, named line edits, buttons, and a row of
captioned fields."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QWidget

_Spin = TypeVar("_Spin", QSpinBox, QDoubleSpinBox)


def _set_up(spin: _Spin, lo: Any, hi: Any, value: Any, tip: str, suffix: str) -> _Spin:
    spin.setRange(lo, hi)
    spin.setSuffix(suffix)
    spin.setValue(value)
    spin.setToolTip(tip)
    return spin


def int_spin(lo: int, hi: int, value: int, tip: str = "", suffix: str = "") -> QSpinBox:
    """A spin box of whole numbers from `lo` to `hi` holding `value`, thousands separated."""
    spin = QSpinBox()
    spin.setGroupSeparatorShown(True)
    return _set_up(spin, lo, hi, value, tip, suffix)


def float_spin(
    lo: float, hi: float, value: float, decimals: int, tip: str = "", suffix: str = ""
) -> QDoubleSpinBox:
    """A spin box of numbers with `decimals` decimals from `lo` to `hi` holding `value`."""
    spin = QDoubleSpinBox()
    spin.setDecimals(decimals)  # before the range and value, which it would round
    return _set_up(spin, lo, hi, value, tip, suffix)


def line_edit(name: str, tip: str, placeholder: str = "") -> QLineEdit:
    """An empty line edit named `name` (how tests and style sheets find it)."""
    edit = QLineEdit()
    edit.setObjectName(name)
    edit.setPlaceholderText(placeholder)
    edit.setToolTip(tip)
    return edit


def push_button(text: str, tip: str, on_click: Callable[[], Any], name: str = "") -> QPushButton:
    """A button saying `text` that calls `on_click`; named `name` where one is given."""
    button = QPushButton(text)
    if name:
        button.setObjectName(name)
    button.setToolTip(tip)
    button.clicked.connect(lambda: on_click())  # clicked(bool) would hand `on_click` its checked state
    return button


def captioned_fields(
    fields: Iterable[tuple[str, QWidget]], stretch: QWidget | None = None, layout: QHBoxLayout | None = None
) -> QHBoxLayout:
    """Each field after its caption in one row (`layout`, or a new one without margins); `stretch` takes
    the spare width."""
    if layout is None:
        layout = QHBoxLayout()
        layout.setContentsMargins(0, 0, 0, 0)
    for caption, field in fields:
        layout.addWidget(QLabel(caption))
        layout.addWidget(field, 1 if field is stretch else 0)
    return layout

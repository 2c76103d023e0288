"""The search-space editor: each knob's candidates (template) or each sketch rule's switch and limits
(auto), typed as JSON, checked by the core as they are typed, with the space size kept current."""

from __future__ import annotations

import json
import math
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from tunelab.core.errors import TunelabError
from tunelab.core.target.info import TargetInfo

SIZE_DEBOUNCE_MS = 250  # an auto space's size needs MetaSchedule to derive its sketches


def _mark(widget: QWidget, invalid: bool) -> None:
    if bool(widget.property("invalid")) == invalid:
        return
    widget.setProperty("invalid", invalid)
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def _error_label() -> QLabel:
    label = QLabel()
    label.setProperty("role", "error")
    label.setWordWrap(True)
    label.hide()
    return label


def _parse(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} at column {exc.colno}"
    except RecursionError:
        return None, "nested too deeply"


class _KnobRow:
    """One template knob: its candidates as a JSON list."""

    def __init__(self, knob: dict[str, Any], hint: str) -> None:
        self.knob = knob
        self.name = QLabel(f"<b>{knob['name']}</b>")
        self.name.setToolTip(hint)
        self.hint = QLabel(hint)
        self.hint.setProperty("role", "hint")
        self.edit = QLineEdit(json.dumps(knob["candidates"]))
        self.edit.setObjectName(f"knob_{knob['name']}")
        self.edit.setToolTip(f"Candidates of {knob['name']} as a JSON list. {hint}")
        self.count = QLabel()
        self.count.setMinimumWidth(90)
        self.count.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.reason = _error_label()
        self.candidates: list[Any] | None = list(knob["candidates"])


class _RuleRow:
    """One sketch rule: enabled, and one JSON value per limit."""

    def __init__(self, rule: dict[str, Any]) -> None:
        self.rule = rule
        self.enabled = QCheckBox(rule["name"])
        self.enabled.setChecked(bool(rule.get("enabled", True)))
        self.enabled.setObjectName(f"rule_{rule['name']}")
        self.params: dict[str, QLineEdit] = {}
        for key, value in rule.get("params", {}).items():
            edit = QLineEdit(json.dumps(value))
            edit.setObjectName(f"rule_{rule['name']}_{key}")
            self.params[key] = edit
        self.reason = _error_label()


class SpaceEditor(QWidget):
    """Edits one search space for a problem set with `set_problem`.

    `changed` is emitted after every edit once the core has checked it; then `is_valid()`,
    `size()`, `error()` and `space_data()` describe the space as typed.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._kind = "template"
        self._target: TargetInfo | None = None
        self._problem: tuple | None = None
        self._defaults: dict[str, Any] | None = None
        self._axes: list[Any] = []
        self._knob_rows: list[_KnobRow] = []
        self._rule_rows: list[_RuleRow] = []
        self._size: int | None = None
        self._error: str | None = "no problem set"
        self._data: dict[str, Any] | None = None
        self._size_error: str | None = None

        self.size_label = QLabel()
        self.size_label.setProperty("role", "size")
        self.size_label.setObjectName("space_size")
        # Wrapped: with a packing note the line is longer than the dialog is wide, and it was cut behind
        # the Reset button.
        self.size_label.setWordWrap(True)
        self.error_label = _error_label()
        self.error_label.setObjectName("space_error")
        reset = QPushButton("Reset to defaults")
        reset.clicked.connect(self._on_reset)
        top = QHBoxLayout()
        top.addWidget(self.size_label, 1)
        top.addWidget(reset, 0, Qt.AlignmentFlag.AlignTop)

        self._rows_host = QWidget()
        self._grid = QGridLayout(self._rows_host)
        self._grid.setColumnStretch(1, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self._rows_host)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.error_label)
        layout.addWidget(scroll, 1)

        self._size_timer = QTimer(self)
        self._size_timer.setSingleShot(True)
        self._size_timer.setInterval(SIZE_DEBOUNCE_MS)
        self._size_timer.timeout.connect(self._on_size_timer)

    # ---- public --------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self._kind

    def is_valid(self) -> bool:
        return self._error is None and not self._size_timer.isActive() and self._size is not None

    def is_pending(self) -> bool:
        """True while an auto space's size is still to be derived (after the last keystroke)."""
        return self._size_timer.isActive()

    def size(self) -> int | None:
        return self._size

    def error(self) -> str | None:
        return self._error

    def space_data(self) -> dict[str, Any] | None:
        """The edited space as the core takes it (SessionSpec.space); None while invalid."""
        return self._data if self._error is None else None

    def knob_edit(self, name: str) -> QLineEdit:
        return next(r.edit for r in self._knob_rows if r.knob["name"] == name)

    def knob_reason(self, name: str) -> QLabel:
        return next(r.reason for r in self._knob_rows if r.knob["name"] == name)

    def rule_row(self, name: str) -> _RuleRow:
        return next(r for r in self._rule_rows if r.rule["name"] == name)

    def set_problem(
        self,
        workload: Any,
        shape: dict[str, int],
        dtype: str,
        target: TargetInfo,
        kind: str,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Show the default space of this problem (or `data`, an earlier edit of it)."""
        from tunelab.core.search.space.factory import make_space

        self._problem = (workload, dict(shape), dtype, target)
        self._target = target
        self._kind = kind
        self._clear_rows()
        try:
            space = make_space(workload, shape, dtype, target, kind, None)
        except TunelabError as exc:
            self._defaults = None
            self._set_state(None, str(exc), None)
            return
        except Exception as exc:  # noqa: BLE001 - TVM rejecting this problem is a message, not a crash
            self._defaults = None
            self._set_state(None, f"TVM cannot schedule this problem: {exc}", None)
            return
        if kind == "template":
            self._axes = list(space.axes)
            self._defaults = space.to_json()
            self._build_knob_rows(self._defaults if data is None else data)
        else:
            from tunelab.core.search.space.auto import default_auto_space

            self._defaults = default_auto_space(target.kind)
            self._build_rule_rows(self._defaults if data is None else data)
        self._validate()

    # ---- rows ----------------------------------------------------------------------------------
    def _clear_rows(self) -> None:
        while self._grid.count():
            item = self._grid.takeAt(0)
            widget = item.widget()
            if widget is not None:
                widget.hide()  # at once: deleteLater waits for the event loop
                widget.setParent(None)
                widget.deleteLater()
        for row in range(self._grid.rowCount()):
            self._grid.setRowStretch(row, 0)
        self._knob_rows = []
        self._rule_rows = []

    def _knob_hint(self, knob: dict[str, Any]) -> str:
        if knob["type"] == "split":
            axis = next((a for a in self._axes if a.name == knob.get("axis")), None)
            if axis is None:
                return "a split"
            parts = knob.get("parts", 2)
            what = "inner factor" if parts == 2 else f"{parts - 1} inner factors (thread, inner)"
            return f"split of {axis.kind} axis {axis.name} (extent {axis.extent}): lists of {what}"
        if knob["type"] == "order":
            return "where the reduction loops go: ro = outer reduce, ri = inner reduce, si = inner spatial"
        if knob["name"] == "unroll":
            return "auto-unroll max steps (0 = off), each 0..4096"
        return "true / false"

    def _build_knob_rows(self, data: dict[str, Any]) -> None:
        knobs = {k["name"]: k for k in data.get("knobs", [])}
        for i, knob in enumerate(self._defaults["knobs"]):
            shown = {**knob, "candidates": knobs.get(knob["name"], knob)["candidates"]}
            row = _KnobRow(shown, self._knob_hint(knob))
            self._grid.addWidget(row.name, 3 * i, 0)
            self._grid.addWidget(row.edit, 3 * i, 1)
            self._grid.addWidget(row.count, 3 * i, 2)
            self._grid.addWidget(row.hint, 3 * i + 1, 1, 1, 2)
            self._grid.addWidget(row.reason, 3 * i + 2, 1, 1, 2)
            row.edit.textChanged.connect(self._validate)
            self._knob_rows.append(row)
        self._grid.setRowStretch(3 * len(self._knob_rows), 1)

    def _build_rule_rows(self, data: dict[str, Any]) -> None:
        rules = {r.get("name"): r for r in data.get("rules", []) if isinstance(r, dict)}
        line = 0
        for rule in self._defaults["rules"]:
            given = rules.get(rule["name"], rule)
            shown = {
                "name": rule["name"],
                "enabled": given.get("enabled", True),
                "params": {**rule["params"], **(given.get("params") or {})},
            }
            row = _RuleRow(shown)
            self._grid.addWidget(row.enabled, line, 0, 1, 3)
            line += 1
            for key, edit in row.params.items():
                label = QLabel(key)
                label.setProperty("role", "hint")
                self._grid.addWidget(label, line, 0, Qt.AlignmentFlag.AlignRight)
                self._grid.addWidget(edit, line, 1, 1, 2)
                edit.textChanged.connect(self._validate)
                line += 1
            self._grid.addWidget(row.reason, line, 1, 1, 2)
            line += 1
            row.enabled.toggled.connect(self._validate)
            for edit in row.params.values():
                edit.setEnabled(row.enabled.isChecked())
            row.enabled.toggled.connect(lambda on, r=row: [e.setEnabled(on) for e in r.params.values()])
            self._rule_rows.append(row)
        self._grid.setRowStretch(line, 1)

    # ---- validation ----------------------------------------------------------------------------
    def _validate(self) -> None:
        if self._defaults is None:
            return
        if self._kind == "template":
            self._check_template()
        else:
            self._validate_auto()

    def _check_template(self) -> None:
        from tunelab.core.search.space.template import check_template

        kind = self._target.kind
        defaults = self._defaults["knobs"]
        errors = []
        for i, row in enumerate(self._knob_rows):
            value, reason = _parse(row.edit.text())
            if reason is None:
                if not isinstance(value, list):
                    reason = "must be a JSON list of candidates, e.g. [1, 2, 4]"
                else:
                    knobs = [*defaults[:i], {**defaults[i], "candidates": value}, *defaults[i + 1 :]]
                    try:
                        check_template({**self._defaults, "knobs": knobs}, self._axes, kind)
                    except TunelabError as exc:
                        reason = str(exc)
            row.candidates = value if reason is None else None
            self._show_reason(row.edit, row.reason, reason)
            row.count.setText("—" if reason else f"{len(value)} value{'s' * (len(value) != 1)}")
            if reason:
                errors.append(f"{row.knob['name']}: {reason}")
        if errors:
            self._set_state(
                None,
                errors[0] if len(errors) == 1 else f"{len(errors)} knobs are invalid; first: {errors[0]}",
                None,
            )
            return
        knobs = [{**d, "candidates": r.candidates} for d, r in zip(defaults, self._knob_rows, strict=True)]
        data = {**self._defaults, "knobs": knobs}
        try:
            check_template(data, self._axes, kind)
        except TunelabError as exc:
            self._set_state(None, str(exc), None)
            return
        self._set_state(data, None, math.prod(len(k["candidates"]) for k in knobs))

    def _rule_value(self, row: _RuleRow) -> tuple[dict[str, Any], str | None]:
        params: dict[str, Any] = {}
        reason = None
        for key, edit in row.params.items():
            value, bad = _parse(edit.text())
            _mark(edit, bad is not None)
            if bad is not None and reason is None:
                reason = f"{key}: {bad}"
            params[key] = value
        return {"name": row.rule["name"], "enabled": row.enabled.isChecked(), "params": params}, reason

    def _validate_auto(self) -> None:
        from tunelab.core.search.space.auto import check_rules

        kind = self._target.kind
        defaults = self._defaults["rules"]
        rules, errors = [], []
        for i, row in enumerate(self._rule_rows):
            rule, reason = self._rule_value(row)
            if reason is None:
                trial = [*defaults[:i], rule, *defaults[i + 1 :]]
                try:
                    check_rules({"rules": trial}, kind)
                except TunelabError as exc:
                    reason = str(exc)
            row.reason.setText(reason or "")
            row.reason.setVisible(bool(reason))
            if reason:
                errors.append(reason)
            rules.append(rule)
        if errors:
            self._set_state(None, errors[0], None)
            return
        data = {"kind": "auto", "target_kind": kind, "rules": rules}
        try:
            data["rules"] = check_rules(data, kind)
        except TunelabError as exc:
            self._set_state(None, str(exc), None)
            return
        self._data, self._error, self._size = data, None, None
        self.size_label.setText("Space size: deriving sketches…")
        self.error_label.hide()
        self._size_timer.start()
        self.changed.emit()

    def _on_size_timer(self) -> None:
        from tunelab.core.search.space.auto import AutoSpace

        workload, shape, dtype, target = self._problem
        try:
            space = AutoSpace(workload, shape, dtype, target, self._data)
        except TunelabError as exc:
            self._set_state(None, str(exc), None)
            return
        except Exception as exc:  # noqa: BLE001
            self._set_state(None, f"MetaSchedule cannot derive sketches: {exc}", None)
            return
        # what "auto" packing resolved to for this shape is part of what the person is choosing
        packing = space.packing.words() if space.packing is not None else None
        self._set_state(self._data, None, space.size, sketches=len(space.sketches), note=packing)

    @staticmethod
    def _show_reason(edit: QLineEdit, label: QLabel, reason: str | None) -> None:
        _mark(edit, reason is not None)
        label.setText(reason or "")
        label.setVisible(bool(reason))

    def _set_state(
        self,
        data: dict[str, Any] | None,
        error: str | None,
        size: int | None,
        sketches: int | None = None,
        note: str | None = None,
    ) -> None:
        self._data, self._error, self._size = data, error, size
        if error is not None:
            self.size_label.setText("Space size: —")
            self.error_label.setText(error)
            self.error_label.show()
        else:
            extra = f" in {sketches} sketch{'es' * (sketches != 1)}" if sketches is not None else ""
            self.size_label.setText(f"Space size: {size:,} configs{extra}" + (f"; {note}" if note else ""))
            self.error_label.hide()
        self.changed.emit()

    def _on_reset(self) -> None:
        if self._problem is not None:
            self.set_problem(*self._problem, self._kind)

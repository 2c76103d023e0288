"""The search-space editor: each knob's candidates (template) or each sketch rule's switch and limits
(auto), typed as JSON, checked by the core as they are typed, with the space size kept current.

Deriving a space is TVM's work (a template's axes from the workload's compute, an auto space's sketches
from MetaSchedule: up to seconds): it runs in a worker thread (tunelab.app.workers.engine), never on the
GUI thread, and a result for a problem or an edit that has since changed is dropped. Checking a typed
value against the derived axes or the rules' limits is plain Python and stays where it is typed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from tunelab.app.dialogs.space_derive import (
    CheckedEdit,
    DerivedDefaults,
    DerivedSize,
    Problem,
    check_knobs,
    check_rule_edit,
    derive_defaults,
    derive_size,
)
from tunelab.app.widgets.fields import push_button
from tunelab.app.widgets.pages import scrolled
from tunelab.app.widgets.timers import single_shot
from tunelab.app.workers.engine import CallWorker, keep_alive

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

    `changed` is emitted after every edit once the core has checked it, and once a worker has derived
    the space or its size; then `is_pending()`, `is_valid()`, `space_size()`, `error()` and
    `space_data()` describe the space as typed.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._kind = "template"
        self._problem: Problem | None = None
        self._generation = 0  # bumped by every new problem and edit: an older worker's result is dropped
        self._worker: CallWorker | None = None  # the latest worker, until it ends
        self._worker_generation = 0
        self._then: Callable[[Any], None] = lambda _result: None  # what the running worker's result is for
        self._defaults: dict[str, Any] | None = None
        self._axes: list[Any] = []
        self._knob_rows: list[_KnobRow] = []
        self._rule_rows: list[_RuleRow] = []
        self._size: int | None = None
        self._error: str | None = "no problem set"
        self._data: dict[str, Any] | None = None

        self.size_label = QLabel()
        self.size_label.setProperty("role", "size")
        self.size_label.setObjectName("space_size")
        # Wrapped: with a packing note the line is longer than the dialog is wide, and it was cut behind
        # the Reset button.
        self.size_label.setWordWrap(True)
        self.error_label = _error_label()
        self.error_label.setObjectName("space_error")
        reset = push_button(
            "Reset to defaults", "The space tunelab derives, without your edits", self._on_reset
        )
        top = QHBoxLayout()
        top.addWidget(self.size_label, 1)
        top.addWidget(reset, 0, Qt.AlignmentFlag.AlignTop)

        self._rows_host = QWidget()
        self._grid = QGridLayout(self._rows_host)
        self._grid.setColumnStretch(1, 1)
        scroll = scrolled(self._rows_host)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.error_label)
        layout.addWidget(scroll, 1)

        self._size_timer = single_shot(self, SIZE_DEBOUNCE_MS, self._on_size_timer)

    # ---- public --------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self._kind

    def is_valid(self) -> bool:
        return self._error is None and not self.is_pending() and self._size is not None

    def is_pending(self) -> bool:
        """True while the space or an auto space's size is still to be derived (after the last keystroke)."""
        return self._size_timer.isActive() or self._worker is not None

    def space_size(self) -> int | None:
        """The number of configs in the space as typed; None while invalid or pending."""
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

    def set_problem(self, problem: Problem, kind: str, data: dict[str, Any] | None = None) -> None:
        """Show the default `kind` space of `problem` (or `data`, an earlier edit of it) once a worker
        has derived it; pending until then."""
        self._problem = problem
        self._kind = kind
        self._defaults = None
        self._size_timer.stop()
        self._clear_rows()
        self._data, self._error, self._size = None, None, None
        self.size_label.setText("Space size: deriving the space…")
        self.error_label.hide()
        self._start(derive_defaults, self._problem, kind, then=lambda d: self._on_defaults(d, data))

    def _start(self, fn: Callable[..., Any], *args: Any, then: Callable[[Any], None]) -> None:
        """Run ``fn(generation, *args)`` in a worker; ``then(result)`` on the GUI thread unless a newer
        problem or edit came meanwhile (its result carries the generation it was asked for)."""
        self._generation += 1
        self._then = then
        worker = CallWorker(None, fn, self._generation, *args)
        self._worker, self._worker_generation = worker, self._generation
        # bound methods: a dialog closed before its worker ends is not called back (keep_alive holds
        # the thread until it ends)
        worker.succeeded.connect(self._on_worker_done)
        worker.failed.connect(self._on_worker_failed)
        keep_alive(worker).start()
        self.changed.emit()

    def _on_worker_done(self, result: DerivedDefaults | DerivedSize | CheckedEdit) -> None:
        if result.generation == self._worker_generation:
            self._worker = None  # the latest worker ended (an older one's end leaves it running)
        if result.generation == self._generation:
            self._then(result)
        else:  # for a problem or an edit since replaced: dropped
            self.changed.emit()

    def _on_worker_failed(self, message: str, _details: str) -> None:
        # derive_* never raise: this is the worker's own failure (TVM could not be imported)
        if self.sender() is not self._worker:
            return
        self._worker = None
        self._set_state(None, message, None)

    def _on_defaults(self, derived: DerivedDefaults, data: dict[str, Any] | None) -> None:
        if derived.defaults is None:
            self._set_state(None, derived.error or "no default space", None)
            return
        self._defaults = derived.defaults
        self._axes = list(derived.axes)
        if self._kind == "template":
            self._build_knob_rows(derived.defaults, derived.defaults if data is None else data)
        else:
            self._build_rule_rows(derived.defaults, derived.defaults if data is None else data)
        self._validate()

    # ---- rows ----------------------------------------------------------------------------------
    def _clear_rows(self) -> None:
        while self._grid.count():
            item = self._grid.takeAt(0)
            widget = item.widget() if item is not None else None
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

    def _build_knob_rows(self, defaults: dict[str, Any], data: dict[str, Any]) -> None:
        knobs = {k["name"]: k for k in data.get("knobs", [])}
        for i, knob in enumerate(defaults["knobs"]):
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

    def _build_rule_rows(self, defaults: dict[str, Any], data: dict[str, Any]) -> None:
        rules = {r.get("name"): r for r in data.get("rules", []) if isinstance(r, dict)}
        line = 0
        for rule in defaults["rules"]:
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
        if self._defaults is None or self._problem is None:
            return
        self._generation += 1  # a size being derived for the text before this edit is no longer wanted
        self._size = None  # until the core has checked this edit (in a worker)
        if self._kind == "template":
            self._check_template(self._defaults, self._problem.target.kind)
        else:
            self._validate_auto(self._defaults, self._problem.target.kind)

    def _check_template(self, template: dict[str, Any], kind: str) -> None:
        """Check the knobs as typed in a worker (the core's check_template reads the axes TVM derived)."""
        rows = [_parse(row.edit.text()) for row in self._knob_rows]
        for row, (_, reason) in zip(self._knob_rows, rows, strict=True):
            if reason is not None:  # text that is not JSON is marked at once; the core's reasons follow
                self._show_reason(row.edit, row.reason, reason)
        self._start(check_knobs, template, self._axes, kind, rows, then=self._on_knobs_checked)

    def _on_knobs_checked(self, checked: CheckedEdit) -> None:
        for row, reason in zip(self._knob_rows, checked.reasons, strict=True):
            value, _ = _parse(row.edit.text())
            row.candidates = value if reason is None else None
            self._show_reason(row.edit, row.reason, reason)
            row.count.setText("—" if reason else f"{len(value)} value{'s' * (len(value) != 1)}")
        self._set_state(checked.data, checked.error, checked.size)

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

    def _validate_auto(self, auto: dict[str, Any], kind: str) -> None:
        """Check the rules as typed in a worker; a valid edit's size is derived after the typing pause."""
        rows = [self._rule_value(row) for row in self._rule_rows]
        for row, (_, reason) in zip(self._rule_rows, rows, strict=True):
            if reason is not None:  # a parameter that is not JSON is said at once; the core's reasons follow
                row.reason.setText(reason)
                row.reason.setVisible(True)
        self._start(check_rule_edit, auto, kind, rows, then=self._on_rules_checked)

    def _on_rules_checked(self, checked: CheckedEdit) -> None:
        for row, reason in zip(self._rule_rows, checked.reasons, strict=True):
            row.reason.setText(reason or "")
            row.reason.setVisible(bool(reason))
        if checked.error is not None or checked.data is None:
            self._set_state(None, checked.error or "no rules", None)
            return
        self._data, self._error, self._size = checked.data, None, None
        self.size_label.setText("Space size: deriving sketches…")
        self.error_label.hide()
        self._size_timer.start()
        self.changed.emit()

    def _on_size_timer(self) -> None:
        data = self._data
        if self._problem is None or data is None:
            return
        self._start(derive_size, self._problem, data, then=lambda derived: self._on_size(derived, data))

    def _on_size(self, derived: DerivedSize, data: dict[str, Any]) -> None:
        if derived.error is not None:
            self._set_state(None, derived.error, None)
        else:
            self._set_state(data, None, derived.size, sketches=derived.sketches, note=derived.note)

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
            self.set_problem(self._problem, self._kind)

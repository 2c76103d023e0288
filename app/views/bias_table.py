"""Where the cost model is wrong: tunelab.core.trust.bias's groups (per shape, knob value, tile size, sketch) as a
table under one plain-words sentence; flagged groups are highlighted, and picking a group says which
trials it holds (the cost-model view highlights them in its plots).

The report is computed in a child process (tunelab.app.workers.engine.BiasWorker, `tunelab bias --by-task`),
which also splits a session that tunes several shapes (tasks) into one shape group per task.
"""

from __future__ import annotations

import math
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tunelab.app import theme
from tunelab.app.widgets.fields import int_spin
from tunelab.app.widgets.row_table import single_row_table
from tunelab.core.records import BiasGroup, BiasReport

FLAGGED_BRUSH = QBrush(QColor(theme.FLAGGED_BG))
SAME_AS_COLOR = QColor(theme.TEXT_FAINT)
COLUMNS = (
    "Group",
    "n",
    "Model is off by",
    "Spread (σ of log)",
    "Spearman ρ",
    "Top-k recall",
    "What is wrong",
)
DIMENSIONS = (
    ("all", "overall"),
    ("shape", "shape"),
    ("knob", "knob"),
    ("tile", "tile"),
    ("sketch", "sketch"),
)
SCOPES = (
    ("session", "This session"),
    ("compare", "Sessions ticked in Compare"),
    ("workload", "All sessions of this workload"),
)


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None or not math.isfinite(value) else format(value, fmt)


def off_by(group: BiasGroup) -> str:
    """'4.0× too fast' (the model under-predicts latency) / '1.5× too slow' / 'exact'."""
    return ratio_words(group.ratio)


def ratio_words(ratio: float | None) -> str:
    """A typical predicted ÷ measured latency in words: '1.06× too fast' (the model guesses a lower
    latency than measured), '1.50× too slow', 'exact'. The one sign convention of the cost-model view."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return "—"
    if abs(math.log(ratio)) < 0.005:
        return "exact"
    if ratio < 1:
        return f"{1 / ratio:.2f}× too fast"
    return f"{ratio:.2f}× too slow"


SLOW_S = 30.0  # computing for longer than this: the label says why


class BiasTable(QWidget):
    """Summary sentence, scope / k pickers and the group table; `group_selected` carries trial ids."""

    group_selected = Signal(list)  # trial ids of the picked group ([] when none)
    scope_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._report: BiasReport | None = None
        self._shown: list[BiasGroup] = []

        self.summary = QLabel("No session selected.")
        self.summary.setObjectName("bias_summary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setStyleSheet("font-size: 13px; padding: 4px 2px;")

        self.scope_combo = QComboBox()
        for key, text in SCOPES:
            self.scope_combo.addItem(text, key)
        self.scope_combo.setToolTip(
            "Which sessions the bias table pools; sessions of other shapes give one shape group each"
        )
        self.k_spin = int_spin(
            1,
            50,
            5,
            "k of the top-k recall: the share of the k fastest measured trials the model "
            "also ranks among its k fastest",
        )
        self.k_spin.setPrefix("top-k: ")
        self.dimension_combo = QComboBox()
        self.dimension_combo.addItem("Every group", "")
        for key, text in DIMENSIONS[1:]:
            self.dimension_combo.addItem(f"By {text}", key)
        self.flagged_check = QCheckBox("Flagged only")
        self.status = QLabel()
        self.status.setProperty("role", "hint")
        self.busy_label = QLabel("computing…")
        self.busy_label.setObjectName("bias_busy")
        self.busy_label.setProperty("role", "hint")
        self.busy_label.hide()
        # "computing…" says for how long, and past SLOW_S why it still is: it never sits there unexplained.
        self._busy_since: float | None = None
        self._busy_timer = QTimer(self)
        self._busy_timer.setInterval(1000)
        self._busy_timer.timeout.connect(self._show_busy)
        self.scope_combo.currentIndexChanged.connect(lambda _i: self.scope_changed.emit())
        self.k_spin.valueChanged.connect(lambda _v: self.scope_changed.emit())
        self.dimension_combo.currentIndexChanged.connect(lambda _i: self._fill())
        self.flagged_check.toggled.connect(lambda _on: self._fill())
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addWidget(QLabel("Bias over"))
        controls.addWidget(self.scope_combo)
        controls.addWidget(self.k_spin)
        controls.addSpacing(12)
        controls.addWidget(self.dimension_combo)
        controls.addWidget(self.flagged_check)
        controls.addStretch(1)
        controls.addWidget(self.busy_label)
        controls.addWidget(self.status)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("bias_table")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        header = single_row_table(self.table)
        header.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._on_selection)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addLayout(controls)
        layout.addWidget(self.table, 1)

    # ---- public --------------------------------------------------------------------------------
    @property
    def scope(self) -> str:
        return str(self.scope_combo.currentData())

    def set_scope(self, scope: str) -> None:
        self.scope_combo.setCurrentIndex(max(0, self.scope_combo.findData(scope)))

    @property
    def k(self) -> int:
        return self.k_spin.value()

    @property
    def report(self) -> BiasReport | None:
        return self._report

    def groups(self) -> list[BiasGroup]:
        """The groups as the table shows them, top to bottom."""
        return list(self._shown)

    def flagged_rows(self) -> list[int]:
        return [i for i, g in enumerate(self._shown) if g.flagged]

    def select_group(self, label: str, dimension: str | None = None) -> bool:
        for i, g in enumerate(self._shown):
            if g.label == label and (dimension is None or g.dimension == dimension):
                self.table.selectRow(i)
                return True
        return False

    def selected_group(self) -> BiasGroup | None:
        rows = {i.row() for i in self.table.selectedIndexes()}
        return self._shown[min(rows)] if rows else None

    def show_message(self, text: str) -> None:
        """No report (no session, an error, nothing predicted yet): the sentence says why."""
        self._report = None
        self.summary.setText(text)
        self.status.setText("")
        self._fill()

    def set_busy(self, busy: bool) -> None:
        """Computing (True) or done (False: the label goes, whatever the outcome)."""
        if busy and self._busy_since is None:
            self._busy_since = time.monotonic()
            self._busy_timer.start()
        elif not busy:
            self._busy_since = None
            self._busy_timer.stop()
        self._show_busy()

    def _show_busy(self) -> None:
        since = self._busy_since
        self.busy_label.setVisible(since is not None)
        if since is None:
            return
        elapsed = time.monotonic() - since
        text = f"computing… {elapsed:.0f} s" if elapsed >= 2 else "computing…"
        if elapsed >= SLOW_S:
            text += " (in its own process, tunelab bias: slow on a busy machine)"
        self.busy_label.setText(text)
        self.busy_label.setToolTip(
            "The bias report runs in its own process (tunelab bias --by-task), again for each new batch "
            "of trials; it ends by itself, or says why it cannot be computed."
        )

    def set_report(self, report: BiasReport) -> None:
        selected = self.selected_group()
        self._report = report
        sessions = report.session_ids
        where = f"session {sessions[0]}" if len(sessions) == 1 else f"{len(sessions)} sessions"
        self.summary.setText(f"<b>Where the model is wrong</b> ({where}): {report.summary}")
        missing = report.counts.no_prediction
        self.status.setText(
            f"{len(report.flagged)} of {len(report.groups)} groups flagged · "
            f"{report.counts.predicted} predicted trials"
            + (f" ({missing} measured before the model was trained)" if missing else "")
        )
        self._fill()
        if selected is not None:
            self.select_group(selected.label, selected.dimension)

    # ---- table ---------------------------------------------------------------------------------
    def _fill(self) -> None:
        groups = list(self._report.groups) if self._report is not None else []
        dimension = self.dimension_combo.currentData()
        if dimension:
            groups = [g for g in groups if g.dimension == dimension or g.dimension == "all"]
        if self.flagged_check.isChecked():
            groups = [g for g in groups if g.flagged]
        self._shown = groups
        self.table.blockSignals(True)
        self.table.clearSelection()
        self.table.setRowCount(len(groups))
        bold = QFont()
        bold.setBold(True)
        for row, g in enumerate(groups):
            name = "overall" if g.dimension == "all" else f"{g.dimension}: {g.label}"
            recall = g.topk_recall
            values = (
                name,
                str(g.n),
                off_by(g),
                _num(g.residual_std, ".2f"),
                _num(g.spearman, ".2f"),
                "—" if recall is None else f"{recall:.2f} (k={g.k})",
                g.words or ("" if not g.same_as else f"same trials as {g.same_as}"),
            )
            tip = (
                f"{name}: {g.n} trials · mean log residual {_num(g.residual_mean, '+.3f')}"
                + (f"\n{g.words}" if g.words else "")
                + (f"\nHolds exactly the trials of {g.same_as}." if g.same_as else "")
            )
            for col, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                if col in (1, 3, 4, 5):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if g.flagged:
                    item.setBackground(FLAGGED_BRUSH)
                    if col in (0, 2, 6):
                        item.setFont(bold)
                elif g.same_as:
                    item.setForeground(SAME_AS_COLOR)
                self.table.setItem(row, col, item)
        self.table.blockSignals(False)
        self.group_selected.emit([])

    def _on_selection(self) -> None:
        group = self.selected_group()
        self.group_selected.emit([] if group is None else [t for t in group.trial_ids if t is not None])

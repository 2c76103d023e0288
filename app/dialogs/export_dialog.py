"""Choose what to export (the best or the selected trial), the formats and the folder.

Before anything is built the dialog says what the schedule file will state (tunelab.core.export.pick):
the trial, its confirmed figure and interval, whether it can be held to, and whether the kernel is
placement-sensitive, with the advice that follows and the choice to prefer the schedule whose worst
buffer placement is fastest (``--robust``)."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from tunelab.app.widgets.fields import line_edit, push_button
from tunelab.app.widgets.formatting import fmt_ms
from tunelab.core.records import SessionRecord, TrialRecord
from tunelab.core.usecases.export import MARKS, ExportPick

FORMAT_TEXT = {
    "schedule": "Schedule file (*.schedule.json): config, trace, statistics",
    "tvmscript": "Scheduled module as TVMScript (*.py)",
    "library": "Compiled library (export_library, *.so)",
    "database": "MetaSchedule JSON database (JSONDatabase + compile_tir)",
}


def export_formats() -> tuple[str, ...] | None:
    """The formats tunelab.core.export.files offers; None when this build has no tunelab.core.export.files."""
    try:
        import tunelab.core.usecases.export as export
    except ImportError:
        return None
    return tuple(getattr(export, "FORMATS", tuple(FORMAT_TEXT)))


def pick_figure(pick: ExportPick) -> str:
    """'#12, 1.23 ms confirmed (the session's 1.10 ms superseded)': the figure an export states, and the
    session's own when a confirmation replaced it."""
    mark = MARKS[
        "session" if pick.confirmation is None else "untrusted" if pick.untrusted_because else "confirmed"
    ]
    text = f"#{pick.trial.number}, {fmt_ms(pick.stated_ms)} ms {mark}"
    if pick.confirmation is None:
        return text + " as the session measured it"
    text += " confirmed" if pick.untrusted_because is None else " confirmed, untrusted"
    own = pick.trial.latency_ms
    if own is not None and fmt_ms(own) != fmt_ms(pick.stated_ms):
        text += f" (the session's {fmt_ms(own)} ms superseded)"
    return text


class ExportDialog(QDialog):
    def __init__(
        self,
        record: SessionRecord,
        selected_trial: TrialRecord | None,
        folder: str,
        parent: QWidget | None = None,
        *,
        picks: dict[bool, ExportPick] | None = None,
    ) -> None:
        """``selected_trial``: the trial picked in the Trials table, offered beside the best one.
        ``picks``: what the default export (False) and the robust one (True) would write, when known."""
        super().__init__(parent)
        self.setWindowTitle(f"Export from session {record.id}")
        self.picks = picks or {}
        self.trial_combo = QComboBox()
        default = self.picks.get(False)
        if default is not None:
            self.trial_combo.addItem(f"Best trial ({pick_figure(default)})", None)
        else:
            self.trial_combo.addItem(
                f"Best trial (#{record.best_trial_number}, {fmt_ms(record.best_ms)} ms)", None
            )
        if selected_trial is not None and selected_trial.id != record.best_trial_id:
            self.trial_combo.addItem(
                f"Selected trial (#{selected_trial.number}, {fmt_ms(selected_trial.latency_ms)} ms)",
                selected_trial.id,
            )
            self.trial_combo.setCurrentIndex(1)
        self.format_checks: dict[str, QCheckBox] = {}
        formats_box = QVBoxLayout()
        for name in export_formats() or tuple(FORMAT_TEXT):
            check = QCheckBox(FORMAT_TEXT.get(name, name))
            check.setChecked(True)
            self.format_checks[name] = check
            formats_box.addWidget(check)
        self.folder_edit = line_edit("export_folder", "The folder the exported files are written to")
        self.folder_edit.setText(folder)
        browse = push_button("Browse…", "Choose the folder", self._on_browse)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(browse)
        form = QFormLayout()
        form.addRow("Trial", self.trial_combo)
        form.addRow("Formats", formats_box)
        form.addRow("Folder", folder_row)
        self.robust_check = QCheckBox(
            "Prefer the schedule whose worst buffer placement is fastest (--robust)"
        )
        self.robust_check.setEnabled(True in self.picks)
        self.robust_check.toggled.connect(self._show_pick)
        self.trial_combo.currentIndexChanged.connect(self._show_pick)
        form.addRow("Placement", self.robust_check)
        self.pick_label = QLabel()
        self.pick_label.setWordWrap(True)
        self.pick_label.setObjectName("exportPick")
        note = QLabel(
            "The compiled library is built for the session's target; it loads on a machine like this one."
        )
        note.setProperty("role", "hint")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export")
        buttons.accepted.connect(self._on_accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.pick_label)
        layout.addWidget(note)
        self._show_pick()
        layout.addWidget(buttons)

    def pick(self) -> ExportPick | None:
        """What the chosen export writes, when it is the best trial and the picks are known."""
        if self.trial_combo.currentData() is not None:
            return None
        return self.picks.get(self.robust())

    def robust(self) -> bool:
        return self.robust_check.isChecked() and self.trial_combo.currentData() is None

    def _show_pick(self) -> None:
        pick = self.pick()
        sensitive = bool(pick and pick.placement and pick.placement.sensitive)
        self.pick_label.setText(f"The schedule file will state {pick.summary()}" if pick else "")
        self.pick_label.setVisible(pick is not None)
        self.pick_label.setProperty(
            "role", "warning" if sensitive or (pick and pick.untrusted_because) else "hint"
        )
        self.pick_label.style().unpolish(self.pick_label)
        self.pick_label.style().polish(self.pick_label)
        self.robust_check.setEnabled(True in self.picks and self.trial_combo.currentData() is None)

    def trial_id(self) -> int | None:
        return self.trial_combo.currentData()

    def formats(self) -> tuple[str, ...]:
        return tuple(name for name, check in self.format_checks.items() if check.isChecked())

    def folder(self) -> str:
        return self.folder_edit.text().strip()

    def _on_browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export into folder", self.folder())
        if folder:
            self.folder_edit.setText(folder)

    def _on_accept(self) -> None:
        if self.folder() and self.formats():
            self.accept()

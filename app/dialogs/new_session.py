"""The New-session dialog: problem, search space, tuner, measurement and budget -> a SessionSpec.

With the defaults a session is two clicks from the main window: "New session", then "Start".
The last options used are remembered (QSettings) and offered again.

Besides the catalog workloads the workload list ends with "Custom TE file…": a person's own TE compute
file (format: tunelab.core.workloads.custom), picked with a file dialog and loaded (and checked) at once. A file
that does not load is one message in the dialog and Start stays disabled; one that loads shows its shape
parameters, presets and dtypes like a catalog workload, and the spec carries its text (custom_source).
The last custom file (and its folder) is remembered too, and loaded again the next time.

Under the Target choice, the target's own fields (tunelab.app.dialogs.target_options): this CPU as detected,
an editable mcpu / mattr / threads, or a CUDA arch. Edited, they make the spec's target the JSON target they
spell; a target this host cannot run is refused as soon as a worker has resolved it (tunelab.app.workers.
target_facts; the dialog says "Checking the target…", Start off, until then), and an edited mcpu or mattr
must pass the self-check (in a thread) before Start is enabled.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QStyle,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from tunelab.app.dialogs.measure_options import EarlyStopRow, MeasureOptionsBox
from tunelab.app.dialogs.new_session_form import CUSTOM, CUSTOM_FILE_KEY, CUSTOM_HINT, NewSessionForm
from tunelab.app.dialogs.new_session_tuners import tuner_availability
from tunelab.app.dialogs.remote_options import RemoteOptions
from tunelab.app.dialogs.space_editor import SpaceEditor
from tunelab.app.dialogs.target_options import TargetOptions
from tunelab.app.widgets.fields import int_spin
from tunelab.app.widgets.pages import scrolled
from tunelab.app.widgets.timers import single_shot
from tunelab.app.workers import target_facts, tvm_loader
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.records import SPEC_DEFAULTS, SessionSpec
from tunelab.core.usecases.targets import REMOTE_TARGET, TargetInfo

SETTINGS_KEY = "new_session/last"
TARGET_CHOICES = (
    ("auto", "auto"),
    ("llvm", "CPU (llvm)"),
    ("cuda", "CUDA GPU"),
    (REMOTE_TARGET, "Server's CPU (RPC)"),  # what a server under the chosen key reports (--target remote)
)
PROBLEM_DEBOUNCE_MS = 200


def _check_spec(spec: SessionSpec, server_target: TargetInfo | None) -> None:
    """tunelab.core.session.loop.check_spec, for a worker thread (its TVM objects stay there)."""
    from tunelab.core.usecases.tuning import check_spec

    check_spec(spec, server_target)


class NewSessionDialog(NewSessionForm):
    """Problem, search space, tuner, measurement and budget -> a SessionSpec (see the module's words)."""

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # The catalog's workloads are TVM compute definitions: the dialog lists them only once the app's
        # one import of TVM has finished (at most the rest of its ~1.5 s, right after launch).
        tvm_loader.wait()
        from tunelab.core.usecases.listing import list_workloads

        self.setWindowTitle("New tuning session")
        self.setMinimumSize(760, 620)
        self._settings = settings
        self._workloads = {w.name: w for w in list_workloads()}
        self._shape_spins: dict[str, QSpinBox] = {}
        self._tuner_chosen = False
        self._problem_error: str | None = None  # what is wrong with the workload or its shape
        self._target_error: str | None = None  # why the target the dialog shows cannot be used here
        self._target: TargetInfo | None = None
        # waiting for a worker's answer (tunelab.app.workers.target_facts): see TargetChecks
        self._target_pending = self._features_pending = self._detected_pending = False
        # "Server's CPU": the targets servers reported, by (tracker address, key); the pair being asked now
        # (one question at a time) and the last pair that could not answer, with its message.
        self._server_targets: dict[tuple[str, str], TargetInfo] = {}
        self._server_query: CallWorker | None = None
        self._spec_check: CallWorker | None = None  # Start's check of the spec, in a thread
        self._checking: SessionSpec | None = None  # the spec it checks
        self._server_failure: tuple[tuple[str, str], str] | None = None
        # The custom workload: the one loaded from custom_path (None: no file yet, or it did not load).
        self._custom: Any = None
        self._custom_source: str | None = None
        self._custom_error: str | None = None
        self._custom_loader: CallWorker | None = None
        self.custom_path: str | None = None
        self._catalog_index = 0  # the last catalog workload shown (picking no custom file goes back to it)

        self.tabs = QTabWidget()
        # Scrolls: a workload with many shape parameters and the target's options exceed the dialog's height,
        # and a form squeezed below its minimum overlaps its rows.
        self.tabs.addTab(scrolled(self._problem_page()), "Problem")
        self.tabs.addTab(self._space_page(), "Search space")
        tuning_page = self._tuning_page()
        self.tabs.addTab(scrolled(tuning_page), "Tuner, budget, measurement")
        # Its two columns side by side need this width (and its height's scroll bar beside them); below it
        # their labels and fields clip. Its height scrolls.
        scroll_bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        self.setMinimumWidth(
            max(self.minimumWidth(), tuning_page.minimumSizeHint().width() + 32 + scroll_bar)
        )

        self.summary = QLabel()
        self.summary.setProperty("role", "hint")
        self.summary.setWordWrap(True)
        self.error_label = QLabel()
        self.error_label.setProperty("role", "error")
        self.error_label.setWordWrap(True)
        self.error_label.setObjectName("dialog_error")
        self.error_label.hide()
        self.buttons = QDialogButtonBox()
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("StartButton")
        self.start_button.setDefault(True)
        self.start_button.setAutoDefault(True)
        self.buttons.addButton(self.start_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._on_start)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.summary)
        layout.addWidget(self.error_label)
        layout.addWidget(self.buttons)
        # The summary names the tuner: a person's pick, or the recommendation following the trials.
        self.tuner_combo.currentIndexChanged.connect(self._update_summary)

        self._problem_timer = single_shot(self, PROBLEM_DEBOUNCE_MS, self._on_problem_changed)
        # a bound method: a dialog gone is not called back
        target_facts.facts().answered.connect(self._on_target_facts)

        self._restore()
        self._on_problem_changed()

    # ---- pages ---------------------------------------------------------------------------------
    def _problem_page(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.workload_combo = QComboBox()
        for wl in self._workloads.values():
            self.workload_combo.addItem(f"{wl.name} — {wl.title}", wl.name)
        self.workload_combo.insertSeparator(self.workload_combo.count())
        self.workload_combo.addItem("Custom TE file…", CUSTOM)
        self.workload_combo.setItemData(
            self.workload_combo.count() - 1,
            "Your own TE compute file: " + CUSTOM_HINT,
            Qt.ItemDataRole.ToolTipRole,
        )
        self.workload_combo.currentIndexChanged.connect(self._on_workload_changed)
        self.workload_doc = QLabel()
        self.workload_doc.setWordWrap(True)
        self.workload_doc.setProperty("role", "hint")
        self.custom_path_edit = QLineEdit()
        self.custom_path_edit.setObjectName("custom_path")
        self.custom_path_edit.setReadOnly(True)
        self.custom_path_edit.setPlaceholderText("no file chosen")
        self.custom_button = QPushButton("Choose file…")
        self.custom_button.setObjectName("custom_file_button")
        self.custom_button.setToolTip("Pick (or pick again, after editing it) your TE workload file")
        self.custom_button.clicked.connect(self.choose_custom_file)
        self.custom_row = QWidget()
        custom_layout = QHBoxLayout(self.custom_row)
        custom_layout.setContentsMargins(0, 0, 0, 0)
        custom_layout.addWidget(self.custom_path_edit, 1)
        custom_layout.addWidget(self.custom_button)
        self.preset_combo = QComboBox()
        self.preset_combo.currentIndexChanged.connect(self._on_preset_changed)
        self.shape_box = QGroupBox("Shape")
        self.shape_form = QFormLayout(self.shape_box)
        self.shape_form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.dtype_combo = QComboBox()
        self.dtype_combo.currentIndexChanged.connect(self._schedule_problem)
        self.target_combo = QComboBox()
        for value, text in TARGET_CHOICES:
            self.target_combo.addItem(text, value)
        self.target_combo.currentIndexChanged.connect(self._on_problem_changed)
        self.target_label = QLabel()
        self.target_label.setObjectName("detected_target")
        self.target_options = TargetOptions()  # what was detected comes from workers (_check_target)
        self.target_options.edited.connect(self._on_target_edited)
        self.target_options.checked.connect(self._update_state)
        self.problem_error = QLabel()
        self.problem_error.setProperty("role", "error")
        self.problem_error.setWordWrap(True)
        self.problem_error.hide()
        form.addRow("Workload", self.workload_combo)
        form.addRow("File", self.custom_row)
        form.setRowVisible(self.custom_row, False)
        self._problem_form = form
        form.addRow("", self.workload_doc)
        form.addRow("Preset", self.preset_combo)
        form.addRow(self.shape_box)
        form.addRow("Data type", self.dtype_combo)
        form.addRow("Target", self.target_combo)
        form.addRow("Detected", self.target_label)
        form.addRow(self.target_options)
        form.addRow(self.problem_error)
        return page

    def _space_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        row = QHBoxLayout()
        row.addWidget(QLabel("Space"))
        self.space_kind_combo = QComboBox()
        self.space_kind_combo.addItem("template — explicit knobs (AutoTVM style)", "template")
        self.space_kind_combo.addItem("auto — MetaSchedule sketch rules (Ansor style)", "auto")
        self.space_kind_combo.currentIndexChanged.connect(self._on_problem_changed)
        row.addWidget(self.space_kind_combo, 1)
        layout.addLayout(row)
        self.space_editor = SpaceEditor()
        self.space_editor.changed.connect(self._on_space_changed)
        layout.addWidget(self.space_editor, 1)
        return page

    def _tuning_page(self) -> QWidget:
        page = QWidget()
        layout = QHBoxLayout(page)
        left = QVBoxLayout()
        left.addWidget(self._tuner_box())

        budget_box = QGroupBox("Budget")
        budget = QFormLayout(budget_box)
        # The early-stop row is wide: in a narrow column it goes under its label rather than clip it.
        budget.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.trials_spin = int_spin(1, 1_000_000, SPEC_DEFAULTS["trials"], "Trials to measure in all")
        self.batch_spin = int_spin(
            1, 4096, SPEC_DEFAULTS["batch"], "Candidates built and measured together per round"
        )
        self.early_stop = EarlyStopRow(self.trials_spin)
        self.early_check, self.early_spin = self.early_stop.check, self.early_stop.spin
        self.seed_spin = int_spin(
            0, 2**31 - 1, SPEC_DEFAULTS["seed"], "Random seed of the tuner and the inputs"
        )
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("automatic: workload and shape")
        budget.addRow("Trials", self.trials_spin)
        budget.addRow("Batch", self.batch_spin)
        budget.addRow("Early stop", self.early_stop)
        budget.addRow("Seed", self.seed_spin)
        budget.addRow("Name", self.name_edit)
        left.addWidget(budget_box)
        self.remote_options = RemoteOptions()
        self.remote_options.changed.connect(self._on_remote_changed)
        left.addWidget(self.remote_options)
        left.addStretch(1)

        self.measure_box = MeasureOptionsBox()
        box = self.measure_box
        # The spins by the names the tests and the rest of the dialog use.
        self.number_spin, self.repeat_spin, self.min_repeat_spin = (
            box.number_spin,
            box.repeat_spin,
            box.min_repeat_spin,
        )
        self.warmup_spin, self.timeout_spin = box.warmup_spin, box.timeout_spin
        self.confirm_spin, self.confirm_cap_spin = box.confirm_spin, box.confirm_cap_spin
        self.flush_check, self.check_check = box.flush_check, box.check_check
        measure_box = box
        right = QVBoxLayout()
        right.addWidget(measure_box)
        right.addStretch(1)
        layout.addLayout(left, 1)
        layout.addLayout(right, 1)
        for w in (self.trials_spin, self.batch_spin, self.seed_spin):
            w.valueChanged.connect(self._update_summary)
        return page

    # ---- Start: the spec checked in a thread ---------------------------------------------------
    def _on_start(self) -> None:
        """Check the spec in a worker (building the space and drawing configs until one schedules can
        take seconds, more for tensor-core spaces), then accept the dialog; a refusal is shown in place."""
        if not self.start_button.isEnabled() or self._spec_check is not None:
            return
        spec = self.spec()
        # the server's CPU was asked in a thread already: the check does not ask the network again
        worker = CallWorker(None, _check_spec, spec, self._target if spec.target == REMOTE_TARGET else None)
        worker.succeeded.connect(self._on_spec_checked)
        worker.failed.connect(self._on_spec_refused)
        self._spec_check, self._checking = worker, spec
        keep_alive(worker).start()
        self.start_button.setText("Checking…")
        self._update_state()
        self._set_error_role("hint")
        self.error_label.setText("Checking that the space schedules on this target…")
        self.error_label.show()

    def _set_error_role(self, role: str) -> None:
        self.error_label.setProperty("role", role)
        self.error_label.style().unpolish(self.error_label)  # a dynamic property: restyle by hand
        self.error_label.style().polish(self.error_label)

    def is_checking_spec(self) -> bool:
        return self._spec_check is not None

    def _end_spec_check(self) -> SessionSpec | None:
        checked, self._spec_check, self._checking = self._checking, None, None
        self.start_button.setText("Start")
        self._set_error_role("error")
        self._update_state()
        return checked

    def _on_spec_checked(self, _result: object) -> None:
        checked = self._end_spec_check()
        if checked is None:
            return
        if self.spec() != checked:  # edited while it was checked: check what Start would start now
            self._on_start()
            return
        self._save(checked)
        self.accept()

    def _on_spec_refused(self, message: str) -> None:
        self._end_spec_check()
        self.error_label.setText(message)
        self.error_label.show()

    # ---- remembered options --------------------------------------------------------------------
    def _save(self, spec: SessionSpec) -> None:
        if self._settings is None:
            return
        data = asdict(spec)
        data.pop("space", None)  # an edited space belongs to its problem; start from defaults next time
        data.pop("custom_source", None)
        data.pop("name", None)
        data["tuner_chosen"] = self._tuner_chosen
        data["target_choice"] = self.target_combo.currentData()  # the target itself may be the fields' JSON
        data["remote"] = self.remote_options.remembered()  # the tracker's fields, also while measuring here
        self._settings.setValue(SETTINGS_KEY, json.dumps(data))

    def _restore(self) -> None:
        last: dict[str, Any] = {}
        if self._settings is not None:
            try:
                last = json.loads(str(self._settings.value(SETTINGS_KEY, "{}")))
            except (TypeError, ValueError):
                last = {}
        workload = last.get("workload", "gemm")
        custom_file = (
            str(self._settings.value(CUSTOM_FILE_KEY, "") or "") if self._settings is not None else ""
        )
        if workload == CUSTOM and custom_file and Path(custom_file).is_file():
            # the last custom file, read again (it may have been edited); checked once restored
            self.load_custom_file(custom_file, check_now=False)
        else:
            index = self.workload_combo.findData(workload if workload in self._workloads else "gemm")
            self.workload_combo.blockSignals(True)
            self.workload_combo.setCurrentIndex(max(index, 0))
            self.workload_combo.blockSignals(False)
            self._show_workload()
        for key, value in (last.get("shape") or {}).items():
            if key in self._shape_spins and isinstance(value, int):
                self._shape_spins[key].setValue(value)
        self._match_preset()
        self._set_combo(self.dtype_combo, last.get("dtype"), text=True)
        self._set_combo(self.target_combo, last.get("target_choice", last.get("target")))
        self.target_options.set_target_text(last.get("target"))
        self._set_combo(self.space_kind_combo, last.get("space_kind"))
        tuner = last.get("tuner")
        if (
            last.get("tuner_chosen")
            and isinstance(tuner, str)
            and self.tuner_combo.findData(tuner) >= 0
            and tuner_availability().get(tuner)
            is None  # unknown yet: restored, greyed later if it cannot load
        ):
            self._set_combo(self.tuner_combo, last.get("tuner"))
            self._tuner_chosen = True
        self._set_combo(self.cost_model_combo, (last.get("tuner_options") or {}).get("model", "xgb"))
        self._show_cost_model()
        for spin, key in ((self.trials_spin, "trials"), (self.batch_spin, "batch"), (self.seed_spin, "seed")):
            if isinstance(last.get(key), int):
                spin.setValue(last[key])
        if isinstance(last.get("early_stop"), int):
            self.early_stop.set_value(last["early_stop"])
        self.measure_box.set_options(last.get("measure") or {})
        if isinstance(last.get("remote"), dict):
            self.remote_options.set_options(last["remote"])
        self._problem_timer.stop()

    @staticmethod
    def _set_combo(combo: QComboBox, value: Any, text: bool = False) -> None:
        if value is None:
            return
        index = combo.findText(value) if text else combo.findData(value)
        if index >= 0:
            combo.blockSignals(True)
            combo.setCurrentIndex(index)
            combo.blockSignals(False)

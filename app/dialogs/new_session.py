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
spell; a target this host cannot run is refused at once, and an edited mcpu or mattr must pass the
self-check (in a thread) before Start is enabled.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from functools import cache
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from tunelab.app.dialogs.measure_options import EarlyStopRow, MeasureOptionsBox
from tunelab.app.dialogs.remote_options import RemoteOptions
from tunelab.app.dialogs.space_editor import SpaceEditor
from tunelab.app.dialogs.target_options import TargetOptions
from tunelab.app.widgets.combo import combo_item
from tunelab.app.workers import tvm_loader
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.errors import TunelabError
from tunelab.core.records import SPEC_DEFAULTS, SessionSpec
from tunelab.core.target.info import REMOTE_TARGET, TargetInfo
from tunelab.core.workloads.shape_text import format_shape

SETTINGS_KEY = "new_session/last"
CUSTOM = "custom"  # tunelab.core.workloads.catalog.CUSTOM_NAME: the workload list's "Custom TE file…" entry
CUSTOM_DIR_KEY = "new_session/custom_dir"  # the folder the file dialog last picked a custom file in
CUSTOM_FILE_KEY = "new_session/custom_file"  # the last custom file that loaded
CUSTOM_FILTER = "Python files (*.py);;All files (*)"
CUSTOM_HINT = (
    "Choose a Python file that defines PARAMS, compute() and reference() "
    "(the format of `tunelab tune custom --custom FILE`)."
)
TARGET_CHOICES = (
    ("auto", "auto"),
    ("llvm", "CPU (llvm)"),
    ("cuda", "CUDA GPU"),
    (REMOTE_TARGET, "Server's CPU (RPC)"),  # what a server under the chosen key reports (--target remote)
)
SHAPE_MAX = 1 << 20
PROBLEM_DEBOUNCE_MS = 200
# When the recommended strategy cannot be loaded here, the next best that can.
FALLBACK_TUNERS = ("xgb", "genetic", "random", "grid")


@cache
def resolved_target(text: str, elsewhere: bool = False) -> TargetInfo:
    """resolve_target, once per target text (the CUDA probe and LLVM host detection are not free); a
    choice ("auto", "llvm", "cuda") is what tunelab detects, a JSON target is checked as the CLI would
    (``elsewhere``: measured on an RPC tracker's servers, so built here for whatever it names)."""
    from tunelab.core.target.info import resolve_target

    return resolve_target(text, elsewhere=elsewhere)


def _check_spec(spec: SessionSpec, server_target: TargetInfo | None) -> None:
    """tunelab.core.session.loop.check_spec, for a worker thread (its TVM objects stay there)."""
    from tunelab.core.session.loop import check_spec

    check_spec(spec, server_target)


def server_target(address: str, key: str) -> TargetInfo:
    """The CPU target of a server under ``key`` at the tracker ``address``, as ``--target remote`` takes
    it (tunelab.core.measure.remote.remote_target); in a thread: it talks to the tracker and a server."""
    from tunelab.core.measure.remote import TrackerAddress, remote_target

    return remote_target(TrackerAddress.parse(address), key, timeout_s=30.0)


@cache
def tuner_availability() -> dict[str, str | None]:
    """Tuner name -> None when it loads here, else why not."""
    from tunelab.core.search.tuners.registry import get_tuner_class, tuner_names

    out: dict[str, str | None] = {}
    for name in tuner_names():
        try:
            get_tuner_class(name)
            out[name] = None
        except TunelabError as exc:
            out[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - a broken optional strategy must not break the dialog
            out[name] = f"{type(exc).__name__}: {exc}"
    return out


def _spin(lo: int, hi: int, value: int, tip: str = "") -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(lo, hi)
    spin.setValue(value)
    spin.setToolTip(tip)
    spin.setGroupSeparatorShown(True)
    return spin


class ShapeSpin(QSpinBox):
    """A shape parameter's box. It takes any value from 0 up, below the parameter's minimum too, and an
    emptied box reads 0: the shape check then says what is wrong in the dialog (Start disabled). A box
    limited to the minimum silently put back its last value (0 typed for M read 512 again)."""

    def __init__(self, value: int, tip: str = "") -> None:
        super().__init__()
        self.setRange(0, SHAPE_MAX)
        self.setValue(value)
        self.setToolTip(tip)
        self.setGroupSeparatorShown(True)

    def fixup(self, text: str) -> str:
        return text if text.strip() else "0"


class NewSessionDialog(QDialog):
    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # The dialog describes targets and checks spaces with TVM on this thread: only once the app's
        # one import of it has finished (at most the rest of its ~1.5 s, right after launch).
        tvm_loader.wait()
        from tunelab.core.workloads.catalog import list_workloads

        self.setWindowTitle("New tuning session")
        self.setMinimumSize(760, 620)
        self._settings = settings
        self._workloads = {w.name: w for w in list_workloads()}
        self._shape_spins: dict[str, QSpinBox] = {}
        self._tuner_chosen = False
        self._problem_error: str | None = None  # what is wrong with the workload or its shape
        self._target_error: str | None = None  # why the target the dialog shows cannot be used here
        self._target: TargetInfo | None = None
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
        self.custom_path: str | None = None
        self._catalog_index = 0  # the last catalog workload shown (picking no custom file goes back to it)

        self.tabs = QTabWidget()
        # Scrolls: a workload with many shape parameters and the target's options exceed the dialog's height,
        # and a form squeezed below its minimum overlaps its rows.
        problem = QScrollArea()
        problem.setWidgetResizable(True)
        problem.setFrameShape(QFrame.Shape.NoFrame)
        problem.setWidget(self._problem_page())
        self.tabs.addTab(problem, "Problem")
        self.tabs.addTab(self._space_page(), "Search space")
        self.tabs.addTab(self._tuning_page(), "Tuner, budget, measurement")

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

        self._problem_timer = QTimer(self)
        self._problem_timer.setSingleShot(True)
        self._problem_timer.setInterval(PROBLEM_DEBOUNCE_MS)
        self._problem_timer.timeout.connect(self._on_problem_changed)

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
        from tunelab.core.target.host_cpu import host_cpu

        self.target_options = TargetOptions(host_cpu(), resolved_target("llvm"), resolved_target("cuda"))
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
        tuner_box = QGroupBox("Tuner")
        tuner_form = QFormLayout(tuner_box)
        self.tuner_combo = QComboBox()
        from tunelab.core.search.tuners.registry import tuner_description

        self._tuner_availability = tuner_availability()
        for name, why in self._tuner_availability.items():
            self.tuner_combo.addItem(name, name)
            item = combo_item(self.tuner_combo, self.tuner_combo.count() - 1)
            item.setToolTip(why or tuner_description(name))  # the registry's one line, or why it cannot load
            if why:
                item.setEnabled(False)
        self.tuner_combo.activated.connect(self._on_tuner_chosen)
        self.space_kind_combo.currentIndexChanged.connect(self._offer_tuners)
        self.tuner_hint = QLabel()
        self.tuner_hint.setProperty("role", "hint")
        self.tuner_hint.setWordWrap(True)
        tuner_form.addRow("Strategy", self.tuner_combo)
        tuner_form.addRow("", self.tuner_hint)
        # The model that ranks the xgb tuner's candidates (the registry of tunelab.core.search.models);
        # the other tuners use none.
        from tunelab.core.search.models import COST_MODEL_WORDS, cost_model_names

        self.cost_model_combo = QComboBox()
        self.cost_model_combo.setObjectName("cost_model_combo")
        for name in cost_model_names():
            self.cost_model_combo.addItem(name, name)
            item = combo_item(self.cost_model_combo, self.cost_model_combo.count() - 1)
            item.setToolTip(COST_MODEL_WORDS.get(name, ""))
        self.cost_model_combo.setToolTip("The cost model that ranks candidates (the xgb tuner's)")
        self.tuner_combo.currentIndexChanged.connect(self._show_cost_model)
        tuner_form.addRow("Cost model", self.cost_model_combo)
        self._show_cost_model()
        left.addWidget(tuner_box)

        budget_box = QGroupBox("Budget")
        budget = QFormLayout(budget_box)
        self.trials_spin = _spin(1, 1_000_000, SPEC_DEFAULTS["trials"], "Trials to measure in all")
        self.batch_spin = _spin(
            1, 4096, SPEC_DEFAULTS["batch"], "Candidates built and measured together per round"
        )
        self.early_stop = EarlyStopRow(self.trials_spin)
        self.early_check, self.early_spin = self.early_stop.check, self.early_stop.spin
        self.seed_spin = _spin(0, 2**31 - 1, SPEC_DEFAULTS["seed"], "Random seed of the tuner and the inputs")
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

    # ---- what the dialog holds -----------------------------------------------------------------
    @property
    def is_custom(self) -> bool:
        return self.workload_combo.currentData() == CUSTOM

    @property
    def workload(self) -> Any:
        """The chosen workload; for "Custom TE file…" the loaded one, None while no file has loaded."""
        if self.is_custom:
            return self._custom
        return self._workloads[self.workload_combo.currentData()]

    def shape(self) -> dict[str, int]:
        return {name: spin.value() for name, spin in self._shape_spins.items()}

    def spec(self) -> SessionSpec:
        """The session as the dialog shows it now."""
        measure = replace(self.measure_box.options(), **self.remote_options.options())
        custom = self.is_custom
        return SessionSpec(
            workload=CUSTOM if custom else self.workload.name,
            shape=self.shape(),
            dtype=self.dtype_combo.currentText(),
            custom_source=self._custom_source if custom else None,
            target=self._target_text(),
            space_kind=self.space_kind_combo.currentData(),
            space=self.space_editor.space_data(),
            tuner=self.tuner_combo.currentData(),
            tuner_options=self._tuner_options(),
            trials=self.trials_spin.value(),
            batch=self.batch_spin.value(),
            early_stop=self.early_stop.value(),
            seed=self.seed_spin.value(),
            measure=measure,
            name=self.name_edit.text().strip(),
        )

    def can_start(self) -> bool:
        return self.start_button.isEnabled()

    # ---- the custom workload -------------------------------------------------------------------
    def choose_custom_file(self) -> bool:
        """Pick a custom TE workload file with a file dialog and load it; False when none was picked."""
        folder = ""
        if self._settings is not None:
            folder = str(self._settings.value(CUSTOM_DIR_KEY, "") or "")
        if not folder and self.custom_path:
            folder = str(Path(self.custom_path).parent)
        path, _ = QFileDialog.getOpenFileName(self, "Open a custom TE workload file", folder, CUSTOM_FILTER)
        if not path:
            return False
        if self._settings is not None:
            self._settings.setValue(CUSTOM_DIR_KEY, str(Path(path).parent))
        self.load_custom_file(path)
        return True

    def load_custom_file(self, path: str, *, check_now: bool = True) -> bool:
        """Load and check the custom workload file at `path` and show it (the workload list goes to
        "Custom TE file…"). True when it loaded; else its error is shown and Start stays disabled.
        `check_now` derives the space at once (no typing debounce: picking a file is one action)."""
        from tunelab.core.workloads.catalog import load_custom_workload

        self.custom_path = str(path)
        self._custom = self._custom_source = self._custom_error = None
        try:
            source = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self._custom_error = f"Cannot read {path}: {why}"
        else:
            try:
                self._custom = load_custom_workload(source)
                self._custom_source = source
            except TunelabError as exc:
                self._custom_error = (
                    f"{Path(path).name} does not load: {str(exc).removeprefix(CUSTOM + ': ')}"
                )
            except Exception as exc:  # noqa: BLE001 - whatever the person's file does is a message, not a crash
                self._custom_error = f"{Path(path).name} does not load: {type(exc).__name__}: {exc}"
        if self._custom is not None and self._settings is not None:
            self._settings.setValue(CUSTOM_FILE_KEY, self.custom_path)
        self.custom_path_edit.setText(self.custom_path)
        self.custom_path_edit.setToolTip(self.custom_path)
        index = self.workload_combo.findData(CUSTOM)
        if self.workload_combo.currentIndex() != index:
            self.workload_combo.blockSignals(True)
            self.workload_combo.setCurrentIndex(index)
            self.workload_combo.blockSignals(False)
        self._show_workload()
        if check_now:
            self._on_problem_changed()
        return self._custom is not None

    # ---- slots ---------------------------------------------------------------------------------
    def _on_workload_changed(self) -> None:
        if self.is_custom and self._custom is None and self._custom_error is None:
            # "Custom TE file…" with no file yet: ask for one; no file picked goes back to the catalog.
            if not self.choose_custom_file():
                self.workload_combo.blockSignals(True)
                self.workload_combo.setCurrentIndex(self._catalog_index)
                self.workload_combo.blockSignals(False)
                self._show_workload()
            return
        self._show_workload()

    def _show_workload(self) -> None:
        """Fill the shape, preset and dtype fields from the chosen workload."""
        custom = self.is_custom
        if not custom:
            self._catalog_index = self.workload_combo.currentIndex()
        self._problem_form.setRowVisible(self.custom_row, custom)
        wl = self.workload
        if wl is None:
            self.workload_doc.setText(CUSTOM_HINT)
        elif custom:
            self.workload_doc.setText(f"{wl.title}: {wl.description}")
        else:
            self.workload_doc.setText(wl.description)
        while self.shape_form.rowCount():
            self.shape_form.removeRow(0)
        self._shape_spins = {}
        for p in wl.params if wl is not None else ():
            spin = ShapeSpin(p.default, p.doc)
            spin.setObjectName(f"shape_{p.name}")
            spin.setMinimumWidth(120)
            spin.valueChanged.connect(self._on_shape_edited)
            self._shape_spins[p.name] = spin
            self.shape_form.addRow(p.name, spin)
        self.preset_combo.blockSignals(True)
        self.preset_combo.clear()
        self.preset_combo.addItem("(custom)", None)
        for name, shape in wl.presets.items() if wl is not None else ():
            self.preset_combo.addItem(f"{name}  ({', '.join(f'{k}={v}' for k, v in shape.items())})", name)
        self.preset_combo.blockSignals(False)
        self.dtype_combo.blockSignals(True)
        self.dtype_combo.clear()
        self.dtype_combo.addItems(list(wl.dtypes) if wl is not None else [])
        self.dtype_combo.blockSignals(False)
        self._match_preset()
        self._schedule_problem()

    def _on_preset_changed(self) -> None:
        name = self.preset_combo.currentData()
        if name is None or self.workload is None:
            return
        for key, value in self.workload.presets[name].items():
            spin = self._shape_spins[key]
            spin.blockSignals(True)
            spin.setValue(value)
            spin.blockSignals(False)
        self._schedule_problem()

    def _on_shape_edited(self) -> None:
        self._match_preset()
        self._schedule_problem()

    def _match_preset(self) -> None:
        if self.workload is None:
            return
        shape = self.shape()
        match = next(
            (
                i
                for i in range(1, self.preset_combo.count())
                if {**shape, **self.workload.presets[self.preset_combo.itemData(i)]} == shape
            ),
            0,
        )
        self.preset_combo.blockSignals(True)
        self.preset_combo.setCurrentIndex(match)
        self.preset_combo.blockSignals(False)

    def _schedule_problem(self) -> None:
        self.start_button.setEnabled(False)
        self._problem_timer.start()

    def _on_target_edited(self) -> None:
        self._check_target()  # cheap: a target this host cannot run is marked, and Start disabled, at once
        self._schedule_problem()  # the space follows the target once typing pauses
        self._update_state()

    def _check_target(self) -> None:
        """Resolve the target the dialog shows as the CLI would, and ask for its self-check when edited."""
        options = self.target_options
        self._target, self._target_error = None, None
        choice = self.target_combo.currentData()
        options.setVisible(choice != REMOTE_TARGET)  # a server's CPU is what the server says, not fields
        if choice == REMOTE_TARGET:
            self._check_server_target()
            options.want_check(None)
            return
        # Measured on an RPC tracker's servers, kernels are built here for whatever the fields name (another
        # mtriple cross-compiled); the session checks them on a server before it stores anything.
        remote = self.remote_options.is_remote
        try:
            options.show_kind(resolved_target(choice).kind)
            options.check_spelling()
        except TunelabError as exc:
            self._target_error = str(exc)
        else:
            try:
                self._target = resolved_target(options.target_text(choice), remote)
            except TunelabError as exc:
                self._target_error = str(exc)
                options.mark_refused()
        if self._target is not None and not self._target.can_run and not remote:
            self._target_error = f"{self._target.description}: kernels can be built here but not measured"
        wanted = self._target_error is None and options.is_edited() and not remote
        options.want_check(self._target if wanted else None)

    def _target_text(self) -> str:
        choice = self.target_combo.currentData()
        return REMOTE_TARGET if choice == REMOTE_TARGET else self.target_options.target_text(choice)

    # ---- "Server's CPU": the target a server under the chosen key reports --------------------------
    def _server_pair(self) -> tuple[str, str] | None:
        box = self.remote_options
        if not box.is_remote or not box.address_text() or not box.key():
            return None
        return box.address_text(), box.key()

    def _check_server_target(self) -> None:
        """Set the target from the server's answer, or say what it needs; ask a server in a thread when
        the tracker and key are new (Start waits for the answer)."""
        box = self.remote_options
        pair = self._server_pair()
        if pair is None:
            self._target_error = (
                "Server's CPU: choose Remote (RPC tracker) under Where to measure, and a key"
                if not box.is_remote
                else box.error() or "Server's CPU: query the tracker and choose a key"
            )
            return
        if pair in self._server_targets:
            self._target = self._server_targets[pair]
        elif self._server_failure is not None and self._server_failure[0] == pair:
            self._target_error = self._server_failure[1]
        elif self._server_query is None:
            worker = CallWorker(None, server_target, *pair)
            worker.succeeded.connect(lambda target, p=pair: self._on_server_answer(p, target))
            worker.failed.connect(lambda message, _d, p=pair: self._on_server_failed(p, message))
            self._server_query = worker
            keep_alive(worker).start()

    def is_asking_server(self) -> bool:
        return self._server_query is not None

    def _on_server_answer(self, pair: tuple[str, str], target: TargetInfo) -> None:
        self._server_query = None
        self._server_targets[pair] = target
        self._on_problem_changed()

    def _on_server_failed(self, pair: tuple[str, str], message: str) -> None:
        self._server_query = None
        self._server_failure = (pair, message.splitlines()[0] if message else "the server did not answer")
        self._on_problem_changed()

    def _on_remote_changed(self) -> None:
        """Where to measure changed: a server's CPU follows the key, and edited fields are checked for
        there. The space is derived again (dropping its edits) only when the target itself changed."""
        before = (self._target.json if self._target else None, self._target_error)
        self._check_target()
        if (self._target.json if self._target else None, self._target_error) != before:
            self._on_problem_changed()
        else:
            self._show_detected()
            self._update_state()

    def _show_detected(self) -> None:
        """The Detected row: this host's target, or what the server under the key says of its CPU."""
        if self.target_combo.currentData() != REMOTE_TARGET:
            auto = resolved_target("auto")
            self.target_label.setText(auto.description)
            self.target_label.setToolTip(
                auto.note or "LLVM's host CPU name; this host can execute its instruction sets"
            )
            return
        pair = self._server_pair()
        if self._target is not None:
            self.target_label.setText(self._target.description)
            self.target_label.setToolTip(self._target.note or "")
        elif self._server_query is not None and pair is not None:
            self.target_label.setText(f"asking a server under key {pair[1]} at {pair[0]} for its CPU…")
            self.target_label.setToolTip("")
        else:
            self.target_label.setText("a server's CPU, once a tracker and key are chosen")
            self.target_label.setToolTip("")

    def _on_problem_changed(self) -> None:
        self._problem_timer.stop()
        self._problem_error = None
        self._check_target()
        self._show_detected()
        shape = None
        if self._target_error is None and self.workload is None:
            self._problem_error = self._custom_error or CUSTOM_HINT
        if self._target_error is None and self._problem_error is None:
            try:
                shape = self.workload.parse_shape(self.shape())
            except TunelabError as exc:
                self._problem_error = str(exc)
        if shape is not None and self._target is not None:
            self.space_editor.set_problem(
                self.workload,
                shape,
                self.dtype_combo.currentText(),
                self._target,
                self.space_kind_combo.currentData(),
            )
        else:
            self._update_state()

    def _on_space_changed(self) -> None:
        size = self.space_editor.space_size()
        if size is not None:
            self._recommend(size)
        self._update_state()

    def _recommend(self, size: int) -> None:
        from tunelab.core.search.tuners.registry import recommend_tuner

        kind = self.space_kind_combo.currentData()
        recommended = recommend_tuner(kind, size)
        available = self._tuner_availability
        usable = (
            recommended
            if available.get(recommended) is None
            else next((t for t in FALLBACK_TUNERS if available.get(t) is None), recommended)
        )
        for i in range(self.tuner_combo.count()):
            name = self.tuner_combo.itemData(i)
            self.tuner_combo.setItemText(i, f"{name} (recommended)" if name == usable else name)
        article = "an" if kind == "auto" else "a"
        if usable == recommended:
            self.tuner_hint.setText(
                f"Recommended for {article} {kind} space of {size:,} configs: {recommended}."
            )
        else:
            self.tuner_hint.setText(
                f"{recommended} suits {article} {kind} space of {size:,} configs but is not available "
                f"here ({available[recommended]}); {usable} is the next best."
            )
        if not self._tuner_chosen:
            self.tuner_combo.setCurrentIndex(self.tuner_combo.findData(usable))

    def _offer_tuners(self) -> None:
        """Offer the tuners that drive the chosen space kind; the others are greyed, saying why (the
        Optuna samplers search a template's knobs, an auto space has none). A chosen
        tuner the new kind cannot drive gives way to the first one that can."""
        from tunelab.core.search.tuners.registry import tuner_description, tuner_space_kinds

        kind = self.space_kind_combo.currentData()
        for i in range(self.tuner_combo.count()):
            name = self.tuner_combo.itemData(i)
            why = self._tuner_availability.get(name)
            fits = kind in tuner_space_kinds(name)
            item = combo_item(self.tuner_combo, i)
            item.setEnabled(why is None and fits)
            if why is None:
                item.setToolTip(
                    tuner_description(name)
                    if fits
                    else f"{name} searches a template's knobs; an {kind} space has none"
                )
        if not combo_item(self.tuner_combo, self.tuner_combo.currentIndex()).isEnabled():
            first = next(
                i for i in range(self.tuner_combo.count()) if combo_item(self.tuner_combo, i).isEnabled()
            )
            self.tuner_combo.setCurrentIndex(first)

    def _on_tuner_chosen(self) -> None:
        self._tuner_chosen = True

    def _show_cost_model(self) -> None:
        """The cost-model choice is the xgb tuner's: offered while it is the strategy."""
        self.cost_model_combo.setEnabled(self.tuner_combo.currentData() == "xgb")

    def _tuner_options(self) -> dict[str, Any]:
        model = self.cost_model_combo.currentData()
        if self.tuner_combo.currentData() != "xgb" or model in (None, "xgb"):
            return {}  # the xgb tuner's own default model, or a tuner without one
        return {"model": model}

    def _update_state(self) -> None:
        problem = self._target_error or self._problem_error or self.target_options.check_error()
        self.problem_error.setText(problem or "")
        self.problem_error.setVisible(problem is not None)
        reason = problem or self.space_editor.error() or self.remote_options.error()
        waiting = (
            self._problem_timer.isActive()
            or self.space_editor.is_pending()
            or self.target_options.is_checking()
            or self.remote_options.is_querying()
            or self._server_query is not None
            or self._spec_check is not None
        )
        # still deriving the space or self-checking the target: not an error, but not ready either
        if reason is None and waiting:
            reason = ""
        self.error_label.setText(reason or "")
        self.error_label.setVisible(bool(reason))
        self.start_button.setEnabled(reason is None and self.space_editor.is_valid())
        # This machine's load says nothing about a remote device's: a remote session never cools down.
        remote = self.remote_options.is_remote
        self.measure_box.cooldown_spin.setEnabled(not remote)
        self.measure_box.cooldown_spin.setToolTip(
            "not used when measuring on an RPC tracker's servers: this machine's load says nothing "
            "about theirs"
            if remote
            else self.measure_box.cooldown_tip
        )
        self._update_summary()

    def _update_summary(self) -> None:
        size = self.space_editor.space_size()
        shape = format_shape(self.shape())
        wl = self.workload
        what = (
            "custom (no file)"
            if wl is None
            else (f"custom ({Path(self.custom_path or '').name})" if self.is_custom else wl.name)
        )
        parts = [
            f"{what} {shape} {self.dtype_combo.currentText()}",
            self._target.description if self._target else "no target",
            f"{self.space_kind_combo.currentData()} space" + (f" of {size:,}" if size else ""),
            f"{self.tuner_combo.currentData()}",
            f"{self.trials_spin.value()} trials in batches of {self.batch_spin.value()}",
            self.remote_options.describe(),
        ]
        self.summary.setText(" · ".join(parts))

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
            and tuner_availability().get(tuner, "missing") is None
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

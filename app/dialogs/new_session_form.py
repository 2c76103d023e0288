"""The New-session dialog's form: the workload (a catalog one or a custom TE file), its shape, preset and
dtype, the problem checked and the space derived once typing pauses, and what stops Start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from tunelab.app.dialogs.measure_options import EarlyStopRow, MeasureOptionsBox
from tunelab.app.dialogs.new_session_target import CHECKING_TARGET
from tunelab.app.dialogs.new_session_tuners import TunerChoice
from tunelab.app.dialogs.space_derive import Problem
from tunelab.app.dialogs.space_editor import SpaceEditor
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionSpec
from tunelab.core.workloads.shape_text import format_shape

CUSTOM = "custom"  # tunelab.core.workloads.catalog.CUSTOM_NAME: the workload list's "Custom TE file…" entry
CUSTOM_DIR_KEY = "new_session/custom_dir"  # the folder the file dialog last picked a custom file in
CUSTOM_FILE_KEY = "new_session/custom_file"  # the last custom file that loaded
CUSTOM_FILTER = "Python files (*.py);;All files (*)"
CUSTOM_HINT = (
    "Choose a Python file that defines PARAMS, compute() and reference() "
    "(the format of `tunelab tune custom --custom FILE`)."
)
SHAPE_MAX = 1 << 20


def load_custom(source: str, name: str) -> tuple[Any, str | None, str]:
    """(the workload ``source`` defines or None, why it does not load or None, the source): the file is
    run in a child process first, then built here. In a worker; never raises."""
    from tunelab.core.usecases.listing import load_custom_workload

    try:
        return load_custom_workload(source), None, source
    except TunelabError as exc:
        return None, f"{name} does not load: {str(exc).removeprefix(CUSTOM + ': ')}", source
    except Exception as exc:  # noqa: BLE001 - whatever the person's file does is a message, not a crash
        return None, f"{name} does not load: {type(exc).__name__}: {exc}", source


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


class NewSessionForm(TunerChoice):
    """The form's state and slots (NewSessionDialog builds the widgets declared here)."""

    _settings: QSettings | None
    _workloads: dict[str, Any]
    _shape_spins: dict[str, QSpinBox]
    _problem_error: str | None  # what is wrong with the workload or its shape
    _problem_timer: QTimer
    _problem_form: QFormLayout
    _spec_check: CallWorker | None  # Start's check of the spec, in a thread
    # The custom workload: the one loaded from custom_path (None: no file yet, or it did not load).
    _custom: Any
    _custom_source: str | None
    _custom_error: str | None
    _custom_loader: CallWorker | None  # loading the custom file, until it has
    custom_path: str | None
    _catalog_index: int  # the last catalog workload shown (picking no custom file goes back to it)
    workload_combo: QComboBox
    workload_doc: QLabel
    custom_row: QWidget
    custom_path_edit: QLineEdit
    preset_combo: QComboBox
    shape_box: QGroupBox
    shape_form: QFormLayout
    dtype_combo: QComboBox
    problem_error: QLabel
    space_editor: SpaceEditor
    trials_spin: QSpinBox
    batch_spin: QSpinBox
    early_stop: EarlyStopRow
    seed_spin: QSpinBox
    name_edit: QLineEdit
    measure_box: MeasureOptionsBox
    summary: QLabel
    error_label: QLabel
    start_button: QPushButton

    def _on_target_edited(self) -> None:
        # cheap: a target known to be refused is marked, and Start disabled, at once; one not resolved yet
        # is asked of a worker ("Checking the target…" until it answers)
        self._check_target()
        self._schedule_problem()  # the space follows the target once typing pauses
        self._update_state()

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

    def load_custom_file(self, path: str, *, check_now: bool = True) -> None:
        """Load and check the custom workload file at `path` in a worker (it is run in a child process
        first, then built: seconds), then show it (the workload list goes to "Custom TE file…"); its
        error is shown if it does not load, and Start stays disabled until it has. `check_now` derives
        the space at once (no typing debounce: picking a file is one action)."""
        self.custom_path = str(path)
        self._custom = self._custom_source = self._custom_error = None
        self._custom_loader = None
        try:
            source = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self._custom_error = f"Cannot read {path}: {why}"
            self._show_custom(check_now)
            return
        worker = CallWorker(None, load_custom, source, Path(path).name)
        worker.succeeded.connect(self._on_custom_loaded)  # a bound method: a closed dialog is not called back
        self._custom_loader = worker
        keep_alive(worker).start()
        self._show_custom(check_now)

    def custom_loading(self) -> bool:
        """Whether a custom workload file is being loaded (in a worker)."""
        return self._custom_loader is not None

    def _on_custom_loaded(self, loaded: tuple[Any, str | None, str]) -> None:
        if self.sender() is not self._custom_loader:
            return  # a file since replaced by another
        self._custom_loader = None
        self._custom, self._custom_error, source = loaded
        self._custom_source = source if self._custom is not None else None
        if self._custom is not None and self._settings is not None:
            self._settings.setValue(CUSTOM_FILE_KEY, self.custom_path)
        self._show_custom(True)  # what the dialog showed while the file loaded is out of date now

    def _show_custom(self, check_now: bool) -> None:
        """Show the custom file as it stands (loading, loaded or refused) as the chosen workload."""
        self.custom_path_edit.setText(self.custom_path or "")
        self.custom_path_edit.setToolTip(self.custom_path or "")
        index = self.workload_combo.findData(CUSTOM)
        if self.workload_combo.currentIndex() != index:
            self.workload_combo.blockSignals(True)
            self.workload_combo.setCurrentIndex(index)
            self.workload_combo.blockSignals(False)
        self._show_workload()
        if check_now:
            self._on_problem_changed()

    # ---- slots ---------------------------------------------------------------------------------
    def _on_workload_changed(self) -> None:
        if (
            self.is_custom
            and self._custom is None
            and self._custom_error is None
            and self._custom_loader is None
        ):
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

    def _on_problem_changed(self) -> None:
        self._problem_timer.stop()
        self._problem_error = None
        self._check_target()
        self._show_detected()
        shape = None
        if self._target_error is None and self.workload is None:
            loading = self._custom_loader is not None
            self._problem_error = (
                f"Loading {Path(self.custom_path or '').name}…"
                if loading
                else self._custom_error or CUSTOM_HINT
            )
        if self._target_error is None and self._problem_error is None:
            try:
                shape = self.workload.parse_shape(self.shape())
            except TunelabError as exc:
                self._problem_error = str(exc)
        if shape is not None and self._target is not None:
            problem = Problem(self.workload, dict(shape), self.dtype_combo.currentText(), self._target)
            self.space_editor.set_problem(problem, self.space_kind_combo.currentData())
        else:
            self._update_state()

    def _on_space_changed(self) -> None:
        size = self.space_editor.space_size()
        if size is not None:
            self._recommend(size)
        self._update_state()

    def _update_state(self) -> None:
        pending = CHECKING_TARGET if self._target_pending else None  # a worker resolves it: Start waits
        problem = self._target_error or pending or self._problem_error or self.target_options.check_error()
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

"""The New-session dialog's "Custom TE file…" workload: a person's own TE file picked with a file dialog,
loaded and checked at once, shown like a catalog workload and tuned for real (LLVM) from Start to a
finished session; a broken file is one message and Start stays disabled. Only the file dialog's
getOpenFileName is replaced (it would wait for a person)."""

from __future__ import annotations

import textwrap

import pytest
from dialog_ready import settled, small_random_budget
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QFileDialog

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.app.dialogs.new_session_form import CUSTOM_DIR_KEY, CUSTOM_FILE_KEY
from tunelab.app.main_window import MainWindow
from tunelab.core.workloads.custom import EXAMPLE_SOURCE

TUNE_TIMEOUT_MS = 180_000

# tunelab.core.workloads.custom's own example, made small, with two dtypes, a title and a preset
ROW_SUM = EXAMPLE_SOURCE.replace(
    'PARAMS = {"M": 256, "N": 256}\nDTYPES = ["float32"]\n',
    'PARAMS = {"M": 32, "N": 32}\nDTYPES = ["float32", "float64"]\n'
    'TITLE = "Row sum of squares"\nPRESETS = {"tall": {"M": 64, "N": 16}}\n',
)
assert ROW_SUM != EXAMPLE_SOURCE

BROKEN = textwrap.dedent("""\
    PARAMS = {"M": 32, "N": 32}

    def compute(M, N, dtype)
        return []
""")


@pytest.fixture
def pick(monkeypatch):
    """Make the file dialog 'choose' the path in pick.path (None: the person cancels); record its calls."""

    class Picker:
        path: str | None = None
        calls: list[tuple] = []

    picker = Picker()
    picker.calls = []

    def get_open_file_name(parent, caption="", folder="", filters="", *args, **kwargs):
        picker.calls.append((parent, caption, folder, filters))
        return (picker.path or "", "")

    monkeypatch.setattr(QFileDialog, "getOpenFileName", get_open_file_name)
    return picker


def loaded(qtbot, dialog: NewSessionDialog) -> NewSessionDialog:
    """``dialog`` once its custom file has loaded (in a worker: the file runs in a child process first)."""
    qtbot.waitUntil(lambda: not dialog.custom_loading(), timeout=120_000)
    return dialog


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    return settled(qtbot, loaded(qtbot, dialog))


@pytest.mark.slow  # a real session: 15 s
def test_custom_file_runs_a_real_session_from_start_to_finish(qtbot, store_copy, settings, tmp_path, pick):
    folder = tmp_path / "my ops"
    folder.mkdir()
    path = folder / "row_sum.py"
    path.write_text(ROW_SUM)
    pick.path = str(path)
    window = MainWindow(store_copy, settings, poll_ms=100, probe_target=False)
    qtbot.addWidget(window)
    window.show()
    before = {r.id for r in store_copy.sessions()}
    seen: dict = {}
    errors: list[BaseException] = []

    def fill_and_start() -> None:
        dialog = QApplication.activeModalWidget()
        try:
            assert isinstance(dialog, NewSessionDialog)
            combo = dialog.workload_combo
            combo.setCurrentIndex(combo.findData("custom"))  # opens the file dialog, loads the file
            assert len(pick.calls) == 1
            loaded(qtbot, dialog)
            assert dialog.is_custom and dialog.workload is not None and dialog.workload.name == "custom"
            assert dialog.custom_path_edit.text() == str(path) and dialog.custom_row.isVisible()
            assert "Row sum of squares" in dialog.workload_doc.text()
            # its parameters, presets and dtypes, as for a catalog workload
            assert dialog.shape() == {"M": 32, "N": 32}
            assert [dialog.dtype_combo.itemText(i) for i in range(dialog.dtype_combo.count())] == [
                "float32",
                "float64",
            ]
            dialog.preset_combo.setCurrentIndex(dialog.preset_combo.findData("tall"))
            assert dialog.shape() == {"M": 64, "N": 16}
            dialog._shape_spins["M"].setValue(32)
            dialog._shape_spins["N"].setValue(32)
            dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
            dialog._on_problem_changed()  # skip the typing debounce
            assert dialog.problem_error.isHidden(), dialog.problem_error.text()
            assert (
                settled(qtbot, dialog).space_editor.is_valid() and (dialog.space_editor.space_size() or 0) > 1
            )
            assert "(recommended)" in dialog.tuner_combo.currentText()
            assert "custom (row_sum.py) M=32,N=32 float32" in dialog.summary.text()
            small_random_budget(dialog, trials=4, batch=4)
            assert settled(qtbot, dialog).can_start()
            seen["spec"] = dialog.spec()
            dialog.start_button.click()
        except BaseException as exc:  # noqa: BLE001 - never leave the modal dialog open: fail after exec() returns
            errors.append(exc)
            if isinstance(dialog, NewSessionDialog):
                dialog.reject()

    QTimer.singleShot(0, fill_and_start)
    window.new_action.trigger()  # opens the modal dialog; the timer above fills it and clicks Start
    if errors:
        raise errors[0]
    spec = seen["spec"]
    assert spec.workload == "custom" and spec.custom_source == ROW_SUM and spec.shape == {"M": 32, "N": 32}
    assert window.worker is not None
    qtbot.waitUntil(lambda: window.worker is None, timeout=TUNE_TIMEOUT_MS)

    (new_id,) = {r.id for r in store_copy.sessions()} - before
    record = store_copy.session(new_id)
    assert record.status == "finished", record.status
    assert record.workload == "custom" and record.custom_source == ROW_SUM
    assert record.shape == {"M": 32, "N": 32} and record.dtype == "float32" and record.target_kind == "llvm"
    assert record.space_kind == "template" and record.n_trials == 4
    trials = store_copy.trials(new_id)
    assert len(trials) == 4 and any(t.ok for t in trials), [t.error for t in trials]
    assert window.message_bar.level == "info", window.message_bar.text
    # remembered: the folder for the next file dialog, and the file itself for the next dialog
    assert settings.value(CUSTOM_DIR_KEY) == str(folder)
    assert settings.value(CUSTOM_FILE_KEY) == str(path)
    again = _dialog(qtbot, settings)
    assert again.is_custom and again.workload is not None and again.custom_path == str(path)
    assert again.shape() == {"M": 32, "N": 32} and settled(qtbot, again).can_start()
    pick.path = None  # choosing again but cancelling keeps the loaded file
    again.custom_button.click()
    assert pick.calls[-1][2] == str(folder)  # the file dialog opens in the remembered folder
    assert again.is_custom and again.custom_path == str(path)


def test_broken_custom_file_is_one_message_and_start_stays_disabled(
    qtbot, store_copy, settings, tmp_path, pick
):
    before = [r.id for r in store_copy.sessions()]
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    pick.path = str(broken)
    dialog = _dialog(qtbot, settings)
    assert settled(qtbot, dialog).can_start()  # the catalog default
    dialog.workload_combo.setCurrentIndex(dialog.workload_combo.findData("custom"))
    assert dialog.is_custom and dialog.workload is None
    assert dialog.problem_error.text() == "Loading broken.py…" and not dialog.can_start()
    loaded(qtbot, dialog)
    assert dialog.workload is None
    message = dialog.problem_error.text()
    assert message.startswith("broken.py does not load: syntax error on line 3"), message
    assert not dialog.problem_error.isHidden()
    assert dialog.error_label.text() == message
    assert not dialog.can_start()
    assert dialog.shape() == {}  # no parameters to show
    dialog.start_button.click()
    assert dialog.result() != dialog.DialogCode.Accepted
    assert settings.value(CUSTOM_FILE_KEY) is None  # a file that does not load is not remembered

    # a file that is not there either
    dialog.load_custom_file(str(tmp_path / "gone.py"))
    assert dialog.problem_error.text().startswith(f"Cannot read {tmp_path / 'gone.py'}")
    assert not dialog.can_start()

    # picking a good one (with the button) makes it startable; back to a catalog workload works too
    good = tmp_path / "good.py"
    good.write_text(ROW_SUM)
    pick.path = str(good)
    dialog.custom_button.click()
    loaded(qtbot, dialog)
    assert dialog.workload is not None and dialog.problem_error.isHidden()
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    dialog._on_problem_changed()
    assert settled(qtbot, dialog).can_start()
    dialog.workload_combo.setCurrentIndex(dialog.workload_combo.findData("gemm"))
    dialog._on_problem_changed()
    assert not dialog.is_custom and "M" in dialog.shape() and settled(qtbot, dialog).can_start()
    assert dialog.spec().custom_source is None
    assert [r.id for r in store_copy.sessions()] == before  # the dialog stores nothing


def test_cancelling_the_file_dialog_goes_back_to_the_catalog_workload(qtbot, settings, pick):
    dialog = _dialog(qtbot, settings)
    first = dialog.workload_combo.currentData()
    pick.path = None
    dialog.workload_combo.setCurrentIndex(dialog.workload_combo.findData("custom"))
    assert len(pick.calls) == 1
    assert dialog.workload_combo.currentData() == first and not dialog.is_custom
    assert dialog.custom_row.isHidden()
    dialog._on_problem_changed()
    assert settled(qtbot, dialog).can_start()

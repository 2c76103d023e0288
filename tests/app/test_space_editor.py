"""The New-session dialog and its search-space editor: defaults, recommendation, live validation."""

from __future__ import annotations

from tunelab.app.dialogs.new_session import NewSessionDialog


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    return dialog


def _set_shape(dialog: NewSessionDialog, **shape: int) -> None:
    for name, value in shape.items():
        dialog._shape_spins[name].setValue(value)
    dialog._on_problem_changed()  # skip the typing debounce


def test_defaults_can_start_and_recommend_a_tuner(qtbot, settings):
    from tunelab.core.search.tuners.registry import recommend_tuner

    dialog = _dialog(qtbot, settings)
    assert dialog.can_start()
    size = dialog.space_editor.size()
    assert size and size > 1
    assert dialog.tuner_combo.currentData() == recommend_tuner("template", size)
    assert "(recommended)" in dialog.tuner_combo.currentText()
    assert dialog.target_label.text().startswith(("CPU", "CUDA"))
    spec = dialog.spec()
    assert spec.workload == "gemm" and spec.space["kind"] == "template"


def test_presets_fill_the_shape(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    dialog.preset_combo.setCurrentIndex(dialog.preset_combo.findData("square-128"))
    assert dialog.shape() == {"M": 128, "N": 128, "K": 128}
    dialog._shape_spins["M"].setValue(96)
    assert dialog.preset_combo.currentData() is None  # "(custom)"


def test_invalid_tile_factor_is_marked_and_blocks_start(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    _set_shape(dialog, M=32, N=32, K=32)
    editor = dialog.space_editor
    assert dialog.can_start()
    size_before = editor.size()

    edit = editor.knob_edit("tile_i")
    qtbot.keyClicks(edit, "x")  # typing garbage: at once not JSON
    assert edit.property("invalid") is True
    assert "not JSON" in editor.knob_reason("tile_i").text()
    assert not dialog.can_start()

    edit.setText("[[3], [4]]")  # 3 does not divide 32
    assert edit.property("invalid") is True
    reason = editor.knob_reason("tile_i")
    assert not reason.isHidden() and "do not divide axis i" in reason.text()
    assert editor.size_label.text() == "Space size: —"
    assert not dialog.can_start()
    assert "do not divide" in dialog.error_label.text()

    edit.setText("[[2], [4]]")  # fixed
    assert edit.property("invalid") is False
    assert reason.isHidden()
    assert dialog.can_start()
    assert editor.size() == size_before // 6 * 2  # tile_i had 6 candidates, now 2
    assert f"{editor.size():,}" in editor.size_label.text()


def test_auto_space_rules_validate_and_size(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    _set_shape(dialog, M=32, N=32, K=32)
    dialog.space_kind_combo.setCurrentIndex(dialog.space_kind_combo.findData("auto"))
    editor = dialog.space_editor
    qtbot.waitUntil(lambda: editor.size() is not None, timeout=5000)
    assert dialog.can_start()
    full = editor.size()
    # packing's default is "auto", and the editor says what it resolved to for this shape
    assert editor.rule_row("MultiLevelTiling").params["pack_inputs"].text() == '"auto"'
    assert "pack_inputs auto: off (the least reused input's elements are used 32 times < 256)" in (
        editor.size_label.text()
    )
    packing = editor.rule_row("MultiLevelTiling").params["pack_inputs"]
    packing.setText("true")
    qtbot.waitUntil(lambda: editor.size() is not None, timeout=5000)
    assert "pack_inputs true (set)" in editor.size_label.text()
    packing.setText('"sometimes"')
    assert 'must be true, false or "auto"' in editor.rule_row("MultiLevelTiling").reason.text()
    assert not dialog.can_start()
    packing.setText('"auto"')
    qtbot.waitUntil(lambda: editor.size() is not None, timeout=5000)
    assert editor.size() == full

    edit = editor.rule_row("MultiLevelTiling").params["max_innermost_factor"]
    edit.setText("0")  # out of range
    assert "max_innermost_factor" in editor.rule_row("MultiLevelTiling").reason.text()
    assert not dialog.can_start()
    edit.setText("16")
    qtbot.waitUntil(lambda: editor.size() is not None, timeout=5000)
    assert dialog.can_start()
    assert editor.size() < full  # fewer innermost tile choices

    for rule in (
        "AutoInline",
        "AddRFactor",
        "MultiLevelTiling",
        "ParallelizeVectorizeUnroll",
        "RandomComputeLocation",
    ):
        editor.rule_row(rule).enabled.setChecked(False)
    assert "enable at least one" in (editor.error() or "")
    assert not dialog.can_start()


def test_last_options_are_remembered(qtbot, settings):
    first = _dialog(qtbot, settings)
    _set_shape(first, M=64, N=32, K=16)
    first.trials_spin.setValue(12)
    first.repeat_spin.setValue(5)
    first.tuner_combo.setCurrentIndex(first.tuner_combo.findData("random"))
    first._on_tuner_chosen()
    first.start_button.click()
    qtbot.waitUntil(
        lambda: first.result() == first.DialogCode.Accepted, timeout=60_000
    )  # checked in a worker
    second = _dialog(qtbot, settings)
    assert second.shape() == {"M": 64, "N": 32, "K": 16}
    assert second.trials_spin.value() == 12
    assert second.repeat_spin.value() == 5
    assert second.tuner_combo.currentData() == "random"


def test_confirmation_is_on_by_default_and_can_be_turned_off(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    assert dialog.confirm_spin.value() == 3 and dialog.spec().measure.confirm_runs == 3
    dialog.confirm_spin.setValue(0)
    assert dialog.confirm_spin.text() == "off" and dialog.spec().measure.confirm_runs == 0

"""The New-session dialog and its search-space editor: defaults, recommendation, live validation."""

from __future__ import annotations

from dialog_ready import SPACE_WAIT_MS, choose_random, settled, start_accepted

from tunelab.app.dialogs.new_session import NewSessionDialog


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    return settled(qtbot, dialog)


def _set_shape(qtbot, dialog: NewSessionDialog, **shape: int) -> None:
    for name, value in shape.items():
        dialog._shape_spins[name].setValue(value)
    dialog._on_problem_changed()  # skip the typing debounce
    settled(qtbot, dialog)


def test_defaults_can_start_and_recommend_a_tuner(qtbot, settings):
    from tunelab.core.search.tuners.registry import recommend_tuner

    dialog = _dialog(qtbot, settings)
    assert settled(qtbot, dialog).can_start()
    size = dialog.space_editor.space_size()
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
    _set_shape(qtbot, dialog, M=32, N=32, K=32)
    editor = dialog.space_editor
    assert settled(qtbot, dialog).can_start()
    size_before = editor.space_size()

    edit = editor.knob_edit("tile_i")
    qtbot.keyClicks(edit, "x")  # typing garbage: at once not JSON
    assert edit.property("invalid") is True
    assert "not JSON" in editor.knob_reason("tile_i").text()
    assert not dialog.can_start()

    edit.setText("[[3], [4]]")  # 3 does not divide 32
    settled(qtbot, dialog)  # the core checks the knobs in a worker
    assert edit.property("invalid") is True
    reason = editor.knob_reason("tile_i")
    assert not reason.isHidden() and "do not divide axis i" in reason.text()
    assert editor.size_label.text() == "Space size: —"
    assert not dialog.can_start()
    assert "do not divide" in dialog.error_label.text()

    edit.setText("[[2], [4]]")  # fixed
    settled(qtbot, dialog)
    assert edit.property("invalid") is False
    assert reason.isHidden()
    assert settled(qtbot, dialog).can_start()
    assert editor.space_size() == size_before // 6 * 2  # tile_i had 6 candidates, now 2
    assert f"{editor.space_size():,}" in editor.size_label.text()


def test_auto_space_rules_validate_and_size(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    _set_shape(qtbot, dialog, M=32, N=32, K=32)
    dialog.space_kind_combo.setCurrentIndex(dialog.space_kind_combo.findData("auto"))
    editor = dialog.space_editor
    qtbot.waitUntil(lambda: editor.space_size() is not None, timeout=SPACE_WAIT_MS)
    assert settled(qtbot, dialog).can_start()
    full = editor.space_size()
    # packing's default is "auto", and the editor says what it resolved to for this shape
    assert editor.rule_row("MultiLevelTiling").params["pack_inputs"].text() == '"auto"'
    assert "pack_inputs auto: off (the least reused input's elements are used 32 times < 256)" in (
        editor.size_label.text()
    )
    packing = editor.rule_row("MultiLevelTiling").params["pack_inputs"]
    packing.setText("true")
    qtbot.waitUntil(lambda: editor.space_size() is not None, timeout=SPACE_WAIT_MS)
    assert "pack_inputs true (set)" in editor.size_label.text()
    packing.setText('"sometimes"')
    settled(qtbot, dialog)
    assert 'must be true, false or "auto"' in editor.rule_row("MultiLevelTiling").reason.text()
    assert not dialog.can_start()
    packing.setText('"auto"')
    qtbot.waitUntil(lambda: editor.space_size() is not None, timeout=SPACE_WAIT_MS)
    assert editor.space_size() == full

    edit = editor.rule_row("MultiLevelTiling").params["max_innermost_factor"]
    edit.setText("0")  # out of range
    settled(qtbot, dialog)
    assert "max_innermost_factor" in editor.rule_row("MultiLevelTiling").reason.text()
    assert not dialog.can_start()
    edit.setText("16")
    qtbot.waitUntil(lambda: editor.space_size() is not None, timeout=SPACE_WAIT_MS)
    assert settled(qtbot, dialog).can_start()
    assert editor.space_size() < full  # fewer innermost tile choices

    for rule in (
        "AutoInline",
        "AddRFactor",
        "MultiLevelTiling",
        "ParallelizeVectorizeUnroll",
        "RandomComputeLocation",
    ):
        editor.rule_row(rule).enabled.setChecked(False)
    settled(qtbot, dialog)
    assert "enable at least one" in (editor.error() or "")
    assert not dialog.can_start()


def test_last_options_are_remembered(qtbot, settings):
    first = _dialog(qtbot, settings)
    _set_shape(qtbot, first, M=64, N=32, K=16)
    first.trials_spin.setValue(12)
    first.repeat_spin.setValue(5)
    choose_random(first)
    start_accepted(qtbot, first)
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


def test_spaces_are_derived_off_the_gui_thread(qtbot, settings, monkeypatch):
    """Deriving a space is TVM's work (a template's axes, an auto space's sketches): the editor does it in
    a worker thread, and the GUI thread only draws (issue 27). Each derivation records the thread it ran
    on; none may be the GUI thread's."""
    import threading

    from tunelab.core.search.space.auto import AutoSpace
    from tunelab.core.search.space.template import TemplateSpace

    threads: dict[str, list[threading.Thread]] = {"template": [], "auto": []}
    for kind, cls in (("template", TemplateSpace), ("auto", AutoSpace)):
        real = cls.__init__

        def recording(self, *args, _real=real, _kind=kind, **kwargs):
            threads[_kind].append(threading.current_thread())
            _real(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", recording)
    dialog = _dialog(qtbot, settings)
    _set_shape(qtbot, dialog, M=32, N=32, K=32)
    dialog.space_kind_combo.setCurrentIndex(dialog.space_kind_combo.findData("auto"))
    qtbot.waitUntil(lambda: dialog.space_editor.space_size() is not None, timeout=SPACE_WAIT_MS)
    assert settled(qtbot, dialog).can_start()
    assert threads["template"] and threads["auto"], threads
    gui = threading.main_thread()
    assert all(t is not gui for t in threads["template"] + threads["auto"]), threads


def test_a_stale_derivation_is_dropped(qtbot, settings):
    """A space derived for a shape since changed never shows: only the latest problem's size stands."""
    import math

    from tunelab.app.dialogs.space_editor import Problem, derive_defaults

    dialog = _dialog(qtbot, settings)
    editor = dialog.space_editor

    def size_for(m: int) -> int:
        shape = dialog.workload.parse_shape({**dialog.shape(), "M": m})
        problem = Problem(dialog.workload, shape, dialog.dtype_combo.currentText(), dialog._target)
        derived = derive_defaults(0, problem, "template")
        assert derived.defaults is not None, derived.error
        return math.prod(len(k["candidates"]) for k in derived.defaults["knobs"])

    for m in (16, 32, 64):  # three problems in a row, each superseding the last before it is derived
        dialog._shape_spins["M"].setValue(m)
        dialog._on_problem_changed()
    settled(qtbot, dialog)
    assert size_for(16) != size_for(64) and editor.space_size() == size_for(64)

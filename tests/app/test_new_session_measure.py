"""The New-session dialog offers every measurement option `tunelab tune` has (issue 10), remembers
them, and its early-stop row follows the trial budget."""

from __future__ import annotations

from dataclasses import fields

from dialog_ready import choose_random, settled, start_accepted

from tests.core.specs import CHANGED_MEASURE
from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.app.dialogs.remote_options import REMOTE_FIELDS
from tunelab.core.cli.parser import _parser
from tunelab.core.records import MeasureOptions


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    return settled(qtbot, dialog)


def test_every_cli_measurement_option_is_in_the_dialog_and_remembered(qtbot, settings):
    # Where it measures (the RPC tracker's fields) has a box of its own: test_new_session_remote.py.
    assert set(CHANGED_MEASURE) == {f.name for f in fields(MeasureOptions)} - set(REMOTE_FIELDS)
    # the CLI sets each of them (tunelab.core.cli.tuning builds MeasureOptions from these flags)
    tune = next(
        a for a in _parser()._subparsers._group_actions[0].choices.values() if a.prog.endswith("tune")
    )
    flags = {o for action in tune._actions for o in action.option_strings}
    assert {
        "--target-cv",
        "--max-repeat",
        "--leader-band",
        "--cooldown",
        "--confirm-runs",
        "--confirm-top",
        "--confirm-max-s",
        "--l2-flush",
        "--lock-clocks",
    } <= flags

    dialog = _dialog(qtbot, settings)
    assert dialog.spec().measure == MeasureOptions()  # the dialog's defaults are the CLI's
    dialog.measure_box.set_options(CHANGED_MEASURE)
    assert dialog.spec().measure == MeasureOptions(**CHANGED_MEASURE)
    box = dialog.measure_box
    assert box.target_cv_spin.text() == "2.0 %" and box.cooldown_spin.text() == "1.5 s"
    box.confirm_spin.setValue(0)
    assert not box.confirm_top_spin.isEnabled() and not box.confirm_cap_spin.isEnabled()
    box.confirm_spin.setValue(4)
    choose_random(dialog)
    start_accepted(qtbot, dialog)
    assert _dialog(qtbot, settings).spec().measure == MeasureOptions(**CHANGED_MEASURE)


def test_the_early_stop_hint_follows_the_trial_count(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    dialog.trials_spin.setValue(200)
    assert dialog.early_stop.hint.text() == "Off: all 200 trials are measured."
    dialog.early_check.setChecked(True)
    assert dialog.early_spin.value() == 50  # a quarter of the budget until the person sets it
    assert "at most 200 trials" in dialog.early_stop.hint.text()
    dialog.trials_spin.setValue(40)
    assert dialog.early_spin.value() == 10 and dialog.early_spin.maximum() == 40
    assert "Stops once 10 trials in a row" in dialog.early_stop.hint.text()
    assert "at most 40 trials" in dialog.early_stop.hint.text()
    dialog.early_spin.setValue(30)  # set by the person: kept, only capped by the budget
    dialog.trials_spin.setValue(100)
    assert dialog.early_spin.value() == 30 and dialog.spec().early_stop == 30
    dialog.trials_spin.setValue(20)
    assert dialog.early_spin.value() == 20


def test_the_cost_model_is_a_choice_of_the_xgb_tuner_and_remembered(qtbot, settings):
    """Issue 13 part 1: every registered model can steer the xgb tuner from the dialog."""
    dialog = _dialog(qtbot, settings)
    models = [dialog.cost_model_combo.itemData(i) for i in range(dialog.cost_model_combo.count())]
    assert models == ["xgb", "mlp", "roofline", "hybrid"]
    dialog._set_combo(dialog.tuner_combo, "random")
    dialog._show_cost_model()
    assert not dialog.cost_model_combo.isEnabled() and dialog.spec().tuner_options == {}
    dialog._set_combo(dialog.tuner_combo, "xgb")
    dialog._tuner_chosen = True
    dialog._show_cost_model()
    dialog._set_combo(dialog.cost_model_combo, "hybrid")
    assert dialog.cost_model_combo.isEnabled()
    spec = dialog.spec()
    assert spec.tuner == "xgb" and spec.tuner_options == {"model": "hybrid"}
    dialog._save(spec)
    again = _dialog(qtbot, settings)
    assert again.cost_model_combo.currentData() == "hybrid" and again.spec().tuner_options == {
        "model": "hybrid"
    }


def test_a_fresh_dialog_starts_from_the_records_defaults(qtbot, settings):
    """Option defaults live once, in the records: the dialog's budget, batch and seed are those."""
    from tunelab.core.records import SPEC_DEFAULTS

    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    shown = (dialog.trials_spin.value(), dialog.batch_spin.value(), dialog.seed_spin.value())
    assert shown == (SPEC_DEFAULTS["trials"], SPEC_DEFAULTS["batch"], SPEC_DEFAULTS["seed"])
    spec = dialog.spec()
    assert (spec.trials, spec.batch, spec.seed) == shown
    assert spec.measure == MeasureOptions()


def test_the_tuning_page_fits_the_dialogs_width_and_scrolls_its_height(qtbot, settings):
    """At the dialog's smallest the tuning page's two columns keep their labels and fields whole: the page
    is never squeezed below its own minimum width (it was, clipping "Early stop" to "Early s") and never
    scrolls sideways; what does not fit in height scrolls."""
    from PySide6.QtWidgets import QLabel, QScrollArea

    dialog = _dialog(qtbot, settings)
    dialog.show()
    dialog.resize(dialog.minimumSize())
    dialog.tabs.setCurrentIndex(dialog.tabs.count() - 1)
    scroll = dialog.tabs.currentWidget()
    assert isinstance(scroll, QScrollArea)
    page = scroll.widget()
    qtbot.waitUntil(lambda: page.width() >= page.minimumSizeHint().width())
    assert scroll.horizontalScrollBar().maximum() == 0
    label = next(w for w in page.findChildren(QLabel) if w.text() == "Early stop")
    assert label.width() >= label.sizeHint().width()  # the whole word, as the other rows' labels
    assert dialog.trials_spin.isVisibleTo(page) and dialog.measure_box.isVisibleTo(page)


def test_the_summary_line_gets_the_height_its_wrapped_text_needs(qtbot, settings):
    """The summary under the tabs wraps at the dialog's width (workload, shape, target, space, tuner,
    budget, where: a custom file's name or a remote tracker makes it longer). Whatever it says, it is as
    tall as its text needs at its width, at the dialog's smallest and wider: no line of it is cut off."""
    from PySide6.QtCore import QMargins

    dialog = _dialog(qtbot, settings)
    dialog.show()
    summary = dialog.summary
    planted = " · ".join(["custom (a_workload_file_with_a_long_name.py) M=4096,N=4096,K=4096 float32"] * 4)
    for size in (dialog.minimumSize(), dialog.minimumSize().grownBy(QMargins(0, 0, 300, 0))):
        dialog.resize(size)
        summary.setText(planted)
        qtbot.waitUntil(lambda size=size: dialog.width() == size.width())
        line = summary.fontMetrics().lineSpacing()
        assert summary.heightForWidth(summary.width()) >= 2 * line  # the planted text wraps here
        qtbot.waitUntil(lambda: summary.height() >= summary.heightForWidth(summary.width()))

"""The New-session dialog's tuner list: every registered tuner, its one line, unavailable ones greyed."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.core.search.tuners.registry import tuner_description, tuner_names, tuner_unavailable


def test_every_tuner_is_listed_with_its_description(qtbot, settings):
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    combo = dialog.tuner_combo
    assert [combo.itemData(i) for i in range(combo.count())] == tuner_names()  # listed before they load
    qtbot.waitUntil(dialog.tuners_known, timeout=60_000)  # loaded in a worker: Optuna takes seconds
    assert [combo.itemData(i) for i in range(combo.count())] == tuner_names()
    for i, name in enumerate(tuner_names()):
        item = combo.model().item(i)
        why = tuner_unavailable(name)
        assert item.isEnabled() == (why is None)
        assert combo.itemData(i, Qt.ItemDataRole.ToolTipRole) == (why or tuner_description(name))
    assert "Optuna's TPE sampler" in combo.itemData(combo.findData("tpe"), Qt.ItemDataRole.ToolTipRole)


def test_an_auto_space_greys_the_tuners_that_search_template_knobs(qtbot, settings):
    """The Optuna samplers search a template's knobs: with an auto space they are
    greyed, saying why, and a chosen one gives way; back on a template space they are offered again."""
    from tunelab.core.search.tuners.registry import tuner_space_kinds

    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(dialog.tuners_known, timeout=60_000)
    combo, kinds = dialog.tuner_combo, dialog.space_kind_combo
    kinds.setCurrentIndex(kinds.findData("template"))
    combo.setCurrentIndex(combo.findData("tpe"))
    assert combo.currentData() == "tpe"
    kinds.setCurrentIndex(kinds.findData("auto"))
    template_only = [n for n in tuner_names() if tuner_space_kinds(n) == ("template",)]
    assert {"tpe", "cmaes"} <= set(template_only) and "rl" not in template_only
    for name in tuner_names():
        item = combo.model().item(combo.findData(name))
        assert item.isEnabled() == ("auto" in tuner_space_kinds(name) and tuner_unavailable(name) is None)
    tip = combo.itemData(combo.findData("tpe"), Qt.ItemDataRole.ToolTipRole)
    assert tip == "tpe searches a template's knobs; an auto space has none"
    assert combo.currentData() != "tpe" and combo.model().item(combo.currentIndex()).isEnabled()
    kinds.setCurrentIndex(kinds.findData("template"))
    assert combo.model().item(combo.findData("tpe")).isEnabled()
    assert combo.itemData(combo.findData("tpe"), Qt.ItemDataRole.ToolTipRole) == tuner_description("tpe")

"""The New-session dialog's tuner list: every registered tuner, its one line, unavailable ones greyed."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.core.search.tuners.registry import tuner_description, tuner_names, tuner_unavailable


def test_every_tuner_is_listed_with_its_description(qtbot, settings):
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    combo = dialog.tuner_combo
    assert [combo.itemData(i) for i in range(combo.count())] == tuner_names()
    for i, name in enumerate(tuner_names()):
        item = combo.model().item(i)
        why = tuner_unavailable(name)
        assert item.isEnabled() == (why is None)
        assert combo.itemData(i, Qt.ItemDataRole.ToolTipRole) == (why or tuner_description(name))
    assert "Optuna's TPE sampler" in combo.itemData(combo.findData("tpe"), Qt.ItemDataRole.ToolTipRole)

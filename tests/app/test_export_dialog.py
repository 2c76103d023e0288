"""The export dialog says what the schedule file will state before anything is built: the trial, its
confirmed figure and interval, whether it can be held to, and a placement-sensitive kernel with its
advice and the --robust choice (issue 15 part 3). A real confirmation on a real tuned store."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tunelab.app.dialogs.export_dialog import ExportDialog
from tunelab.core.export.pick import PlacementFigures, export_pick
from tunelab.core.trust.confirm import confirm_session

pytestmark = pytest.mark.slow


def test_the_dialog_states_the_pick_and_flags_placement(qtbot, store_copy, tmp_path):
    sid = store_copy.sessions()[-1].id
    confirm_session(store_copy, sid, top_k=2, runs=2, max_s=0)
    picks = {robust: export_pick(store_copy, sid, robust=robust) for robust in (False, True)}
    record = store_copy.session(sid)
    dialog = ExportDialog(record, None, str(tmp_path / "out"), picks=picks)
    qtbot.addWidget(dialog)
    default = picks[False]
    assert default.confirmation is not None and set(default.confirmation.layout_ms) == {
        "staggered",
        "aligned",
        "plain",
    }
    text = dialog.pick_label.text()
    # trials are named by their number within the session, from 1 (not their store id)
    assert default.trial.number == default.trial.index + 1
    assert text.startswith(f"The schedule file will state trial #{default.trial.number}: ")
    assert "confirmed in 2 fresh processes (95% interval " in text
    best_item = dialog.trial_combo.itemText(0)
    assert best_item.startswith(f"Best trial (#{default.trial.number}, ") and " confirmed" in best_item
    assert dialog.robust_check.isEnabled() and not dialog.robust()
    dialog.robust_check.setChecked(True)
    assert dialog.robust() and dialog.pick() is picks[True]
    assert f"trial #{picks[True].trial.number}: " in dialog.pick_label.text()
    assert "picked for its worst buffer placement" in dialog.pick_label.text()

    # a placement-sensitive pick (given figures): flagged, with the advice and the runner-up
    sensitive = replace(
        default,
        placement=PlacementFigures(
            "staggered",
            {"staggered": 1.0, "aligned": 1.3, "plain": 1.2},
            "aligned",
            1.3,
            runner_up=(7, 1.1),
            runner_up_number=3,
        ),
    )
    dialog = ExportDialog(record, None, str(tmp_path / "out"), picks={False: sensitive})
    qtbot.addWidget(dialog)
    text = dialog.pick_label.text()
    assert (
        "Placement-sensitive: 30% slower than the stated figure (1.3 ms) with every buffer at the same page"
        in text
    )
    assert "Align or pad the buffers" in text and "--robust: trial #3, 1.1 ms at worst" in text
    assert dialog.pick_label.property("role") == "warning"
    assert not dialog.robust_check.isEnabled()  # no robust pick was given

    # another trial chosen: nothing is stated for it here, and --robust does not apply
    other = next(t for t in store_copy.trials(sid) if t.ok and t.id != default.trial.id)
    dialog = ExportDialog(record, other, str(tmp_path / "out"), picks=picks)
    qtbot.addWidget(dialog)
    assert dialog.trial_id() == other.id and not dialog.pick_label.isVisibleTo(dialog)
    assert dialog.trial_combo.currentText().startswith(f"Selected trial (#{other.index + 1}, ")
    assert not dialog.robust_check.isEnabled() and not dialog.robust()

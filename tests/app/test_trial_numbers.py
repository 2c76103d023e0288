"""One trial numbering for people everywhere (issue 10): a trial is "#N", its number within its session
from 1, in Live, the Trials table and Validation, never the 0-based index or the store's global id.

The genetic session of the tuned store is its second: its trial ids (9..16) are not its numbers (1..8),
so a view that shows the id or the index fails here."""

from __future__ import annotations

import numpy as np

from tunelab.app.views.live_plot import LivePlot
from tunelab.app.views.trials.model import COLUMNS
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.app.views.validation.view import ValidationView
from tunelab.core.trust.confirm import confirm_session


def _second_session(store):
    record = next(r for r in store.sessions() if r.tuner == "genetic")
    trials = store.trials(record.id)
    assert trials[0].id > len(trials), "the test needs a session whose ids are not its numbers"
    return record, trials


def test_store_numbers_each_sessions_trials_from_one(store):
    record, trials = _second_session(store)
    assert [t.number for t in trials] == list(range(1, len(trials) + 1))
    columns = store.trial_columns(record.id)
    assert columns["number"].tolist() == [t.number for t in trials]
    best = store.best_trial(record.id)
    assert record.best_trial_number == best.number and record.best_trial_id == best.id
    assert store.trial_id_of(record.id, best.number) == best.id


def test_live_plot_places_and_names_trials_by_their_number(qtbot, store):
    record, trials = _second_session(store)
    view = LivePlot(store, redraw_ms=10)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    x, _ = view.ok_curve.getData()
    assert sorted(x.tolist()) == [float(t.number) for t in trials if t.ok]
    assert x.min() >= 1
    best = store.best_trial(record.id)
    assert f"at trial #{best.number}" in view.title.text()
    assert view.plot_item.getAxis("bottom").labelText == "Trial #"


def test_trials_table_shows_the_number_first_and_names_it_in_the_details(qtbot, store):
    record, trials = _second_session(store)
    view = TrialsTable(store)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    assert COLUMNS[0] == "#" and COLUMNS[1] == "ID"
    shown = [view.proxy.data(view.proxy.index(r, 0)) for r in range(view.proxy.rowCount())]
    assert sorted(int(n) for n in shown) == [t.number for t in trials]
    ids = [view.proxy.data(view.proxy.index(r, 1)) for r in range(view.proxy.rowCount())]
    assert sorted(int(i) for i in ids) == [t.id for t in trials]
    third = trials[2]
    view.select_trial(third.id)
    assert view.samples_text.toPlainText().startswith(
        f"trial #3 of session {record.id} (id {third.id}), round {third.round}"
    )


def test_validation_shows_a_stored_validation_and_a_fresh_header_whenever_it_is_shown(qtbot, store_copy):
    record, trials = _second_session(store_copy)
    view = ValidationView(store_copy)
    qtbot.addWidget(view)
    view.resize(1300, 800)
    view.show()
    view.set_session(record.id)
    assert view.verdict == "Not validated yet" and view.past_table.rowCount() == 0

    # the session's own confirmation is stored while the panel shows it: listed and shown at the next
    # update, with no click, and the header follows the store
    (report,) = confirm_session(store_copy, record.id, top_k=2, runs=1)
    view.session_updated(store_copy.session(record.id))
    assert view.past_table.rowCount() == 1
    assert view.verdict != "Not validated yet" and view.report is not None
    assert f"{record.n_trials} trials" in view.title.text()

    # shown again (Refresh, or another session and back) with row 0 still selected: shown again
    for _ in range(2):
        view.set_session(record.id)
        assert view.verdict != "Not validated yet", "a stored validation is listed: it is shown"
        assert view.past_table.selectedIndexes() and view.schedule_table.rowCount() == 2

    # each re-measured trial named by its number in the session, and one unit (ms) in words and tables
    numbers = {t.id: t.number for t in trials}
    labels = [view.schedule_table.item(r, 0).text() for r in range(view.schedule_table.rowCount())]
    assert labels == [f"trial #{numbers[s.trial_id]}" for s in report.schedules]
    words = " ".join((view.cause_label.text(), view.figures_label.text()))
    assert " us" not in words and "µs" not in words
    assert "ms" in words or not np.isfinite(report.schedules[0].remeasured_ms or np.nan)

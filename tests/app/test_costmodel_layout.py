"""The cost-model view read by a performance engineer (issue 10): one sign convention, in words, in the
header and the bias table; titles that fit their panels; the rank plot with its scale; an empty plot
that says why it is empty."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication
from showing import on_screen

from tests.core.stores import add_session
from tunelab.app.views.bias_table import off_by, ratio_words
from tunelab.app.views.costmodel_view import CostModelView


def test_ratio_words_say_the_sign():
    assert ratio_words(1 / 1.06) == "1.06× too fast"  # predicted below measured: guessed too fast
    assert ratio_words(1.5) == "1.50× too slow"
    assert ratio_words(1.0) == "exact" and ratio_words(None) == "—"


def test_header_and_table_say_the_bias_alike_and_the_panels_read(qtbot, store):
    record = store.sessions()[-1]
    view = on_screen(qtbot, CostModelView(store, redraw_ms=10, bias_ms=10), record.id, size=(1280, 800))
    qtbot.waitUntil(lambda: not view.bias_running and view.bias.report is not None, timeout=60_000)
    assert view.n_pairs > 0
    overall = next(g for g in view.bias.groups() if g.dimension == "all")
    header = view.summary.text()
    assert f"the model guesses {off_by(overall)} on average" in header
    assert "bias (median error)" not in header and "%+" not in header
    QApplication.processEvents()
    for plot in (view.scatter_plot, view.residual_plot, view.rank_plot):
        assert plot.titleLabel.boundingRect().width() <= plot.width(), plot.titleLabel.text
    ticks = view.rank_plot.getAxis("left")._tickLevels  # fixed: the panel is short
    assert [v for v, _ in ticks[0]] == [-1, -0.5, 0, 0.5, 1]
    for plot in (view.residual_plot, view.rank_plot):  # tall enough for more than one tick ("0")
        assert plot.getAxis("left").geometry().height() >= 120, plot.titleLabel.text
    assert view.rank_note.text == "" and view.scatter_note.text == ""
    x, _ = view.residuals.getData()
    assert x.min() >= 1  # trials by their number in the session


def test_an_empty_cost_model_view_says_why(qtbot, store_copy):
    session_id = add_session(store_copy)
    view = on_screen(qtbot, CostModelView(store_copy, redraw_ms=10, bias_ms=10), session_id)
    assert view.scatter_note.text == "No predictions yet" and view.residual_note.text == "No predictions yet"
    assert view.rank_note.text.startswith("No rank correlation yet")
    view.set_session(None)
    assert view.scatter_note.text == "No session selected."
    qtbot.waitUntil(lambda: not view.bias_running, timeout=60_000)

"""Plots that keep to what a person asked (issue 25, item 6): each session's plots start fresh, a plain
wheel changes no range (Ctrl+wheel zooms), "Reset view" and a double-click show everything again, the
Hardware panels never go to negative time (test_hardware_zoom.py), and the GFLOP/s axis starts at 0 with the
header's figure on it (test_live_stated_line.py)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from showing import on_screen

from tests.app.plot_events import double_click, ranges, sessions, wheel
from tunelab.app.views.live_plot import LivePlot


def test_live_plot_zooms_with_ctrl_only_resets_and_starts_fresh_per_session(qtbot, store):
    first, second = sessions(store)[:2]
    view = on_screen(qtbot, LivePlot(store, redraw_ms=10), size=(1200, 700))
    qtbot.waitExposed(view)
    view.set_session(first.id)
    box, widget = view.plot_item.vb, view.plot_widget
    qtbot.wait(50)
    whole = ranges(box)
    assert whole[0][0] <= 1 and whole[0][1] >= first.n_trials  # every trial in view

    wheel(widget, box, clicks=5)
    assert ranges(box) == whole, "a plain wheel leaves the plot as it is"
    wheel(widget, box, Qt.KeyboardModifier.ControlModifier, clicks=5)
    zoomed = ranges(box)
    assert zoomed[0][1] - zoomed[0][0] < 0.8 * (whole[0][1] - whole[0][0]), "Ctrl+wheel zooms"

    assert view.reset_button.isVisible() and view.reset_button.text() == "Reset view"
    qtbot.mouseClick(view.reset_button, Qt.MouseButton.LeftButton)
    assert box.autoRangeEnabled() == [True, True]
    assert ranges(box) == whole

    wheel(widget, box, Qt.KeyboardModifier.ControlModifier, clicks=5)
    assert ranges(box) != whole
    double_click(qtbot, widget, box)
    assert ranges(box) == whole

    # Zoomed in (and into negative trials, as far as it goes), then another session: its own ranges.
    wheel(widget, box, Qt.KeyboardModifier.ControlModifier, clicks=-30)
    assert ranges(box)[0][0] >= 0, "no trial axis below 0"
    box.setXRange(2, 3, padding=0)
    view.set_session(second.id)
    qtbot.wait(50)
    fresh = ranges(box)
    assert box.autoRangeEnabled() == [True, True]
    assert fresh[0][0] <= 1 and fresh[0][1] >= second.n_trials

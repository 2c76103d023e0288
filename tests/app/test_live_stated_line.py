"""The Live plot's GFLOP/s axis shows the header's figure (issue 25, item 6): a confirmed figure, which
the header states in place of the session's own, is drawn on that axis as a labelled line."""

from __future__ import annotations

import re
from dataclasses import replace

from showing import on_screen

from tests.app.plot_events import ranges, sessions
from tunelab.app.views.live_plot import LivePlot
from tunelab.core.export.stated import stated_best


def test_the_stated_figure_is_a_line_on_the_gflops_axis(qtbot, store):
    record = sessions(store)[0]
    view = on_screen(qtbot, LivePlot(store, redraw_ms=10), record.id, size=(1200, 700))
    qtbot.wait(50)
    best = view._best.col("gflops")[-1]
    assert record.best_gflops is not None and abs(best - record.best_gflops) / best < 1e-6
    lo, hi = ranges(view.gflops_view)[1]
    assert lo == 0.0, "a gain of a few % must not read as a cliff"
    assert best <= hi <= 1.2 * best
    assert not view.stated_line.isVisible()  # the session's own figure: the curve's end is the header's

    # A confirmed figure 20 % slower than the session's best (the winner's curse): the header states it,
    # and the GFLOP/s axis shows it as a line, inside the range.
    own = stated_best(store, record)
    confirmed = replace(own, kind="confirmed", ms=own.ms * 1.25, runs=3, why=None)
    view.set_stated(confirmed)
    expected = record.flops / (confirmed.ms * 1e-3) / 1e9
    assert view.stated_line.isVisible() and abs(view.stated_line.value() - expected) < 1e-9
    shown = float(re.search(r"\d+(?:\.\d+)?", view.stated_line.label.toPlainText()).group())
    assert abs(shown - view.stated_gflops()) <= 0.01 * view.stated_gflops()  # the label's rounding
    lo, hi = ranges(view.gflops_view)[1]
    assert lo == 0.0 and expected < hi
    view.set_stated(None)
    assert not view.stated_line.isVisible()

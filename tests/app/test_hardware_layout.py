"""The Hardware view's stacked panels read at a laptop's window size (issue 10): each panel named by a
title above it and its unit on the y axis, never a vertical title cut by the panel's height; numbers
on every visible axis; a flat series (a steady clock) drawn flat, not stretched over its noise."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QApplication
from readings import gpu_burst
from showing import on_screen

from tunelab.app.views.hardware_panels import min_span, split_title
from tunelab.app.views.hardware_view import HardwareView


def test_split_title_and_min_span():
    assert split_title("Utilization (%)") == ("Utilization", "%")
    assert split_title("Other busy processes") == ("Other busy processes", "count")
    assert min_span([np.array([2595.8, 2596.4, np.nan])]) == np.float64(0.05 * 2596.4)
    assert min_span([np.array([np.nan])]) == 1.0


def test_stacked_panels_keep_their_titles_units_and_numbers_at_1280x800(qtbot, store_copy):
    record = store_copy.sessions()[-1]
    # after what the sampler recorded while it tuned: a window where only these samples are drawn
    t0 = max(s.t for s in store_copy.telemetry(record.id)) + 1.0
    samples = gpu_burst(t0, lambda i: 2596.0 + (0.3 if i % 2 else -0.2))  # a steady clock, with sensor noise
    store_copy.add_telemetry(record.id, samples)
    view = on_screen(qtbot, HardwareView(store_copy, redraw_ms=10), record.id, size=(1280, 800))
    qtbot.waitExposed(view)
    QApplication.processEvents()
    assert {"trials", "temperature", "power", "clocks", "utilization"} <= set(view._plots)
    for key, plot in view._plots.items():
        left = plot.getAxis("left")
        unit = left.labelText
        assert unit and "(" not in unit, f"{key}: the y axis carries the unit only, not {unit!r}"
        assert plot.titleLabel.text, f"{key}: the panel is named above it"
        # the vertical label fits in the axis' height (it was cut: "Latency (ms")
        assert left.label.boundingRect().width() <= left.geometry().height() + 1, key
        lo, hi = plot.vb.viewRange()[1]
        levels = left.tickValues(lo, hi, left.geometry().height())
        assert any(len(values) for _, values in levels), f"{key}: no numbers on the y axis"
    clocks = view._plots["clocks"]
    start = t0 - record.created_at
    clocks.setXRange(start, start + 4.9, padding=0)  # the panels share the time axis
    QApplication.processEvents()
    clocks.vb.updateAutoRange()
    lo, hi = clocks.vb.viewRange()[1]
    assert hi - lo >= 0.05 * 2596 * 0.99, "a steady clock is not stretched over its 0.5 MHz of noise"
    assert lo <= 2596.0 <= hi

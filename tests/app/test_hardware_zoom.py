"""The Hardware panels (issue 25, item 6): fresh panels for each session, a plain wheel changes no range
(Ctrl+wheel zooms), "Reset view" shows everything again, and no panel goes to negative time."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from showing import on_screen

from tests.app.plot_events import ranges, sessions, wheel
from tunelab.app.views.hardware_view import HardwareView


def test_hardware_panels_fresh_per_session_never_before_time_zero(qtbot, store_copy):
    from tunelab.core.telemetry.readings import TelemetrySample

    first, second = sessions(store_copy)[:2]
    for record in (first, second):  # readings over the session's first 30 s, as the sampler stores them
        t0 = record.created_at
        samples = [
            TelemetrySample(t=t0 + 0.5 * i, gpu_temp_c=60 + 0.1 * i, gpu_power_w=150 + i, cpu_load_mean=30.0)
            for i in range(60)
        ]
        store_copy.add_telemetry(record.id, samples)
    view = on_screen(qtbot, HardwareView(store_copy, redraw_ms=10), size=(1280, 800))
    qtbot.waitExposed(view)
    view.set_session(first.id)
    qtbot.wait(50)
    assert "temperature" in view._plots
    temperature = view._plots["temperature"]
    box, widget = temperature.vb, view.layout_widget
    whole = ranges(box)
    assert whole[0][0] <= 0.5 and whole[0][1] >= 29.5, "every reading in view"

    wheel(widget, box, clicks=3)
    assert ranges(box) == whole, "a plain wheel leaves the panels as they are"
    wheel(widget, box, Qt.KeyboardModifier.ControlModifier, clicks=-40)  # zoom far out
    assert ranges(box)[0][0] >= 0.0, "never into negative time"
    box.translateBy(x=-1e6)  # dragged to the left as far as it goes
    assert ranges(box)[0][0] >= 0.0
    assert ranges(view.trial_plot.vb)[0][0] >= 0.0  # the panels share the time axis
    qtbot.mouseClick(view.reset_button, Qt.MouseButton.LeftButton)
    assert ranges(box) == whole

    box.setXRange(10, 11, padding=0)
    # Hold the old panels themselves, not their id()s: a freed panel's id can be reused by a new one.
    old_plots = list(view._plots.values())
    view.set_session(second.id)
    qtbot.wait(50)
    new_plots = list(view._plots.values())
    assert not any(new is old for new in new_plots for old in old_plots), "new panels for a new session"
    box = view._plots["temperature"].vb
    t = np.array([s.t - second.created_at for s in store_copy.telemetry(second.id)])
    lo, hi = ranges(box)[0]
    assert lo <= max(t.min(), 0.0) + 0.5 and hi >= t.max() - 0.5

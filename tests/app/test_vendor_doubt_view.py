"""The session header's vendor ratio in the roofline's warning style when it cannot be believed, with a
link that measures the vendor again (issue 25: "986.91x vendor" in green). A real stored baseline,
planted 1000x slower than the vendor runs, on a real tuned store; the re-measurement is real."""

from __future__ import annotations

from dataclasses import replace

from tunelab.app import theme
from tunelab.app.views.session_figures import REMEASURE, SessionFigures
from tunelab.core.trust.baselines import baseline_for
from tunelab.core.trust.roofline import roofline_for


def test_an_implausible_vendor_ratio_is_a_warning_and_is_measured_again_when_asked(qtbot, store_copy):
    record = min(store_copy.sessions(), key=lambda r: r.id)
    kept = baseline_for(store_copy, record).baseline
    roofline_for(store_copy, record)  # both figures stored: the header fetches them by itself
    planted = replace(kept, median_ms=record.best_ms * 1000)
    store_copy.put_baseline(planted)
    label = SessionFigures(store_copy)
    qtbot.addWidget(label)
    label.show()
    label.set_record(record)
    qtbot.waitUntil(lambda: not label.running and label.figures is not None, timeout=60_000)
    text = label.text()
    assert "1000.00× vendor ⚠" in text and f"href='{REMEASURE}'" in text
    assert f"color:{theme.WARN_DARK}" in text and theme.GOOD not in text  # the warning amber, not green
    tip = label.toolTip()
    assert "Not to be believed as it stands: " in tip and "1000.00x is outside 0.02-50x" in tip

    label.linkActivated.emit(REMEASURE)  # the person clicks "re-measure"
    qtbot.waitUntil(lambda: not label.running, timeout=120_000)
    again = store_copy.baseline(record.workload, record.shape, record.dtype, "llvm")
    assert again.measured_at > planted.measured_at and again.median_ms != planted.median_ms
    assert "1000.00× vendor" not in label.text()

"""The GUI thread stays responsive while a session is created and tuned (in the worker's child process)."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QTimer

from tunelab.app.main_window import MainWindow

TICK_MS = 10
MAX_STALL_MS = 250  # robust on two busy cores; the measured figure is printed


# Serial: it times the GUI thread's own scheduling; beside another test lane's worker on the other core a
# stall of 848 ms came from the lane, not from the app (scripts/test.sh --fast, 2 cores).
@pytest.mark.serial
def test_event_loop_keeps_beating_while_tuning(qtbot, store_copy, settings, small_spec):
    window = MainWindow(store_copy, settings, poll_ms=100, probe_target=False)
    qtbot.addWidget(window)
    window.show()
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(TICK_MS)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    worker = window.start_session(small_spec(trials=12, batch=4))
    qtbot.waitUntil(lambda: window.worker is None, timeout=120_000)
    timer.stop()
    assert worker.n_yielded == 12
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    worst_ms = 1000 * max(gaps)
    p99_ms = 1000 * sorted(gaps)[int(0.99 * (len(gaps) - 1))]
    print(
        f"\nevent-loop heartbeat while tuning: {len(gaps)} ticks, worst gap {worst_ms:.0f} ms "
        f"(stall {worst_ms - TICK_MS:.0f} ms), p99 {p99_ms:.0f} ms"
    )
    assert worst_ms < MAX_STALL_MS
    # the live view redraws from its timer, not once per trial: 3 batches of 4 trials
    assert window.live.n_trials == 12 and window.live.redraws < 12 + 2

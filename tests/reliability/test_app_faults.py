"""Planted kernel faults under the desktop app: failed trials carry their reason, fail-fast reaches the
message bar in one line, and the GUI thread keeps answering while the faulty session runs."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QSettings, QTimer
from specs import small_spec  # tests/core, on the path by this folder's conftest

from tunelab.core.faults import COUNTER_ENV, PLANT_ENV
from tunelab.core.records import MeasureOptions, SessionSpec
from tunelab.core.store import Store

pytestmark = pytest.mark.slow

FAST = MeasureOptions(number=1, repeat=2, min_repeat_ms=1, cooldown_s=0, confirm_runs=0)


def _spec(**changes) -> SessionSpec:
    return small_spec(**{"trials": 6, "batch": 3, "measure": FAST, **changes})


def _window(qtbot, tmp_path):
    from tunelab.app.main_window import MainWindow

    store = Store(tmp_path / "app.sqlite")
    window = MainWindow(
        store, QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat), poll_ms=100, probe_target=False
    )
    qtbot.addWidget(window)
    window.show()
    return window, store


@pytest.mark.serial  # its GUI must not stall 2 s: no second test lane taking the other core beside it
def test_segfaulting_kernels_are_failed_trials_and_the_gui_stays_responsive(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv(PLANT_ENV, "sigsegv@run/2")
    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / "counter"))
    window, store = _window(qtbot, tmp_path)
    ticks: list[float] = []
    heartbeat = QTimer()
    heartbeat.timeout.connect(lambda: ticks.append(time.monotonic()))
    heartbeat.start(50)
    worker = window.start_session(_spec())
    assert worker is not None
    qtbot.waitUntil(lambda: window.worker is None, timeout=300_000)
    heartbeat.stop()
    record = store.session(worker.session_id)
    assert record.status == "finished" and record.n_trials == 6 and record.n_failed == 3
    errors = [t.error for t in store.trials(record.id) if not t.ok]
    assert all("died of SIGSEGV (a bad memory access" in e for e in errors), errors
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    assert len(ticks) > 20 and gaps[worst] < 2.0, (
        f"the GUI thread stalled {gaps[worst]:.2f} s, {ticks[worst] - ticks[0]:.1f} s into the session"
    )
    store.close()


def test_fail_fast_reaches_the_message_bar_in_one_line(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv(PLANT_ENV, "sigill@run")
    window, store = _window(qtbot, tmp_path)
    worker = window.start_session(
        _spec(
            trials=12,
            batch=3,
            measure=MeasureOptions(
                number=1, repeat=2, min_repeat_ms=1, cooldown_s=0, confirm_runs=0, fail_fast=3
            ),
        )
    )
    qtbot.waitUntil(lambda: window.worker is None, timeout=300_000)
    record = store.session(worker.session_id)
    assert record.status == "failed" and record.n_trials == 3
    assert window.message_bar.level == "error"
    text = window.message_bar.text
    assert "\n" not in text and "the first 3 trials all failed with SIGILL" in text, text
    store.close()

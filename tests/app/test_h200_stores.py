"""The app on the real H200 stores (tests/data/h200): opened on a machine without a GPU, as a store tuned
on a GPU server is opened on a laptop. Each session shows its CUDA target, its NVML trace (temperature,
power, clocks; throttling shaded) as what was recorded there, and its vendor (cuBLAS / cuDNN, measured on
the session's machine) beside it; nothing is measured again here, where it would time other hardware.

The copies name the machine the sessions ran on "h200-node" (the stores say "vm", which may be this
machine's name too): the test is about a store from another machine."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tunelab.app.main_window import MainWindow
from tunelab.app.views.session_figures import SessionFigures
from tunelab.core.store import Store

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"
ELSEWHERE = "h200-node"


def _copy(name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    shutil.copyfile(DATA / name, path)
    conn = sqlite3.connect(path)
    with conn:
        for table in ("sessions", "vendor_baselines", "machine_profile"):
            conn.execute(f"UPDATE {table} SET hostname = ?", (ELSEWHERE,))
    conn.close()
    return path


@pytest.mark.parametrize(
    ("name", "sid", "vendor_words", "x"),
    [
        ("template-fp32.sqlite", 1, "cuBLAS", 2.685 / 4.643),
        ("auto-fp32-fp16-conv.sqlite", 1, "cuBLAS", 2.685 / 20.88),
        ("auto-fp32-fp16-conv.sqlite", 2, "cuBLAS", 0.1944 / 0.7452),
        ("auto-fp32-fp16-conv.sqlite", 3, "cuDNN", 0.01803 / 0.05296),
    ],
)
def test_each_h200_session_shows_its_target_nvml_trace_and_vendor(
    qtbot, settings, tmp_path, name, sid, vendor_words, x
):
    store = Store(_copy(name, tmp_path))
    try:
        window = MainWindow(store, settings, poll_ms=100, probe_target=False)
        qtbot.addWidget(window)
        window.resize(1600, 1000)
        window.show()
        window.browser.select_session(sid)
        qtbot.waitUntil(lambda: window.session_id == sid, timeout=10_000)
        assert window.target_label.text() == "Target: CUDA sm_90"
        figures = window.findChild(SessionFigures, "session_figures")
        assert figures is not None
        qtbot.waitUntil(lambda: not figures.running and figures.figures is not None, timeout=180_000)
        assert f"{x:.2f}× vendor" in figures.text(), figures.text()
        assert vendor_words in figures.toolTip() and "% of roofline" in figures.text()
        assert not figures.figures.errors

        window.tabs.setCurrentWidget(window.hardware)
        status = window.hardware.status.text()
        samples = int(status.split("·")[1].split()[0])
        assert samples > 500  # 586-1116 NVML samples a session
        assert "telemetry samples of GPU (NVML) and CPU" in status
        # stored figures only: nothing was measured (or stored) on this machine
        assert store.baseline("gemm", {"M": 4096, "N": 4096, "K": 4096}, "float32", "cuda") is None
        window.close()
    finally:
        store.close()


def test_the_template_sessions_throttling_is_shaded(qtbot, settings, tmp_path):
    store = Store(_copy("template-fp32.sqlite", tmp_path))
    try:
        window = MainWindow(store, settings, poll_ms=100, probe_target=False)
        qtbot.addWidget(window)
        window.show()
        window.browser.select_session(1)
        window.tabs.setCurrentWidget(window.hardware)
        qtbot.waitUntil(lambda: "throttled in" in window.hardware.status.text(), timeout=10_000)
        assert "throttled in 4 samples (shaded)" in window.hardware.status.text()
        window.close()
    finally:
        store.close()

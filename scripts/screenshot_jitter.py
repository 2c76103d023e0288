"""The Jitter view's screenshot for docs/screenshots/jitter.png (a script, not a test).

    xvfb-run -s "-screen 0 1600x1000x24" python scripts/screenshot_jitter.py [--out docs/screenshots/jitter.png]

Tunes a real small session in a temporary store (GEMM, two shapes in one xgb session, so the cost model
predicts and each shape has its own figure), opens the main window on its Jitter tab, runs a real report
through the view (fresh worker processes, every buffer layout, the best schedule also carried to an awkward
shape) and grabs the window.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/screenshots/jitter.png")
    ap.add_argument("--shapes", default="M=7,N=7")
    args = ap.parse_args()

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from tunelab.core.records import MeasureOptions, SessionSpec
    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store

    folder = Path(tempfile.mkdtemp(prefix="tunelab-jitter-shot-"))
    store = Store(folder / "tunelab.sqlite")
    spec = SessionSpec(
        workload="gemm",
        shape={"M": 64, "N": 64, "K": 256},
        shapes=({"M": 16, "N": 64, "K": 256},),
        target="llvm",
        space_kind="template",
        tuner="xgb",
        trials=24,
        batch=8,
        name="gemm 64×64×256 · xgb",
        measure=MeasureOptions(number=2, repeat=3, min_repeat_ms=5, cooldown_s=0, confirm_runs=0),
    )
    session = create_session(store, spec)
    for _ in session.run():
        pass

    app = QApplication.instance() or QApplication([])
    from tunelab.app.main_window import MainWindow

    window = MainWindow(
        store, QSettings(str(folder / "settings.ini"), QSettings.Format.IniFormat), probe_target=False
    )
    window.resize(1560, 960)
    window.show()
    window.browser.select_session(session.session_id)
    window.tabs.setCurrentWidget(window.jitter)
    view = window.jitter
    view.shapes_edit.setText(args.shapes)
    view.runs_spin.setValue(5)
    deadline = time.monotonic() + 10
    while window.session_id != session.session_id and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.02)
    view.start()
    while view.running:
        app.processEvents()
        time.sleep(0.02)
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    window.grab().save(args.out)
    print(view.headline.text())
    print(args.out)
    window.watcher.stop()


if __name__ == "__main__":
    main()

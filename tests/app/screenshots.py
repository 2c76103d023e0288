"""Screenshots of every view for docs/screenshots (a script, not a test).

    xvfb-run -s "-screen 0 1400x900x24" python tests/app/screenshots.py [--db STORE] [--out DIR]

Without --db it tunes a small store first (three real LLVM sessions: xgb, random, and one left
"crashed"), so every view has something real to show.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def make_store(path: Path) -> None:
    from core.records import MeasureOptions, SessionSpec
    from core.session import create_session
    from core.store import Store

    measure = MeasureOptions(number=1, repeat=3, min_repeat_ms=1)
    base = dict(workload="gemm", shape={"M": 64, "N": 64, "K": 64}, target="llvm", space_kind="template",
                batch=8, measure=measure)
    store = Store(path)
    for tuner, trials in (("xgb", 48), ("random", 48)):
        session = create_session(store, SessionSpec(tuner=tuner, trials=trials, name=f"gemm 64³ · {tuner}", **base))
        for _ in session.run():
            pass
    # A session whose process died: stopped after two batches and left "running" by a dead pid.
    session = create_session(store, SessionSpec(tuner="genetic", trials=64, name="gemm 64³ · genetic (crashed)",
                                                **base))
    for trial in session.run():
        if trial.index == 15:
            break
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.set_status(session.session_id, "running")
    store.db.execute("UPDATE sessions SET pid = ? WHERE id = ?", (dead.pid, session.session_id))
    store.close()


def settle(app, seconds: float = 0.6) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp()) / "screens.sqlite"
    if not db.exists():
        print(f"tuning a small store at {db} …", file=sys.stderr)
        make_store(db)

    from PySide6.QtCore import QSettings, Qt
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.new_session import NewSessionDialog
    from app.resources import stylesheet
    from core.store import Store

    app = QApplication(sys.argv[:1])
    app.setStyleSheet(stylesheet())
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "screens.ini"), QSettings.Format.IniFormat)
    store = Store(db)
    window = MainWindow(store, settings)
    window.resize(1400, 900)
    window.show()
    first = min(r.id for r in store.sessions())
    window.browser.select_session(first)
    window.compare.set_checked([r.id for r in store.sessions() if r.status == "finished"])
    settle(app, 1.5)

    shots = {}
    for name, view in (("live", window.live), ("costmodel", window.costmodel), ("trials", window.trials),
                       ("compare", window.compare), ("hardware", window.hardware)):
        window.tabs.setCurrentWidget(view)
        if view is window.trials:
            best = store.best_trial(first)
            window.trials.select_trial(best.id)
            window.trials.details.setCurrentIndex(1)
        settle(app)
        shots[name] = window.grab()
    window.tabs.setCurrentWidget(window.compare)
    window.compare.tables.setCurrentIndex(1)
    settle(app)
    shots["compare-configs"] = window.compare.grab()

    crashed = next((r.id for r in store.sessions() if r.status == "crashed"), None)
    if crashed is not None:
        window.tabs.setCurrentWidget(window.live)
        window.browser.select_session(crashed)
        settle(app)
        shots["browser-crashed"] = window.grab()

    dialog = NewSessionDialog(settings, window)
    dialog.resize(820, 680)
    dialog.show()
    settle(app)
    shots["new-session"] = dialog.grab()
    dialog.tabs.setCurrentIndex(1)
    dialog.space_editor.knob_edit("tile_i").setText("[[1], [3], [8]]")
    settle(app)
    shots["space-editor-invalid"] = dialog.grab()
    dialog.space_kind_combo.setCurrentIndex(dialog.space_kind_combo.findData("auto"))
    settle(app, 1.0)
    shots["space-editor-auto"] = dialog.grab()
    dialog.tabs.setCurrentIndex(2)
    settle(app)
    shots["new-session-tuning"] = dialog.grab()
    dialog.close()

    for name, pixmap in shots.items():
        path = out / f"{name}.png"
        pixmap.save(str(path))
        print(path)
    window.close()
    store.close()
    del Qt
    return 0


if __name__ == "__main__":
    sys.exit(main())

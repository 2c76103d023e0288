"""Screenshots of every view for docs/screenshots (a script, not a test).

    xvfb-run -s "-screen 0 1700x1100x24" python tests/app/screenshots.py [--db STORE] [--out DIR] [--size WxH]

With --size the window is that size and each file is named <view>-<W>x<H>.png (the layouts are checked
at 1600x1000 and 1280x800: a laptop's window).

Without --db it tunes a small store first (real LLVM sessions: xgb, random, one left "crashed", an
xgb session tuning two shapes, one measured next to a planted busy process; a stored validation with
shapes; the vendor baseline and roofline of the first session), so every view has something real to show.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def make_store(path: Path) -> None:
    from tunelab.core.records import MeasureOptions, SessionSpec
    from tunelab.core.session.loop import create_session as _create
    from tunelab.core.usecases.tuning import confirm_when_finished

    def create_session(store, spec):  # sessions as the command line runs them: winners confirmed
        return confirm_when_finished(_create(store, spec))

    from tunelab.core.store import Store

    measure = MeasureOptions(
        number=1, repeat=3, min_repeat_ms=1, cooldown_s=0, confirm_runs=2, confirm_max_s=0
    )
    base = dict(
        workload="gemm",
        shape={"M": 64, "N": 64, "K": 64},
        target="llvm",
        space_kind="template",
        batch=8,
        measure=measure,
    )
    store = Store(path)
    for tuner, trials in (("xgb", 48), ("random", 48)):
        session = create_session(
            store, SessionSpec(tuner=tuner, trials=trials, name=f"gemm 64³ · {tuner}", **base)
        )
        for _ in session.run():
            pass
    # A session whose process died: stopped after two batches and left "running" by a dead pid.
    session = create_session(
        store, SessionSpec(tuner="genetic", trials=64, name="gemm 64³ · genetic (crashed)", **base)
    )
    for trial in session.run():
        if trial.index == 15:
            break
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.set_status(session.session_id, "running")
    store.db.execute("UPDATE sessions SET pid = ? WHERE id = ?", (dead.pid, session.session_id))
    # Two shapes in one xgb session: the bias table gets a shape group per task.
    session = create_session(
        store,
        SessionSpec(
            tuner="xgb",
            trials=32,
            name="gemm 64³ + M=16 · xgb",
            shapes=({"M": 16, "N": 64, "K": 64},),
            **base,
        ),
    )
    for _ in session.run():
        pass
    # Measured next to a busy process that is not ours: the Hardware view marks those trials.
    busy = subprocess.run(
        ["sh", "-c", "(while :; do :; done) >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(busy.stdout.strip())
    try:
        noisy = dict(base, measure=MeasureOptions(number=1, repeat=3, min_repeat_ms=1, cooldown_s=1.5))
        session = create_session(
            store, SessionSpec(tuner="random", trials=16, name="gemm 64³ · busy neighbour", **noisy)
        )
        for _ in session.run():
            pass
    finally:
        os.kill(pid, 9)
    first = min(r.id for r in store.sessions())
    from tunelab.core.usecases.validation import validate_and_store

    validate_and_store(store, first, top_k=3, runs=3, shapes="M=16,32,64,128")
    try:
        from tunelab.core.trust.baselines import baseline_for
        from tunelab.core.trust.roofline import roofline_for

        baseline_for(store, store.session(first))
        roofline_for(store, store.session(first))
    except ImportError:
        pass
    store.close()


def settle(app, seconds: float = 0.6) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def wait_for(app, done, seconds: float = 60.0) -> None:
    end = time.monotonic() + seconds
    while not done() and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--size", help="the window's size, WxH (the files are named after it)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x")) if args.size else (1400, 900)
    suffix = f"-{width}x{height}" if args.size else ""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp()) / "screens.sqlite"
    if not db.exists():
        print(f"tuning a small store at {db} …", file=sys.stderr)
        make_store(db)

    from PySide6.QtCore import QSettings, Qt
    from PySide6.QtWidgets import QApplication

    # TVM imported here, once, before any worker thread can import it too: two threads importing it
    # at once leave it partially initialised ("module 'tvm' has no attribute 'runtime'").
    import tunelab.core.workloads.catalog  # noqa: F401
    from tunelab.app.dialogs.new_session import NewSessionDialog
    from tunelab.app.main_window import MainWindow
    from tunelab.app.resources import stylesheet
    from tunelab.core.store import Store

    app = QApplication(sys.argv[:1])
    app.setStyleSheet(stylesheet())
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "screens.ini"), QSettings.Format.IniFormat)
    store = Store(db)
    window = MainWindow(store, settings)
    window.resize(width, height)
    window.show()
    first = min(r.id for r in store.sessions())
    window.browser.select_session(first)
    window.compare.set_checked([r.id for r in store.sessions() if r.status == "finished"])
    settle(app, 1.5)

    shots = {}
    for name, view in (
        ("live", window.live),
        ("costmodel", window.costmodel),
        ("trials", window.trials),
        ("compare", window.compare),
        ("hardware", window.hardware),
        ("validation", window.validation),
    ):
        window.tabs.setCurrentWidget(view)
        if view is window.trials:
            best = store.best_trial(first)
            window.trials.select_trial(best.id)
            window.trials.details.setCurrentWidget(window.trials.knob_table)
        settle(app)
        if view is window.costmodel:  # its bias table is computed in a child process once shown
            wait_for(app, lambda: not window.costmodel.bias_running, 120)
            window.costmodel.models.start()  # the models compared on this session (a child process too)
            wait_for(app, lambda: not window.costmodel.models.running, 120)
            settle(app)
        if view is window.compare:  # its scores are worked out in a worker once shown
            wait_for(app, lambda: not window.compare.scores_pending(), 120)
            settle(app)
        shots[name] = window.grab()
    window.tabs.setCurrentWidget(window.compare)
    window.compare.tables.setCurrentIndex(1)
    settle(app)
    shots["compare-configs"] = window.compare.grab()

    # The bias table over every gemm session, a flagged group picked (its trials ringed in the plots).
    window.tabs.setCurrentWidget(window.costmodel)
    window.costmodel.bias.set_scope("workload")
    wait_for(app, lambda: not window.costmodel.bias_running)
    groups = window.costmodel.bias.groups()
    flagged = [i for i in window.costmodel.bias.flagged_rows() if groups[i].dimension != "all"]
    if flagged:
        window.costmodel.bias.table.selectRow(flagged[0])
    settle(app)
    shots["costmodel-bias"] = window.grab()
    window.costmodel.bias.set_scope("session")

    neighbour = next((r.id for r in store.sessions() if "busy neighbour" in r.name), None)
    if neighbour is not None:
        window.tabs.setCurrentWidget(window.hardware)
        window.browser.select_session(neighbour)
        settle(app, 1.0)
        shots["hardware-busy-neighbour"] = window.grab()

    # Shapes only, live: the random session's best schedule carried over to other shapes.
    other = next((r.id for r in store.sessions() if r.name.endswith("· random")), None)
    if other is not None:
        window.tabs.setCurrentWidget(window.validation)
        window.browser.select_session(other)
        settle(app)
        window.validation.shapes_edit.setText("M=16..256")
        window.validation.start(remeasure=False)
        wait_for(app, lambda: not window.validation.running, 300)
        settle(app)
        shots["validation-shapes"] = window.grab()
    window.browser.select_session(first)

    crashed = next((r.id for r in store.sessions() if r.status == "crashed"), None)
    if crashed is not None:
        window.tabs.setCurrentWidget(window.live)
        window.browser.select_session(crashed)
        settle(app)
        shots["browser-crashed"] = window.grab()

    from tunelab.app.dialogs.export_dialog import ExportDialog
    from tunelab.core.export.pick import export_pick

    record = store.session(first)
    picks = {robust: export_pick(store, first, robust=robust) for robust in (False, True)}
    export = ExportDialog(record, None, str(Path(tempfile.mkdtemp()) / "export"), window, picks=picks)
    export.resize(760, 420)
    export.show()
    settle(app)
    shots["export-dialog"] = export.grab()
    export.close()

    # The window's target probe imports TVM in a worker; the dialog imports it too: one at a time.
    wait_for(app, lambda: window._probe is None or not window._probe.isRunning(), 120)
    dialog = NewSessionDialog(settings, window)
    dialog.resize(min(1100, width - 100), min(820, height - 60))
    dialog.show()
    wait_for(app, lambda: not dialog.space_editor.is_pending(), 120)  # derived in a worker thread
    settle(app)
    shots["new-session"] = dialog.grab()
    dialog.tabs.setCurrentIndex(1)
    rows = dialog.space_editor._knob_rows  # the first tile knob, whatever the workload names it
    row = next((r for r in rows if r.knob["name"].startswith("tile")), rows[0] if rows else None)
    if row is not None:
        row.edit.setText("[[1], [3], [8]]")
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
        path = out / f"{name}{suffix}.png"
        pixmap.save(str(path))
        print(path)
    window.close()
    store.close()
    del Qt
    return 0


if __name__ == "__main__":
    sys.exit(main())

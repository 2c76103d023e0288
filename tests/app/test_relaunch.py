"""Launch, tune, export, quit, and launch again, ten times on one growing store (issue: the second launch
broke TVM inside the app: the target probe's worker and the session list imported it on two threads
at once, and every later use of TVM failed until a restart).

Each launch is a real app in a fresh process, as a person's relaunch is (this test's own process
imported TVM long ago, so it could never show the race). The window is driven as a person would: New
session at once, before TVM has finished importing, the dialog filled and Start clicked; the session
tunes in its child to the end; its best trial is exported; the target probe reports; the window
closes. An audit hook in the app's process records the thread of every TVM module it imports: all of
them must come from the one import thread (tunelab.app.workers.tvm_loader), none from the GUI thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tunelab.core.store import Store

LAUNCHES = 10

ONE_LAUNCH = textwrap.dedent(
    """
    import json, sys, threading

    tvm_imports = []  # (thread name, module) for every TVM module this process imports


    def _audit(event, args):
        if event == "import" and str(args[0]).split(".")[0] in ("tvm", "tvm_ffi"):
            tvm_imports.append((threading.current_thread().name, str(args[0])))


    sys.addaudithook(_audit)

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from tunelab.app.dialogs.new_session import NewSessionDialog
    from tests.app.child_app import launch, wait_for
    from tests.app.dialog_ready import ask_small_gemm, small_random_budget  # no TVM import

    db, ini, out = sys.argv[1:4]
    app, store, window = launch(db, ini)
    before = {r.id for r in store.sessions()}
    dialog_error = []


    def fill_and_start():
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, NewSessionDialog), dialog
        ask_small_gemm(dialog)
        # the space is derived in a worker thread, and its size recommends a tuner: wait, then choose
        wait_for(app, lambda: not dialog.space_editor.is_pending())
        small_random_budget(dialog, trials=4, batch=2)
        dialog.confirm_cap_spin.setValue(0)
        if not dialog.can_start():
            dialog_error.append(dialog.error_label.text() or dialog.problem_error.text())
            dialog.reject()
            return
        dialog.start_button.click()  # checked in a worker; the dialog closes once the check passed

        def refused():  # still open: the check refused the spec (or hangs); say why and go on
            if dialog.isVisible():
                dialog_error.append(dialog.error_label.text() or "still checking")
                dialog.reject()

        QTimer.singleShot(120_000, refused)


    QTimer.singleShot(0, fill_and_start)
    window.new_action.trigger()  # at once, as a person clicks: TVM may still be importing
    wait_for(app, lambda: window.worker is None)
    (sid,) = {r.id for r in store.sessions()} - before or {None}
    record = store.session(sid) if sid is not None else None
    exported = None
    if record is not None and record.best_trial_id is not None:
        window.export_trial(sid, None, out, ("schedule", "tvmscript"))
        wait_for(app, lambda: window.export_worker is None)
        exported = window.message_bar.text
    wait_for(app, lambda: window._probe is None or not window._probe.isRunning())
    app.processEvents()
    print(json.dumps({
        "dialog_error": dialog_error,
        "session": sid,
        "status": record.status if record else None,
        "trials": record.n_trials if record else None,
        "export_message": exported,
        "level": window.message_bar.level,
        "target_label": window.target_label.text(),
        "import_threads": sorted({t for t, _ in tvm_imports}),
        "gui_thread_imports": [m for t, m in tvm_imports if t == "MainThread"],
    }))
    window.close()
    store.close()
    """
)


@pytest.mark.slow
def test_ten_launches_in_a_row_tune_and_export_with_tvm_imported_once_on_one_thread(tmp_path):
    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "launch.py"
    script.write_text(ONE_LAUNCH)
    db = tmp_path / "store.sqlite"
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    )
    for launch in range(1, LAUNCHES + 1):
        out = tmp_path / f"export-{launch}"
        proc = subprocess.run(
            [sys.executable, str(script), str(db), str(tmp_path / "settings.ini"), str(out)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=root,
            env=env,
        )
        assert proc.returncode == 0, f"launch {launch}: {proc.stderr[-3000:]}"
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        where = f"launch {launch}: {seen}"
        assert seen["dialog_error"] == [], where
        assert seen["status"] == "finished" and seen["trials"] == 4, where
        assert seen["export_message"] and "Exported" in seen["export_message"], where
        assert list(out.glob("*.schedule.json")) and list(out.glob("*.py")), where
        assert (
            seen["target_label"].startswith("Target: CPU") or "Default target: CPU" in seen["target_label"]
        ), where
        assert "rror" not in seen["target_label"], where
        # TVM imported once, on one thread, and never on the GUI thread
        assert seen["import_threads"] == ["tunelab-tvm-import"], where
        assert seen["gui_thread_imports"] == [], where
        store = Store(db)
        try:
            assert len(store.sessions()) == launch, where  # the store grows by one session per launch
        finally:
            store.close()

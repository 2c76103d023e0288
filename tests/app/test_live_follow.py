"""The live view and the browser follow a session that another process is writing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tunelab.app.views.browser import SessionBrowser
from tunelab.app.views.live_plot import LivePlot
from tunelab.app.workers.store_watcher import StoreWatcher
from tunelab.core.records import SessionSpec

N_TRIALS = 24
FAILED_EVERY = 6

WRITER = textwrap.dedent("""
    import sys, time
    from tunelab.core.records import NewTrial
    from tunelab.core.store import Store
    path, session_id, n, failed_every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    store = Store(path)
    store.set_status(session_id, "running")
    for i in range(n):
        now = time.time()
        failed = i % failed_every == failed_every - 1
        trial = NewTrial(round=i // 4, config={"tile": i}, status="run_error" if failed else "ok",
                         error="RuntimeError: kernel crashed" if failed else None,
                         samples_ms=() if failed else (1.0 + 1.0 / (i + 1), 1.0 + 1.1 / (i + 1)),
                         predicted_ms=None, build_s=0.01, run_s=0.01, started_at=now, finished_at=now)
        store.add_trial(session_id, trial, f"k{i}")
        time.sleep(0.05)
    store.set_status(session_id, "finished")
    store.close()
""")


def test_live_plot_follows_a_session_written_by_another_process(qtbot, store_copy, tmp_path):
    spec = SessionSpec(
        workload="gemm",
        shape={"M": 32, "N": 32, "K": 32},
        target="llvm",
        trials=N_TRIALS,
        name="written elsewhere",
    )
    session_id = store_copy.create_session(
        spec,
        target_json={"kind": "llvm", "mcpu": "generic"},
        target_kind="llvm",
        space_json={"kind": "template", "knobs": []},
        tvm_version="test",
        flops=65536.0,
    )
    watcher = StoreWatcher(store_copy, interval_ms=50)
    browser = SessionBrowser(store_copy, watcher)
    live = LivePlot(store_copy, redraw_ms=20)
    watcher.trials_added.connect(live.poll)
    qtbot.addWidget(browser)
    qtbot.addWidget(live)
    live.show()
    live.set_session(session_id)
    watcher.start()
    assert live.n_trials == 0

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writer = subprocess.Popen(
        [sys.executable, str(script), str(store_copy.path), str(session_id), str(N_TRIALS), str(FAILED_EVERY)]
    )
    try:
        # partway: some trials already drawn while the other process keeps writing
        qtbot.waitUntil(lambda: 0 < live.n_trials < N_TRIALS, timeout=10_000)
        qtbot.waitUntil(lambda: writer.poll() is not None, timeout=30_000)
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait()
    assert writer.returncode == 0
    qtbot.waitUntil(lambda: live.n_trials == N_TRIALS, timeout=5_000)
    assert live.n_failed == N_TRIALS // FAILED_EVERY
    qtbot.waitUntil(
        lambda: live.redraws >= 2 and len(live.ok_curve.getData()[0]) == N_TRIALS - live.n_failed,
        timeout=5_000,
    )
    qtbot.waitUntil(lambda: browser.record(session_id).status == "finished", timeout=5_000)
    assert browser.record(session_id).n_trials == N_TRIALS
    watcher.stop()

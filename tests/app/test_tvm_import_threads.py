"""Workers that use TVM import it one thread at a time (tunelab.app.workers.engine.import_tvm_once).

Two threads importing TVM at once left it half initialised (seen when the app's target probe and a view's
worker started together), so a worker that uses TVM imports it under one lock before its work. Pinned
with real CallWorkers: while the lock is held elsewhere a TVM-using worker waits and a store-only one
does not; once it is free, both finish."""

from __future__ import annotations

import threading

from tunelab.app.workers import engine
from tunelab.app.workers.engine import CallWorker
from tunelab.core.store import Store


def _ran(_store, started: threading.Event) -> str:
    started.set()
    import tvm

    return str(tvm.__version__)


def test_a_tvm_worker_imports_under_the_lock_and_a_store_worker_does_not_wait(qtbot, tmp_path):
    db = tmp_path / "t.sqlite"
    Store(db).close()
    tvm_started, store_started = threading.Event(), threading.Event()
    results: list[str] = []
    with engine._TVM_IMPORT:  # another thread importing TVM right now
        uses_tvm = CallWorker(db, _ran, tvm_started, imports_tvm=True)
        store_only = CallWorker(db, _ran, store_started)
        for worker in (uses_tvm, store_only):
            worker.succeeded.connect(results.append)
            worker.start()
        assert store_started.wait(30)  # not held up by the lock
        assert not tvm_started.wait(0.5)  # waits for the import in progress
    assert tvm_started.wait(60)
    for worker in (uses_tvm, store_only):
        assert worker.wait(60_000)
    qtbot.waitUntil(lambda: len(results) == 2, timeout=10_000)

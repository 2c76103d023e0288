"""Fixtures for the app tests: a real store with real (small, LLVM) sessions, isolated settings,
and a check that no test leaves a worker thread running."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import threading
import time
from pathlib import Path

import pytest
from PySide6.QtCore import QThreadPool

from tests.app.qt_settings import _isolated_settings, settings  # noqa: F401 (fixtures every app test gets)
from tests.core.specs import quick_spec as small_spec
from tests.core.stores import copy_database as copy_db
from tunelab.core.store import Store


@pytest.fixture(name="small_spec")
def _small_spec_fixture():
    return small_spec


@pytest.fixture(scope="session")
def tuned_db(tmp_path_factory) -> Path:
    """A store holding two finished sessions (random and genetic tuners), tuned for real once per run."""
    from tunelab.core.session.loop import create_session

    path = tmp_path_factory.mktemp("store") / "tuned.sqlite"
    store = Store(path)
    try:
        for tuner in ("random", "genetic"):
            session = create_session(store, small_spec(tuner=tuner))
            for _ in session.run():
                pass
    finally:
        store.close()
    return path


@pytest.fixture
def db_copy(tuned_db, tmp_path) -> Path:
    """A private copy of the tuned store, for tests that write to it."""
    return copy_db(tuned_db, tmp_path / "copy.sqlite")


@pytest.fixture(scope="session")
def xgb_db(tuned_db, tmp_path_factory) -> tuple[Path, int]:
    """The tuned store plus an xgb session tuning two shapes (tasks M=32 and M=16): 16 trials in batches
    of 4, so each task's second batch is predicted by its cost model before it is measured.
    Returns (path, the xgb session's id)."""
    from tunelab.core.session.loop import create_session

    path = copy_db(tuned_db, tmp_path_factory.mktemp("xgb") / "xgb.sqlite")
    store = Store(path)
    try:
        session = create_session(
            store,
            small_spec(
                tuner="xgb", trials=16, shapes=({"M": 16, "N": 32, "K": 32},), name="gemm 32³ + M=16 · xgb"
            ),
        )
        for _ in session.run():
            pass
    finally:
        store.close()
    return path, session.session_id


@pytest.fixture
def store(tuned_db):
    """A GUI-thread Store on the shared tuned store (tests must not write through it)."""
    s = Store(tuned_db)
    yield s
    s.close()


@pytest.fixture
def store_copy(db_copy):
    s = Store(db_copy)
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _no_leaked_threads(qapp):
    """Fail a test that leaves a worker QThread or a non-daemon Python thread running (napari's rule)."""
    from tunelab.app.workers.engine import running_workers

    before = {t.ident for t in threading.enumerate()}
    yield
    # A worker that ends on its own is no leak, only slow on a loaded 2-core machine (a bias report's child
    # process took over 5 s there): wait for it; one that never ends still fails the test.
    deadline = time.monotonic() + 60.0
    while running_workers() and time.monotonic() < deadline:
        qapp.processEvents()
        time.sleep(0.02)
    leaked_workers = running_workers()
    for worker in leaked_workers:  # clean up so later tests start clean, then fail this one
        if hasattr(worker, "cancel"):
            worker.cancel()
        worker.wait(60_000)
    QThreadPool.globalInstance().waitForDone(5_000)
    leaked = [t for t in threading.enumerate() if t.ident not in before and t.is_alive() and not t.daemon]
    assert not leaked_workers, f"test left worker threads running: {leaked_workers}"
    assert not leaked, f"test left Python threads running: {[t.name for t in leaked]}"

"""Stopping a validation that is running: `is_cancelled` is polled between worker runs and while a worker
is measured; every worker process is killed and nothing is stored. Real TVM session, real workers."""

from __future__ import annotations

import sqlite3
import time

import psutil
import pytest
from stores import copy_database

from tunelab.core.store import Store
from tunelab.core.trust.remeasure.api import ValidationCancelled, validate_session
from tunelab.core.trust.remeasure.pool import worker_processes

pytestmark = pytest.mark.slow


def _rows(path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        conn.close()


def test_cancel_after_the_first_run_kills_every_worker_and_stores_nothing(finished_session, tmp_path):
    src, sid = finished_session
    path = copy_database(src, tmp_path / "copy.sqlite")
    before = _rows(path)
    store = Store(path)
    progress: list[tuple[int, int]] = []
    workers_seen: list[int] = []
    stop = {"asked": False}

    def on_progress(done: int, total: int, _text: str) -> None:
        progress.append((done, total))
        workers_seen.extend(p.pid for p in worker_processes())
        stop["asked"] = True  # stop after the first run

    def is_cancelled() -> bool:
        return stop["asked"]

    t0 = time.monotonic()
    try:
        with pytest.raises(ValidationCancelled, match="stopped"):
            validate_session(store, sid, top_k=2, runs=4, on_progress=on_progress, is_cancelled=is_cancelled)
        elapsed = time.monotonic() - t0
        assert progress == [(1, 4)]  # the first run ended, then nothing more was measured
        assert workers_seen, "the batch's other workers were running when the first run ended"
        assert worker_processes() == []  # all killed (and reaped: no zombie either)
        assert not any(
            psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
            for pid in workers_seen
        )
        assert store.validations(sid) == []
    finally:
        store.close()
    assert _rows(path) == before  # nothing stored anywhere
    print(f"\ncancelled validation returned after {elapsed:.1f} s")


def test_cancel_while_waiting_for_a_worker(finished_session, tmp_path):
    """A stop asked while a worker starts or measures: the wait notices it within a poll, not at the run's end."""
    src, sid = finished_session
    path = copy_database(src, tmp_path / "copy.sqlite")
    before = _rows(path)
    store = Store(path)
    asked_at: dict[str, float] = {}

    def is_cancelled() -> bool:
        # Asked once the workers exist (they are being started or measured): the wait must notice.
        if "t" not in asked_at and worker_processes():
            asked_at["t"] = time.monotonic()
        return "t" in asked_at

    try:
        with pytest.raises(ValidationCancelled):
            validate_session(store, sid, top_k=1, runs=2, is_cancelled=is_cancelled)
        noticed = time.monotonic() - asked_at["t"]
        assert noticed < 5.0, noticed
        assert worker_processes() == []
        assert store.validations(sid) == []
    finally:
        store.close()
    assert _rows(path) == before

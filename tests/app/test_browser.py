"""The session browser over a real store: rows, live updates, crashed sessions offered for Resume."""

from __future__ import annotations

import subprocess
import sys

from PySide6.QtCore import Qt

from tunelab.app.views.browser import COLUMNS, SessionBrowser
from tunelab.app.workers.store_watcher import StoreWatcher


def _cell(browser: SessionBrowser, row: int, column: str) -> str:
    index = browser.proxy.index(row, COLUMNS.index(column))
    return browser.proxy.data(index, Qt.ItemDataRole.DisplayRole)


def test_lists_every_session_with_its_numbers(qtbot, store):
    browser = SessionBrowser(store)
    qtbot.addWidget(browser)
    records = store.sessions()
    assert browser.proxy.rowCount() == len(records) == 2
    # newest first (sorted by id, descending)
    assert [int(_cell(browser, r, "ID")) for r in range(2)] == [r.id for r in records]
    for row, record in enumerate(records):
        assert _cell(browser, row, "Status") == "finished"
        assert _cell(browser, row, "Trials") == "8 / 8"
        assert _cell(browser, row, "Workload") == "gemm float32"
        assert _cell(browser, row, "Target").startswith("CPU")
        assert _cell(browser, row, "Tuner").startswith(record.tuner)
        figure, mark = _cell(browser, row, "Best ms").split()
        assert float(figure) > 0 and mark == "○"  # never confirmed: the session's own figure
        assert float(_cell(browser, row, "GFLOP/s")) > 0
    assert "2 sessions" in browser.summary.text()


def test_selecting_a_row_emits_the_session(qtbot, store):
    browser = SessionBrowser(store)
    qtbot.addWidget(browser)
    target = store.sessions()[-1].id
    with qtbot.waitSignal(browser.session_selected) as blocker:
        browser.select_session(target)
    assert blocker.args == [target]
    assert browser.selected_session() == target
    assert not browser.resume_button.isEnabled()  # finished: nothing to resume


def test_crashed_session_says_so_and_offers_resume(qtbot, store_copy):
    session_id = store_copy.sessions()[0].id
    # A "running" session whose process is gone is what a crash leaves behind.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store_copy.set_status(session_id, "running")
    store_copy.db.execute("UPDATE sessions SET pid = ? WHERE id = ?", (dead.pid, session_id))
    watcher = StoreWatcher(store_copy, interval_ms=50)
    browser = SessionBrowser(store_copy, watcher)
    qtbot.addWidget(browser)
    watcher.start()
    row = next(r for r in range(browser.proxy.rowCount()) if int(_cell(browser, r, "ID")) == session_id)
    assert _cell(browser, row, "Status") == "crashed — resumable"
    browser.select_session(session_id)
    assert browser.resume_button.isEnabled()
    with qtbot.waitSignal(browser.resume_requested) as blocker:
        browser.resume_button.click()
    assert blocker.args == [session_id]
    # the row follows the store: once finished again it is no longer offered
    store_copy.set_status(session_id, "finished")
    qtbot.waitUntil(lambda: _cell(browser, row, "Status") == "finished", timeout=3000)
    assert not browser.resume_button.isEnabled()
    watcher.stop()


def test_watcher_rereads_only_the_sessions_that_changed(qtbot, store_copy):
    import time

    from tunelab.core.records import NewTrial

    older, newer = sorted(r.id for r in store_copy.sessions())
    watcher = StoreWatcher(store_copy, interval_ms=50)
    browser = SessionBrowser(store_copy, watcher)
    qtbot.addWidget(browser)
    assert watcher.sessions() == store_copy.sessions()
    with qtbot.waitSignal(watcher.sessions_changed):  # the first read's news, told on the next turn
        pass
    assert watcher.changed_ids is None  # (everything)
    now = time.time()
    store_copy.add_trial(
        older,
        NewTrial(
            round=9,
            config={"new": 1},
            status="ok",
            error=None,
            samples_ms=(1e-6,),
            predicted_ms=None,
            build_s=0.1,
            run_s=0.1,
            started_at=now,
            finished_at=now,
        ),
        "new-1",
    )
    with qtbot.waitSignal(watcher.sessions_changed):
        watcher.poll()
    assert watcher.changed_ids == {older}  # the other session was not read again
    assert watcher.sessions() == store_copy.sessions()
    row = next(r for r in range(browser.proxy.rowCount()) if int(_cell(browser, r, "ID")) == older)
    assert _cell(browser, row, "Trials") == "9 / 8" and _cell(browser, row, "Best ms") == "1e-06 ○"

    time.sleep(0.01)
    store_copy.heartbeat(newer)  # a write to the session row
    with qtbot.waitSignal(watcher.sessions_changed):
        watcher.poll()
    assert watcher.changed_ids == {newer}
    store_copy.delete_session(newer)
    with qtbot.waitSignal(watcher.sessions_changed):
        watcher.poll()
    assert watcher.changed_ids == {newer} and [r.id for r in watcher.sessions()] == [older]
    assert browser.proxy.rowCount() == 1

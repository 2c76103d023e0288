"""The app's one owner of engine work (tunelab.app.workers.engine) with real `tunelab` child processes: a
tuning child's session id, stage, trials and error reach the GUI from the child's events; so do the bias
report's result and error."""

from __future__ import annotations

import os
import signal
from dataclasses import replace

import pytest

from tunelab.app.workers.engine import BiasWorker, TuningWorker
from tunelab.core.records import BiasReport
from tunelab.core.store import Store

pytestmark = pytest.mark.slow

TUNE_TIMEOUT_MS = 300_000


class Heard:
    """Everything a TuningWorker said, in the order it said it."""

    def __init__(self, worker: TuningWorker) -> None:
        self.log: list[tuple[str, object]] = []
        worker.session_ready.connect(lambda sid: self.log.append(("session", sid)))
        worker.stage.connect(lambda text: self.log.append(("stage", text)))
        worker.trial_done.connect(lambda trial: self.log.append(("trial", trial.id)))
        worker.failed.connect(lambda message, details: self.log.append(("failed", (message, details))))

    def of(self, kind: str) -> list[object]:
        return [value for k, value in self.log if k == kind]


def _empty_store(tmp_path) -> str:
    path = tmp_path / "engine.sqlite"
    Store(path).close()
    return str(path)


def test_a_tuning_child_reports_its_session_stage_and_trials(qtbot, tmp_path, small_spec):
    db = _empty_store(tmp_path)
    spec = small_spec(
        trials=4,
        batch=4,
        measure=replace(small_spec().measure, confirm_runs=1, confirm_top=1, confirm_max_s=0),
    )
    worker = TuningWorker(db, spec=spec)
    heard = Heard(worker)
    with qtbot.waitSignal(worker.finished, timeout=TUNE_TIMEOUT_MS):
        worker.start()
    qtbot.waitUntil(lambda: len(heard.of("trial")) == 4 and bool(heard.of("stage")), timeout=10_000)
    assert heard.of("failed") == []
    assert heard.log[0] == ("session", 1) and worker.session_id == 1  # before the first trial
    with Store(db) as store:
        assert heard.of("trial") == [t.id for t in store.trials(1)]
        assert store.session(1).status == "finished"
    (stage,) = heard.of("stage")
    assert str(stage).startswith("confirming the 1 fastest schedule")


def test_a_tuning_childs_error_is_its_error_event(qtbot, tmp_path, small_spec):
    db = _empty_store(tmp_path)
    worker = TuningWorker(db, spec=small_spec(trials=0))
    heard = Heard(worker)
    with qtbot.waitSignal(worker.finished, timeout=TUNE_TIMEOUT_MS):
        worker.start()
    qtbot.waitUntil(lambda: bool(heard.of("failed")), timeout=10_000)
    ((message, details),) = heard.of("failed")
    assert message == "--trials: the trial budget must be at least 1, not 0"
    assert details.strip() == f"tunelab: error: {message}"  # stderr: the details only
    assert heard.of("session") == [] and worker.session_id is None


def test_a_tuning_child_that_dies_is_said_in_words(qtbot, tmp_path, small_spec):
    db = _empty_store(tmp_path)
    worker = TuningWorker(db, spec=small_spec(trials=64, batch=2))
    heard = Heard(worker)
    worker.start()
    qtbot.waitUntil(lambda: worker.n_yielded >= 1, timeout=TUNE_TIMEOUT_MS)
    os.kill(worker._child.pid, signal.SIGKILL)  # no error event, no done event: only its exit status
    qtbot.waitUntil(lambda: not worker.isRunning(), timeout=60_000)
    qtbot.waitUntil(lambda: bool(heard.of("failed")), timeout=10_000)
    ((message, _details),) = heard.of("failed")
    assert message.startswith("the tuning process died of SIGKILL (killed from outside"), message


def test_the_bias_report_comes_from_a_child(qtbot, tuned_db):
    worker = BiasWorker(tuned_db, [1, 2], 5)
    results: list[object] = []
    worker.succeeded.connect(results.append)
    worker.failed.connect(lambda message, details: results.append((message, details)))
    with qtbot.waitSignal(worker.finished, timeout=120_000):
        worker.start()
    qtbot.waitUntil(lambda: bool(results), timeout=10_000)
    (report,) = results
    assert isinstance(report, BiasReport) and report.session_ids == (1, 2)


def test_the_bias_reports_error_is_its_error_event(qtbot, tmp_path):
    worker = BiasWorker(_empty_store(tmp_path), [42], 5)
    failures: list[tuple[str, str]] = []
    worker.failed.connect(lambda message, details: failures.append((message, details)))
    with qtbot.waitSignal(worker.finished, timeout=120_000):
        worker.start()
    qtbot.waitUntil(lambda: bool(failures), timeout=10_000)
    ((message, details),) = failures
    assert "42" in message and not message.startswith("tunelab:")
    assert details.strip() == f"tunelab: error: {message}"

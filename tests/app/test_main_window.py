"""The main window driven like a person would: New session -> Start -> a finished session, pause,
resume, stop, close while tuning, errors as messages, export, settings, shortcuts."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QMessageBox

from app.main_window import MainWindow
from app.new_session import NewSessionDialog
from core.records import SessionRecord
from core.store import Store

TUNE_TIMEOUT_MS = 120_000


def _window(qtbot, store, settings, **kwargs) -> MainWindow:
    window = MainWindow(store, settings, poll_ms=100, probe_target=False, **kwargs)
    qtbot.addWidget(window)
    window.show()
    return window


def _record(window: MainWindow, session_id: int) -> SessionRecord:
    return window.store.session(session_id)


def _wait_idle(qtbot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: window.worker is None, timeout=TUNE_TIMEOUT_MS)


def test_new_session_dialog_to_finished_session_then_export(qtbot, store_copy, settings, tmp_path):
    window = _window(qtbot, store_copy, settings)
    before = {r.id for r in store_copy.sessions()}

    def fill_and_start() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, NewSessionDialog)
        for name, value in {"M": 32, "N": 32, "K": 32}.items():
            dialog._shape_spins[name].setValue(value)
        dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
        dialog._on_problem_changed()
        dialog.tuner_combo.setCurrentIndex(dialog.tuner_combo.findData("random"))
        dialog.trials_spin.setValue(8)
        dialog.batch_spin.setValue(4)
        dialog.number_spin.setValue(1)
        dialog.repeat_spin.setValue(2)
        dialog.min_repeat_spin.setValue(1)
        assert dialog.can_start()
        dialog.start_button.click()

    QTimer.singleShot(0, fill_and_start)
    window.new_action.trigger()  # opens the modal dialog; the timer above clicks Start
    assert window.worker is not None
    assert not window.new_action.isEnabled()
    _wait_idle(qtbot, window)

    (new_id,) = {r.id for r in store_copy.sessions()} - before
    record = _record(window, new_id)
    assert record.status == "finished" and record.n_trials == 8 and record.tuner == "random"
    assert window.session_id == new_id
    qtbot.waitUntil(lambda: window.live.n_trials == 8, timeout=5000)
    assert window.trials.model.rowCount() == 8
    assert window.message_bar.level == "info" and f"Session {new_id} finished" in window.message_bar.text
    assert window.run_bar.progress.value() == 8

    out = tmp_path / "export"
    worker = window.export_trial(new_id, None, str(out), ("schedule", "tvmscript"))
    assert worker is not None
    qtbot.waitUntil(lambda: window.export_worker is None, timeout=60_000)
    assert window.message_bar.level == "info", window.message_bar.text
    assert "Exported" in window.message_bar.text
    assert list(out.glob("*.schedule.json")) and list(out.glob("*.py"))


def test_pause_resume_and_stop(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    worker = window.start_session(small_spec(trials=40, batch=2))
    qtbot.waitUntil(lambda: worker.n_yielded >= 1, timeout=TUNE_TIMEOUT_MS)
    session_id = worker.session_id
    assert window.pause_action.isEnabled() and window.stop_action.isEnabled()

    window.pause_action.trigger()
    assert window.pause_action.text() == "Resume tuning"
    qtbot.waitUntil(lambda: _record(window, session_id).status == "paused", timeout=TUNE_TIMEOUT_MS)
    paused_at = _record(window, session_id).n_trials
    qtbot.wait(600)
    assert _record(window, session_id).n_trials == paused_at  # nothing measured while paused

    window.pause_action.trigger()
    assert window.pause_action.text() == "Pause"
    qtbot.waitUntil(lambda: _record(window, session_id).n_trials > paused_at, timeout=TUNE_TIMEOUT_MS)

    window.stop_action.trigger()
    assert not window.stop_action.isEnabled()
    _wait_idle(qtbot, window)
    record = _record(window, session_id)
    assert record.status == "cancelled"
    assert record.n_trials < 40
    assert window.new_action.isEnabled()


def test_resume_a_cancelled_session_from_the_browser(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    worker = window.start_session(small_spec(trials=6, batch=2))
    worker.cancel()  # before the first batch: stops at once
    _wait_idle(qtbot, window)
    session_id = worker.session_id
    assert _record(window, session_id).status == "cancelled"
    window.browser.refresh()
    window.browser.select_session(session_id)
    assert window.browser.resume_button.isEnabled() and window.resume_action.isEnabled()
    window.browser.resume_button.click()
    assert window.worker is not None
    _wait_idle(qtbot, window)
    record = _record(window, session_id)
    assert record.status == "finished" and record.n_trials == 6


def test_closing_while_tuning_asks_and_stops_cooperatively(qtbot, store_copy, settings, monkeypatch, small_spec):
    window = _window(qtbot, store_copy, settings)
    asked = []

    def answer(*args, **kwargs):
        asked.append(args)
        return QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QMessageBox, "question", answer)
    worker = window.start_session(small_spec(trials=40, batch=2))
    qtbot.waitUntil(lambda: worker.n_yielded >= 1, timeout=TUNE_TIMEOUT_MS)
    session_id = worker.session_id
    assert window.close() is False  # not yet: it stops after the current batch first
    assert asked and window.isVisible()
    _wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    assert _record(window, session_id).status == "cancelled"


def test_core_errors_are_messages_not_crashes(qtbot, store_copy, settings, small_spec):
    window = _window(qtbot, store_copy, settings)
    window.start_session(small_spec(shape={"M": 0, "N": 32, "K": 32}))
    _wait_idle(qtbot, window)
    assert window.message_bar.level == "error"
    assert "'M' must be at least 1" in window.message_bar.text
    window.resume_session(99_999)  # a session that is not there
    _wait_idle(qtbot, window)
    assert window.message_bar.level == "error" and "99999" in window.message_bar.text


def test_settings_and_shortcuts(qtbot, store, settings):
    window = _window(qtbot, store, settings)
    assert window.new_action.shortcut() == QKeySequence(QKeySequence.StandardKey.New)
    assert window.export_action.shortcut() == QKeySequence("Ctrl+E")
    assert window.pause_action.shortcut() == QKeySequence("Space")
    assert QKeySequence("Ctrl+W") in window.close_action.shortcuts()
    assert window.quit_action.shortcut() == QKeySequence("Ctrl+Q")
    window.resize(700, 560)
    window.tabs.setCurrentWidget(window.compare)
    window.close()
    again = _window(qtbot, store, settings)
    assert (again.size().width(), again.size().height()) == (700, 560)
    assert again.tabs.currentWidget() is again.compare
    again.close()


def test_export_without_a_selection_is_disabled(qtbot, store, settings):
    window = _window(qtbot, store, settings)
    assert not window.export_action.isEnabled()
    window.browser.select_session(store.sessions()[0].id)
    assert window.export_action.isEnabled()


def test_main_opens_the_window_on_the_given_store(qtbot, tuned_db, monkeypatch):
    from app import main as app_main

    opened = []

    def close_soon() -> None:
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, MainWindow) and widget.isVisible():
                opened.append(Path(widget.store.path))
                widget.close()

    QTimer.singleShot(300, close_soon)
    assert app_main.main(str(tuned_db), argv=[]) == 0
    assert opened == [Path(tuned_db)]


def test_main_reports_a_store_it_cannot_open(qtbot, tmp_path, monkeypatch, capsys):
    from app import main as app_main

    bad = tmp_path / "not-a-db.sqlite"
    bad.write_text("hello")
    monkeypatch.setattr(QMessageBox, "critical", lambda *a, **k: QMessageBox.StandardButton.Ok)
    assert app_main.main(argv=["--db", str(bad)]) == 2
    assert "not a tunelab database" in capsys.readouterr().err
    Store  # noqa: B018 - the import documents what main opens

"""The main window's settings and closing: its geometry and tab kept between runs, and a close that asks
about a session still tuning and waits for the workers still running."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QMessageBox

from tunelab.app.views.jitter_view import JitterView
from tunelab.app.views.validation.view import ValidationView
from tunelab.app.window_tuning import TuningWindow
from tunelab.app.workers.engine import CallWorker, running_workers


class ClosingWindow(TuningWindow):
    """Settings and closing (MainWindow.__init__ sets what is declared here)."""

    settings: QSettings
    _probe: CallWorker | None
    validation: ValidationView
    jitter: JitterView

    def last_folder(self) -> str:
        return str(self.settings.value("paths/last_folder", str(Path.home())))

    def _restore_settings(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(1320, 860)
        state = self.settings.value("window/state")
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.restoreState(state)
        tab = self.settings.value("window/tab", 0)
        if isinstance(tab, int | str) and str(tab).isdigit():  # QSettings' INI files give it back as text
            self.tabs.setCurrentIndex(int(tab))

    def _save_settings(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.setValue("window/tab", self.tabs.currentIndex())
        self.settings.sync()

    def _ask_close_while_tuning(self) -> str:
        """'stop' (after the current batch, then close), 'leave' (close; the session tunes on) or 'cancel'."""
        assert self.worker is not None
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Session still tuning",
            f"Session {self.worker.session_id} is still tuning.\n\n"
            "Stop it after the current batch and close, or close and leave it running: it keeps storing "
            f"its trials in {self.store.path.name}, and the next tunelab window follows it and can pause "
            "or stop it.",
            QMessageBox.StandardButton.NoButton,
            self,
        )
        stop = box.addButton(QMessageBox.StandardButton.Yes)
        stop.setText("Stop and close")
        leave = box.addButton("Leave it running", QMessageBox.ButtonRole.AcceptRole)
        leave.setObjectName("leave_running")
        cancel = box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(cancel)
        box.setEscapeButton(cancel)
        box.exec()
        clicked = box.clickedButton()
        box.deleteLater()
        return "stop" if clicked is stop else "leave" if clicked is leave else "cancel"

    def _leave_session_running(self) -> None:
        """Let the tuning child go on by itself; this window stops following it."""
        worker, self.worker = self.worker, None
        assert worker is not None
        worker.finished.disconnect(self._on_worker_finished)
        worker.leave_running()
        worker.wait(10_000)  # the thread ends within its poll interval; the child does not
        worker.deleteLater()
        self.browser.set_active_session(None)
        self.run_bar.clear_stage()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        if self.worker is not None:
            if not self._close_pending:
                answer = self._ask_close_while_tuning()
                if answer == "cancel":
                    event.ignore()
                    return
                # The question runs its own event loop: the session may have finished meanwhile
                # (self.worker is None then), and either answer means close now.
                if self.worker is not None and answer == "leave":
                    self._leave_session_running()
                elif self.worker is not None:
                    self._close_pending = True
                    self.worker.cancel()
                    self.message_bar.show_info(
                        "Stopping the session after the current batch; the window closes once it has stopped."
                    )
                    self._update_actions()
            if self.worker is not None:
                event.ignore()
                return
        if self.export_worker is not None:
            self._close_pending = True
            event.ignore()
            return
        if self.validation.running or self.jitter.running:
            if not self._close_pending:
                self._close_pending = True
                self.validation.stop()
                self.jitter.stop()
                self.message_bar.show_info("Closing once the validation has finished its current step.")
            event.ignore()
            return
        if self._probe is not None and self._probe.isRunning():
            self._probe.wait(30_000)
        for worker in running_workers():  # quick readers (bias table, vendor & roofline figures)
            worker.wait(30_000)
        self.watcher.stop()
        self._run_bar_timer.stop()  # a refresh after close would read a store its owner may close next
        self._save_settings()
        event.accept()

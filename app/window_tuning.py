"""The main window's tuning run: one tuning worker at a time, and Pause / Stop for it or for a session
another tunelab process tunes."""

from __future__ import annotations

import signal

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QTabWidget

from tunelab.app.resources import icon
from tunelab.app.views.browser import SessionBrowser, is_resumable
from tunelab.app.widgets.formatting import fmt_gflops, fmt_ms
from tunelab.app.widgets.message_bar import MessageBar
from tunelab.app.widgets.run_bar import RunBar
from tunelab.app.workers.engine import CallWorker, TuningWorker, runner_pid, signal_runner
from tunelab.app.workers.store_watcher import StoreWatcher
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store
from tunelab.core.usecases.export import KIND_WORDS


class TuningWindow(QMainWindow):
    """The tuning worker's part of the main window (MainWindow.__init__ sets what is declared here)."""

    store: Store
    session_id: int | None
    worker: TuningWorker | None
    export_worker: CallWorker | None
    _close_pending: bool
    _stop_sent: set[int]  # sessions of other processes asked to stop
    _shown_paused: bool
    watcher: StoreWatcher
    browser: SessionBrowser
    message_bar: MessageBar
    run_bar: RunBar
    _run_bar_timer: QTimer
    tabs: QTabWidget
    new_action: QAction
    resume_action: QAction
    pause_action: QAction
    stop_action: QAction
    export_action: QAction
    save_plot_action: QAction

    def _update_actions(self) -> None:
        worker = self.worker
        running = worker is not None
        # this window's own child tunes the session shown
        ours = (
            worker
            if worker is not None and self.session_id is not None and worker.session_id == self.session_id
            else None
        )
        steerable = ours is not None and not ours.cancelled
        self.new_action.setEnabled(not running)
        record = self.browser.record(self.session_id) if self.session_id is not None else None
        self.resume_action.setEnabled(not running and record is not None and is_resumable(record))
        # A session another tunelab process tunes (a `tunelab tune` run, one a closed window left
        # running) is steered with the same signals this window's own child gets.
        other = self._other_runner()
        # Pause takes effect between batches: offered only while one is ahead (not while the winners are
        # confirmed after the last one), and always to resume a paused session.
        can_pause = self._batch_ahead() or self.pause_action.text() != "Pause"
        self.pause_action.setEnabled((steerable or other is not None) and can_pause)
        self.stop_action.setEnabled(steerable or other is not None)
        if ours is not None:
            paused = bool(ours.paused)
        else:
            paused = other is not None and other.status == "paused"
        if paused != self._shown_paused:  # (a new icon each time would repaint the toolbar each time)
            self._shown_paused = paused
            self.pause_action.setText("Resume tuning" if paused else "Pause")
            self.pause_action.setIcon(icon("resume" if paused else "pause"))
        self.export_action.setEnabled(
            record is not None and record.best_trial_id is not None and self.export_worker is None
        )
        self.save_plot_action.setEnabled(hasattr(self.tabs.currentWidget(), "exportable"))

    def _on_trial_done(self, trial) -> None:
        if trial.session_id == self.session_id:
            self._schedule_run_bar()

    def _schedule_run_bar(self) -> None:
        if not self._run_bar_timer.isActive():
            self._run_bar_timer.start()

    def _batch_ahead(self) -> bool:
        """Whether the shown session has trials left to tune (unknown: yes)."""
        record = self.watcher.session(self.session_id) if self.session_id is not None else None
        return record is None or record.n_trials < record.trials_budget

    def _pending(self) -> str:
        """What this window asked the shown session's tuning for ("pause", "stop"; the run bar says it
        until the session's status shows it done)."""
        w = self.worker
        if w is None or w.session_id != self.session_id:
            return ""
        if w.cancelled:
            return "stop"
        if w.paused:
            return "pause"
        return ""

    def _other_runner(self) -> SessionRecord | None:
        """The shown session's record when another tunelab process tunes it (not this window)."""
        if self.session_id is None or (self.worker is not None and self.worker.session_id == self.session_id):
            return None
        record = self.watcher.session(self.session_id)  # (the browser's copy is one poll behind here)
        if record is None or record.id in self._stop_sent:
            return None
        return record if runner_pid(record) is not None else None

    def _signal_other_runner(self, record: SessionRecord, signum: int, doing: str) -> None:
        try:
            signal_runner(record, signum)
        except TunelabError as exc:
            self.message_bar.show_error(str(exc))
            return
        self.message_bar.show_info(f"Session {record.id} (pid {record.pid}) {doing} after its current batch.")

    def _on_pause_toggled(self) -> None:
        other = self._other_runner()
        if other is not None:
            if other.status == "paused":
                self._signal_other_runner(other, signal.SIGUSR2, "resumes")
            else:
                self._signal_other_runner(other, signal.SIGUSR1, "pauses")
            return
        w = self.worker
        if w is None or w.cancelled:
            return
        if w.paused:
            w.resume()
        else:
            w.pause()
        self._update_actions()
        self.run_bar.refresh(pending=self._pending())

    def _on_stop(self) -> None:
        other = self._other_runner()
        if other is not None:
            self._stop_sent.add(other.id)  # (its status changes once it has stopped)
            self._signal_other_runner(other, signal.SIGTERM, "stops")
            self._update_actions()
            return
        if self.worker is not None:
            self.worker.cancel()
            self._update_actions()
            self.run_bar.refresh(pending=self._pending())

    def _on_stage(self, text: str) -> None:
        if self.worker is not None:
            self.run_bar.set_stage(self.worker.session_id, text)

    def _on_worker_failed(self, message: str, details: str) -> None:
        self.message_bar.show_error(message, details)

    def _on_worker_finished(self) -> None:
        worker, self.worker = self.worker, None
        session_id = worker.session_id if worker is not None else None
        if worker is not None:
            worker.deleteLater()
        self.browser.set_active_session(None)
        self.run_bar.clear_stage()
        self.watcher.poll()
        if session_id is not None and self.message_bar.level != "error":
            try:
                r = self.store.session(session_id)
                self.browser.stated.refresh([r])
                stated = self.browser.stated.stated(r.id)  # the one best the list and an export state
                best = (
                    f"best {fmt_ms(r.best_ms)} ms ({fmt_gflops(r.best_gflops)} GFLOP/s)"
                    if stated is None
                    else f"best {fmt_ms(stated.ms)} ms {stated.mark} ({fmt_gflops(stated.gflops)} GFLOP/s, "
                    f"{KIND_WORDS[stated.kind]})"
                )
                self.message_bar.show_info(
                    f"Session {r.id} {r.status}: {r.n_trials} trials, {best}.", about=r.id
                )
            except TunelabError:
                pass
        self.run_bar.refresh()
        self._update_actions()
        if self._close_pending:
            self.close()

"""The main window: the session browser above, the views of the selected session below, one tuning
worker at a time, and everything a person expects from a desktop window (shortcuts, settings)."""

from __future__ import annotations

import gc
import os
import signal
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from tunelab.app.dialogs.export_dialog import ExportDialog, export_formats
from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.app.resources import icon
from tunelab.app.views.browser import SessionBrowser, is_resumable, target_text
from tunelab.app.views.compare import CompareView
from tunelab.app.views.costmodel_view import CostModelView
from tunelab.app.views.hardware_view import HardwareView
from tunelab.app.views.jitter_view import JitterView
from tunelab.app.views.live_plot import LivePlot
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.app.views.validation.view import ValidationView
from tunelab.app.widgets.buffers import n_rows
from tunelab.app.widgets.formatting import fmt_gflops, fmt_ms
from tunelab.app.widgets.message_bar import MessageBar
from tunelab.app.widgets.plot_export import PLOT_FILTER, plot_title, save_plot
from tunelab.app.widgets.run_bar import RunBar
from tunelab.app.workers import tvm_loader
from tunelab.app.workers.engine import CallWorker, TuningWorker, runner_pid, running_workers, signal_runner
from tunelab.app.workers.store_watcher import StoreWatcher
from tunelab.core.errors import TunelabError
from tunelab.core.export.pick import export_pick
from tunelab.core.export.stated import KIND_WORDS
from tunelab.core.records import SessionRecord, SessionSpec
from tunelab.core.store import Store
from tunelab.core.trust.confirmed import confirmations


def _export(
    store: Store,
    session_id: int,
    trial_id: int | None,
    out_dir: str,
    formats: tuple[str, ...],
    robust: bool = False,
) -> dict:
    from tunelab.core.export.files import export_trial

    return export_trial(store, session_id, trial_id, out_dir=out_dir, formats=formats, robust=robust)


def settle_heap(collect: bool = True) -> None:
    """Take what is alive out of the cyclic garbage collector's reach (gc.freeze), after one full
    collection when ``collect`` (not while a session tunes: that collection is itself a stall).

    With TVM imported and a 100k-trial session open, one full collection walks ~230k tracked objects
    and took 170 ms on the GUI thread: a stall while tuning whenever the collector's turn came. Done
    at moments that are busy anyway (start-up, opening a session), the collection frees what the
    previous session left, and later collections skip the frozen heap.
    """
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def _probe_target(_store: Store) -> str:
    # Also warms the TVM import so that the New-session dialog opens at once. The tuning loop
    # (tunelab.core.session.loop) is never imported here: sessions are created and tuned in a child process.
    from tunelab.core.target.info import resolve_target

    return resolve_target("auto").description


RUN_BAR_MS = 150  # a batch's trial reports refresh the run bar once


class MainWindow(QMainWindow):
    def __init__(
        self,
        store: Store,
        settings: QSettings | None = None,
        poll_ms: int = 500,
        probe_target: bool = True,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        # Before any view or worker exists: TVM is imported once, on its own thread (tvm_loader).
        tvm_loader.start()
        self.store = store
        self.settings = settings if settings is not None else QSettings()
        self.worker: TuningWorker | None = None
        self.export_worker: CallWorker | None = None
        self._probe: CallWorker | None = None
        self.import_worker: CallWorker | None = None  # the last import started (File → Import)
        self._close_pending = False
        self._stop_sent: set[int] = set()  # sessions of other processes asked to stop
        self.session_id: int | None = None
        self._last_trial_id = 0  # the shown session's trials are read up to here
        self._shown_paused = False
        self.setWindowTitle(f"tunelab — {store.path.name}")
        self.setWindowIcon(icon("tunelab"))

        self.watcher = StoreWatcher(store, poll_ms, self)
        self.watcher.trials_added.connect(self._on_trials_added)
        self.watcher.sessions_changed.connect(self._on_sessions_changed)
        self.watcher.failed.connect(self._on_error)

        self._make_actions()
        self.message_bar = MessageBar()
        self.browser = SessionBrowser(store, self.watcher)
        self.browser.session_selected.connect(self._on_session_selected)
        self.browser.resume_requested.connect(self._on_resume_session)
        dock = QDockWidget("Sessions", self)
        dock.setObjectName("SessionsDock")
        dock.setWidget(self.browser)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        self.addDockWidget(Qt.DockWidgetArea.TopDockWidgetArea, dock)
        self.resizeDocks([dock], [210], Qt.Orientation.Vertical)
        self.sessions_dock = dock

        self.live = LivePlot(store)
        self.costmodel = CostModelView(store)
        self.trials = TrialsTable(store)
        self.compare = CompareView(store)
        self.hardware = HardwareView(store)
        self.validation = ValidationView(store)
        self.jitter = JitterView(store)
        self.live.trial_clicked.connect(self._on_trial_clicked)
        self.live.failed.connect(self._on_error)
        self.compare.selection_changed.connect(self.costmodel.set_compare_sessions)
        self.validation.failed.connect(self._on_error)
        self.validation.finished.connect(self._on_validation_finished)
        self.jitter.failed.connect(self._on_error)
        self.jitter.finished.connect(self._on_validation_finished)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.live, "Live")
        self.tabs.addTab(self.costmodel, "Cost model")
        self.tabs.addTab(self.trials, "Trials")
        self.tabs.addTab(self.compare, "Compare")
        self.tabs.addTab(self.hardware, "Hardware")
        self.tabs.addTab(self.validation, "Validation")
        self.tabs.addTab(self.jitter, "Jitter")
        self.tabs.currentChanged.connect(self._update_actions)

        self.run_bar = RunBar(store, self.pause_action, self.stop_action)
        # The worker reports each trial, a batch's worth at once: the run bar (a store read and a
        # repaint) is refreshed once for them, a moment later, not once per trial.
        self._run_bar_timer = QTimer(self)
        self._run_bar_timer.setSingleShot(True)
        self._run_bar_timer.setInterval(RUN_BAR_MS)
        self._run_bar_timer.timeout.connect(lambda: self.run_bar.refresh(pending=self._pending()))
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.message_bar)
        layout.addWidget(self.run_bar)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        # The selected session's target, in the browser's words; this machine's default one (the probe's)
        # only while no session is selected.
        self._default_target = "detecting…" if probe_target else "not probed"
        self._shown_record: SessionRecord | None = None
        self.target_label = QLabel()
        self.statusBar().addPermanentWidget(self.target_label)
        self._show_target()
        self.statusBar().showMessage(f"Store: {store.path}")

        self._restore_settings()
        self._update_actions()
        self.watcher.poll()
        self.watcher.start()
        if probe_target:
            self._probe = CallWorker(store.path, _probe_target, parent=self)
            self._probe.succeeded.connect(self._on_default_target)
            # TVM's modules are imported by now
            self._probe.finished.connect(lambda: settle_heap(collect=self.worker is None))
            self._probe.failed.connect(lambda msg, _d: self._on_default_target(msg))
            self._probe.start()

    def _on_default_target(self, text: str) -> None:
        self._default_target = text
        self._show_target()  # TVM is imported now: a session's target gains its ISA level too

    def _show_target(self) -> None:
        record = self._shown_record
        if record is None:
            self.target_label.setText(f"Default target: {self._default_target}")
            self.target_label.setToolTip("The target a new session gets on this machine (auto)")
        else:
            self.target_label.setText(f"Target: {target_text(record)}")
            self.target_label.setToolTip(f"The target session {record.id} was tuned for")

    # ---- actions -------------------------------------------------------------------------------
    def _make_actions(self) -> None:
        def action(text: str, slot, shortcut=None, icon_name: str | None = None, tip: str = "") -> QAction:
            a = QAction(icon(icon_name) if icon_name else QIcon(), text, self)
            if isinstance(shortcut, list):
                a.setShortcuts([QKeySequence(k) for k in shortcut])
            elif shortcut is not None:
                a.setShortcut(QKeySequence(shortcut))
            a.setToolTip(tip or text)
            a.triggered.connect(slot)
            self.addAction(a)
            return a

        self.new_action = action(
            "New session…",
            self._on_new_session,
            QKeySequence.StandardKey.New,
            "new",
            "Start a new tuning session (Ctrl+N)",
        )
        self.resume_action = action(
            "Resume session",
            self._on_resume_selected,
            None,
            "resume",
            "Continue the selected stopped or crashed session",
        )
        self.pause_action = action(
            "Pause",
            self._on_pause_toggled,
            Qt.Key.Key_Space,
            "pause",
            "Pause or resume tuning after the current batch (Space)",
        )
        self.stop_action = action("Stop", self._on_stop, None, "stop", "Stop tuning after the current batch")
        self.export_action = action(
            "Export…", self._on_export, "Ctrl+E", "export", "Export the best (or the selected) trial (Ctrl+E)"
        )
        self.save_plot_action = action(
            "Save plot…",
            self._on_save_plot,
            "Ctrl+Shift+S",
            "save-plot",
            "Save the current view's plots as PNG or SVG",
        )
        self.import_action = action(
            "Import MetaSchedule run…",
            lambda: self.import_run(),
            None,
            None,
            "Read a tune_tir / tune_relax work folder (its JSON database) into sessions",
        )
        self.refresh_action = action("Refresh", self._on_refresh, QKeySequence.StandardKey.Refresh, "refresh")
        self.close_action = action("Close window", self.close, ["Ctrl+W", "Ctrl+F4"])
        self.quit_action = action("Quit", self.close, "Ctrl+Q")

        toolbar = QToolBar("Main")
        toolbar.setObjectName("MainToolbar")
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        for a in (self.new_action, self.resume_action, self.pause_action, self.stop_action):
            toolbar.addAction(a)
        toolbar.addSeparator()
        for a in (self.export_action, self.save_plot_action, self.refresh_action):
            toolbar.addAction(a)
        self.addToolBar(toolbar)
        self.toolbar = toolbar

        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        for a in (self.new_action, self.export_action, self.save_plot_action):
            file_menu.addAction(a)
        file_menu.addAction(self.import_action)
        file_menu.addSeparator()
        file_menu.addAction(self.close_action)
        file_menu.addAction(self.quit_action)
        session_menu = menu.addMenu("&Session")
        for a in (self.resume_action, self.pause_action, self.stop_action, self.refresh_action):
            session_menu.addAction(a)

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

    # ---- tuning --------------------------------------------------------------------------------
    def new_session_dialog(self) -> NewSessionDialog:
        return NewSessionDialog(self.settings, self)

    def start_session(self, spec: SessionSpec) -> TuningWorker | None:
        """Create and tune a session from `spec` in a child process (watched by a worker thread)."""
        return self._start_worker(TuningWorker(self.store.path, spec=spec, parent=self))

    def resume_session(self, session_id: int) -> TuningWorker | None:
        return self._start_worker(TuningWorker(self.store.path, session_id=session_id, parent=self))

    def _start_worker(self, worker: TuningWorker) -> TuningWorker | None:
        if self.worker is not None:
            self.message_bar.show_error(
                "A session is already tuning in this window; stop it first "
                "(more can run side by side from the command line: tunelab tune)."
            )
            worker.deleteLater()
            return None
        self.worker = worker
        worker.session_ready.connect(self._on_session_ready)
        worker.trial_done.connect(self._on_trial_done)
        worker.stage.connect(self._on_stage)
        worker.failed.connect(self._on_worker_failed)
        worker.finished.connect(self._on_worker_finished)
        self.message_bar.hide()
        # At once: the child takes seconds (importing TVM, creating the session) before it says anything.
        self.run_bar.set_starting("Starting the tuning process…")
        worker.start()
        self._update_actions()
        return worker

    def _on_new_session(self) -> None:
        if self.worker is not None:
            self.message_bar.show_error("A session is already tuning in this window; stop it first.")
            return
        try:
            dialog = self.new_session_dialog()
        except Exception as exc:  # noqa: BLE001 - e.g. TVM missing: a message, not a crash
            self._on_error(f"Cannot open the New-session dialog: {exc}")
            return
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.start_session(dialog.spec())
        dialog.deleteLater()

    def _on_resume_selected(self) -> None:
        if self.session_id is not None:
            self._on_resume_session(self.session_id)

    def _on_resume_session(self, session_id: int) -> None:
        self.resume_session(session_id)

    def _on_session_ready(self, session_id: int) -> None:
        self.run_bar.clear_stage()  # (the "starting" note: the run bar shows the session itself now)
        self.browser.set_active_session(session_id)
        self.browser.select_session(session_id)
        if self.session_id != session_id:
            self._on_session_selected(session_id)
        self.tabs.setCurrentWidget(self.live)
        self._update_actions()

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

    # ---- views ---------------------------------------------------------------------------------
    def _on_session_selected(self, session_id: int) -> None:
        self.session_id = None if session_id < 0 else session_id
        record = columns = None
        self._last_trial_id = 0
        if self.session_id is not None:
            # One read of the trials, as NumPy columns, shared by every view that shows them (no
            # record or config per trial: the trials table decodes a config when it shows the row).
            record = self.browser.record(self.session_id) or self.store.session(self.session_id)
            columns = self.store.trial_columns(self.session_id)
            if n_rows(columns):
                self._last_trial_id = int(columns["id"][-1])
        for view in (self.live, self.costmodel, self.trials, self.hardware, self.run_bar):
            view.set_session(record, columns=columns)
        self._shown_record = record
        self._show_stated()
        self._show_target()
        self.message_bar.session_shown(self.session_id)
        self.validation.set_session(self.session_id)
        self.jitter.set_session(self.session_id)
        if self.session_id is not None and not self.compare.checked():
            self.compare.set_checked([self.session_id])
        self.costmodel.set_compare_sessions(self.compare.checked())
        self._update_actions()
        settle_heap(collect=self.worker is None)

    def _on_trials_added(self, _max_id: int) -> None:
        if self.session_id is None:
            return
        # The new trials of the shown session, read once for every view.
        try:
            batch = self.store.trial_columns(self.session_id, since_id=self._last_trial_id)
        except TunelabError as exc:
            self._on_error(str(exc))
            return
        if not n_rows(batch):
            self.hardware.add(batch)  # its telemetry may still have grown
            return
        self._last_trial_id = int(batch["id"][-1])
        for view in (self.live, self.costmodel, self.trials, self.hardware, self.run_bar):
            view.add(batch)
        self._schedule_run_bar()

    def _on_sessions_changed(self) -> None:
        # The watcher's read, shared; the run bar only when its session is among those that changed.
        self.compare.refresh_sessions(self.watcher.sessions())
        changed = self.watcher.changed_ids
        if self.session_id is not None and (changed is None or self.session_id in changed):
            record = self.watcher.session(self.session_id)
            self.run_bar.refresh(pending=self._pending(), record=record)
            self.validation.session_updated(record)
        self._show_stated()

    def _show_stated(self) -> None:
        """The shown session's confirmed figure in the Live header (read again only when its validations
        or best trial changed; the browser's table shares the same reads)."""
        record = self.watcher.session(self.session_id) if self.session_id is not None else None
        if record is not None:
            self.browser.stated.refresh([record])
        pick = self.browser.stated.pick(self.session_id)
        self.live.set_stated(self.browser.stated.stated(self.session_id))
        self.validation.set_stated(pick)
        self._update_actions()

    def _on_trial_clicked(self, trial_id: int) -> None:
        self.trials.select_trial(trial_id)
        self.tabs.setCurrentWidget(self.trials)

    def _on_refresh(self) -> None:
        self.browser.refresh()
        self._on_session_selected(-1 if self.session_id is None else self.session_id)

    def _on_error(self, message: str) -> None:
        self.message_bar.show_error(message)

    # ---- export --------------------------------------------------------------------------------
    def _on_export(self) -> None:
        if self.session_id is None:
            return
        if export_formats() is None:
            self.message_bar.show_error(
                "Export is not available: this build of tunelab has no tunelab.core.export.files."
            )
            return
        record = self.browser.record(self.session_id) or self.store.session(self.session_id)
        if record.best_trial_id is None:
            self.message_bar.show_error(f"Session {record.id} has no successful trial to export yet.")
            return
        selected_id = self.trials.selected_trial() if self.tabs.currentWidget() is self.trials else None
        selected = self.store.trial(selected_id) if selected_id is not None else None
        folder = str(self.settings.value("paths/export", self.last_folder()))
        confirmed = confirmations(self.store, record.id)  # read once for both picks
        picks = {
            robust: export_pick(self.store, record.id, robust=robust, confirmed=confirmed)
            for robust in (False, True)
        }
        dialog = ExportDialog(
            record, selected, os.path.join(folder, f"session-{record.id}"), self, picks=picks
        )
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.export_trial(
                record.id, dialog.trial_id(), dialog.folder(), dialog.formats(), robust=dialog.robust()
            )
        dialog.deleteLater()

    def export_trial(
        self,
        session_id: int,
        trial_id: int | None,
        out_dir: str,
        formats: tuple[str, ...],
        *,
        robust: bool = False,
    ) -> CallWorker | None:
        """Export in a worker thread (building the library takes a while); the result is a message."""
        if self.export_worker is not None:
            return None
        self.settings.setValue("paths/export", str(Path(out_dir).parent))
        worker = CallWorker(
            self.store.path,
            _export,
            session_id,
            trial_id,
            out_dir,
            formats,
            robust,
            parent=self,
        )
        worker.succeeded.connect(self._on_export_done)
        worker.failed.connect(self._on_worker_failed)
        worker.finished.connect(self._on_export_finished)
        self.export_worker = worker
        self.message_bar.show_info(f"Exporting session {session_id} into {out_dir}…")
        worker.start()
        self._update_actions()
        return worker

    def import_run(self, work_dir: str | None = None) -> CallWorker | None:
        """File → Import MetaSchedule run…: read a MetaSchedule work folder (asked for when not given) into
        sessions in a worker thread (MetaSchedule reads and replays every record); then the browser
        shows and selects the first new session, and an error goes to the message bar."""
        from tunelab.core.usecases.ms_import import import_work_dir

        if work_dir is None:
            work_dir = QFileDialog.getExistingDirectory(self, "Import MetaSchedule run", self.last_folder())
            if not work_dir:
                return None

        def imported(session_ids: list[int]) -> None:
            self.browser.refresh()
            if session_ids:
                self.browser.select_session(session_ids[0])
            n = len(session_ids)
            self.message_bar.show_info(f"Imported {n} session{'s' * (n != 1)} from {work_dir}.")

        worker = CallWorker(self.store.path, import_work_dir, work_dir, parent=self)
        worker.succeeded.connect(imported)
        worker.failed.connect(self._on_worker_failed)
        worker.finished.connect(worker.deleteLater)
        self.import_worker = worker  # held until it finishes (a QThread must outlive its run)
        self.message_bar.show_info(f"Importing {work_dir}…")
        worker.start()
        return worker

    def _on_export_done(self, written: dict) -> None:
        files = ", ".join(Path(p).name for p in written.values())
        folder = Path(next(iter(written.values()))).parent if written else ""
        self.message_bar.show_info(f"Exported {files} into {folder}.")

    def _on_export_finished(self) -> None:
        if self.export_worker is not None:
            self.export_worker.deleteLater()
        self.export_worker = None
        self._update_actions()
        if self._close_pending and self.worker is None:
            self.close()

    def _on_validation_finished(self) -> None:
        # A validation stored now may confirm (or refute) the figures the browser and Live state.
        self.browser.refresh()
        self._show_stated()
        if self._close_pending and self.worker is None and self.export_worker is None:
            self.close()

    def _on_save_plot(self) -> None:
        view = self.tabs.currentWidget()
        if not hasattr(view, "exportable"):
            return
        name = self.tabs.tabText(self.tabs.currentIndex()).lower().replace(" ", "-")
        default = os.path.join(self.last_folder(), f"session-{self.session_id}-{name}.png")
        path, _ = QFileDialog.getSaveFileName(self, "Save plot", default, PLOT_FILTER)
        if path:
            try:
                record = self.browser.record(self.session_id) if self.session_id is not None else None
                title = plot_title(record, self.tabs.tabText(self.tabs.currentIndex())) if record else None
                saved = save_plot(view.exportable(), path, title=title)
            except Exception as exc:  # noqa: BLE001
                self.message_bar.show_error(f"Cannot save the plot: {exc}")
                return
            self.settings.setValue("paths/last_folder", str(saved.parent))
            self.message_bar.show_info(f"Saved {saved}.")

    def last_folder(self) -> str:
        return str(self.settings.value("paths/last_folder", str(Path.home())))

    # ---- settings and closing ------------------------------------------------------------------
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

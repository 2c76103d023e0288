"""The main window: the session browser above, the views of the selected session below, one tuning
worker at a time, and everything a person expects from a desktop window (shortcuts, settings)."""

from __future__ import annotations

import gc

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QAction, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDockWidget,
    QLabel,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.app.resources import icon
from tunelab.app.views.browser import SessionBrowser
from tunelab.app.views.compare import CompareView
from tunelab.app.views.costmodel_view import CostModelView
from tunelab.app.views.hardware_view import HardwareView
from tunelab.app.views.jitter_view import JitterView
from tunelab.app.views.live_plot import LivePlot
from tunelab.app.views.target_words import target_text
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.app.views.validation.view import ValidationView
from tunelab.app.widgets.buffers import n_rows
from tunelab.app.widgets.message_bar import MessageBar
from tunelab.app.widgets.run_bar import RunBar
from tunelab.app.widgets.timers import single_shot
from tunelab.app.window_files import FilesWindow
from tunelab.app.workers import target_facts, tvm_loader
from tunelab.app.workers.engine import CallWorker, TuningWorker
from tunelab.app.workers.store_watcher import StoreWatcher
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord, SessionSpec
from tunelab.core.store import Store


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


def _default_target_words() -> str:
    """What auto means here, in words, or why it cannot be resolved (once the target probe has answered)."""
    auto = target_facts.known_target("auto")
    if auto is None:
        return "not detected"
    return auto if isinstance(auto, str) else auto.description


RUN_BAR_MS = 150  # a batch's trial reports refresh the run bar once


class MainWindow(FilesWindow):
    """The window: its parts are built here, its tuning, files and closing live in the classes below it."""

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
        self._build_browser()
        self._build_views()
        self._build_central()
        self._build_status_bar(probe_target)

        self._restore_settings()
        self._update_actions()
        self.watcher.poll()
        self.watcher.start()
        if probe_target:
            # This machine's CPU and what auto, llvm and cuda mean here, found out once in a worker (which
            # also warms the TVM import): the status bar says auto's, and the New-session dialog opens
            # knowing them. The tuning loop (tunelab.core.session.loop) is never imported here: sessions
            # are created and tuned in a child process.
            self._probe = target_facts.FactsWorker(target_facts.DETECTED, parent=self)
            target_facts.facts().follow(self._probe)
            self._probe.succeeded.connect(lambda _answered: self._on_default_target(_default_target_words()))
            # TVM's modules are imported by now
            self._probe.finished.connect(lambda: settle_heap(collect=self.worker is None))
            self._probe.failed.connect(lambda msg, _d: self._on_default_target(msg))
            self._probe.start()

    def _build_browser(self) -> None:
        """The session browser, in a dock above the views."""
        self.browser = SessionBrowser(self.store, self.watcher)
        self.browser.session_selected.connect(self._on_session_selected)
        self.browser.resume_requested.connect(self._on_resume_session)
        self.browser.model.target_words.described.connect(
            self._show_target
        )  # a target's ISA level, once known
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

    def _build_views(self) -> None:
        """The views of the selected session, one tab each."""
        store = self.store
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

    def _build_central(self) -> None:
        """The message bar and the run bar above the tabs."""
        self.run_bar = RunBar(self.store, self.pause_action, self.stop_action)
        # The worker reports each trial, a batch's worth at once: the run bar (a store read and a
        # repaint) is refreshed once for them, a moment later, not once per trial.
        self._run_bar_timer = single_shot(
            self, RUN_BAR_MS, lambda: self.run_bar.refresh(pending=self._pending())
        )
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.message_bar)
        layout.addWidget(self.run_bar)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

    def _build_status_bar(self, probe_target: bool) -> None:
        # The selected session's target, in the browser's words; this machine's default one (the probe's)
        # only while no session is selected.
        self._default_target = "detecting…" if probe_target else "not probed"
        self._shown_record: SessionRecord | None = None
        self.target_label = QLabel()
        self.statusBar().addPermanentWidget(self.target_label)
        self._show_target()
        self.statusBar().showMessage(f"Store: {self.store.path}")

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

    def _on_validation_finished(self) -> None:
        # A validation stored now may confirm (or refute) the figures the browser and Live state.
        self.browser.refresh()
        self._show_stated()
        if self._close_pending and self.worker is None and self.export_worker is None:
            self.close()

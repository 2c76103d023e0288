"""The main window's files: Export, File → Import MetaSchedule run and Save plot, each in a worker or a
dialog, saying what came of it in the message bar."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QDialog, QFileDialog

from tunelab.app.dialogs.export_dialog import ExportDialog, export_formats
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.app.widgets.plot_export import PLOT_FILTER, plot_title, save_plot
from tunelab.app.window_closing import ClosingWindow
from tunelab.app.workers.engine import CallWorker
from tunelab.core.store import Store
from tunelab.core.usecases.export import confirmations, export_pick


def _export(
    store: Store,
    session_id: int,
    trial_id: int | None,
    out_dir: str,
    formats: tuple[str, ...],
    robust: bool = False,
) -> dict:
    from tunelab.core.usecases.export import export_trial

    return export_trial(store, session_id, trial_id, out_dir=out_dir, formats=formats, robust=robust)


class FilesWindow(ClosingWindow):
    """Export, import and Save plot (MainWindow.__init__ sets what is declared here)."""

    import_worker: CallWorker | None  # the last import started (File → Import)
    trials: TrialsTable

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

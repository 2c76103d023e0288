"""The base of a view that runs one use case in a StreamWorker: its progress row, Stop, and the run's end.

The Jitter and Validation views both start a worker on the selected session, show its progress in a
bar beside a one-line stage, stop it on request and tidy up when it ends; this class does that once.
A subclass builds its own controls, calls :meth:`_launch` to start a run and draws what it reports in
``_on_progress``, ``_on_done`` and ``_show_failure``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from tunelab.app.workers.engine import StreamWorker, keep_alive
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store


class WorkerView(QWidget):
    """A view that runs one use case at a time in a StreamWorker on its own Store."""

    finished = Signal()  # a run ended (done, failed or stopped)
    failed = Signal(str)

    title: QLabel  # the subclass's header: it says why a session cannot be read

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self.session_id: int | None = None
        self.worker: StreamWorker | None = None
        self.last_error = ""

    # ---- building ------------------------------------------------------------------------------
    def _build_title(self, name: str) -> None:
        self.title = QLabel("No session selected.")
        self.title.setObjectName(name)
        self.title.setWordWrap(True)

    def _lay_out(self, page: QWidget, controls: QHBoxLayout, *results: QWidget) -> None:
        """On `page`, one above the other: the title, `controls`, the progress row and `results`, the
        last of them taking the spare height."""
        layout = QVBoxLayout(page)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addLayout(controls)
        layout.addLayout(self._build_progress_row())
        for result in results:
            layout.addWidget(result, 1 if result is results[-1] else 0)

    def _build_progress_row(self) -> QHBoxLayout:
        """The progress bar (hidden until a run starts) beside the stage it is at."""
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.hide()
        self.stage = QLabel()
        self.stage.setProperty("role", "hint")
        self.stage.setWordWrap(True)
        progress_row = QHBoxLayout()
        progress_row.setContentsMargins(0, 0, 0, 0)
        progress_row.addWidget(self.progress)
        progress_row.addWidget(self.stage, 1)
        return progress_row

    # ---- state ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.worker is not None

    def _stoppable(self) -> bool:
        """Whether Stop applies: a run is going and has not been asked to stop yet."""
        return self.worker is not None and not self.worker.cancelled

    def _load_session(self, session_id: int | None) -> Any:
        """Select `session_id` and read its record; None when there is none or it cannot be read (the
        title then says why and no session is selected)."""
        self.session_id = session_id
        record = None
        if session_id is not None:
            try:
                record = self._store.session(session_id)
            except TunelabError as exc:
                self.title.setText(str(exc))
                self.session_id = None
        return record

    def _update_buttons(self) -> None:
        """Enable the subclass's controls for the state it is in."""
        raise NotImplementedError

    # ---- running -------------------------------------------------------------------------------
    def _launch(self, job: Callable[..., Any], *args: Any, **request: Any) -> StreamWorker:
        """A worker running `job` on the store, wired to this view and kept alive; the progress bar
        shows it busy. The caller says what it is doing and starts it."""
        worker = StreamWorker(self._store.path, job, *args, **request)
        worker.progress.connect(self._on_progress)
        worker.succeeded.connect(self._on_done)
        worker.failed.connect(self._on_failed)
        worker.finished.connect(self._on_finished)
        self.worker = keep_alive(worker)
        self.progress.setRange(0, 0)
        self.progress.show()
        return worker

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self._set_stage(self.stage.text() + " — stopping…")
            self._update_buttons()

    def _on_progress(self, item: tuple) -> None:
        """What the job emitted as it went."""
        raise NotImplementedError

    def _on_done(self, result: Any) -> None:
        """What the job returned."""
        raise NotImplementedError

    def _on_failed(self, message: str, _details: str) -> None:
        self.last_error = message
        self._show_failure(message)
        self.failed.emit(message)

    def _show_failure(self, message: str) -> None:
        """Say that the run failed with `message`."""
        raise NotImplementedError

    def _on_finished(self) -> None:
        self.worker = None
        self.progress.hide()
        self._run_ended()
        self._update_buttons()
        self.finished.emit()

    def _run_ended(self) -> None:
        """What a subclass re-reads once a run has ended (nothing by default)."""

    # ---- drawing -------------------------------------------------------------------------------
    def _set_stage(self, text: str) -> None:
        self.stage.setText(text)

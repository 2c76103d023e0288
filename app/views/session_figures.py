"""The session header's yardsticks: the best kernel as a multiple of the vendor library ("0.62× vendor")
and as a fraction of this machine's roofline ("41 % of roofline, memory-bound").

Both come from tunelab.core.usecases.figures, which measures them the first time (the vendor call on
this problem, the machine's peak FLOP/s and bandwidth) and keeps them in the store. Measuring runs in
a worker thread, and only on request (the "measure…" link) unless the store already holds both; the
label then follows the session's best time as it improves.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from tunelab.app import theme
from tunelab.app.widgets.formatting import fmt_gflops, fmt_ms
from tunelab.app.workers.engine import CallWorker, keep_alive
from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord
from tunelab.core.store import Store
from tunelab.core.usecases.figures import Figures, figures_stored, session_figures
from tunelab.core.workloads.shape_text import format_shape

MEASURE_LINK = "<a href='measure'>vendor &amp; roofline…</a>"
REMEASURE = "remeasure"  # the link that times the vendor again
WARN_COLOUR = theme.WARN_DARK  # the roofline's warning amber


class SessionFigures(QLabel):
    """'0.62× vendor (OpenBLAS) · 41 % of roofline (memory-bound)' for the selected session."""

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("session_figures")
        self._store = store
        self._record: SessionRecord | None = None
        self._figures: Figures | None = None
        self._worker: CallWorker | None = None
        self._best: tuple[float | None, float | None, str] = (None, None, "")
        self._single_task: dict[int, bool] = {}
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.linkActivated.connect(self._on_link)
        self.hide()

    @property
    def running(self) -> bool:
        return self._worker is not None

    @property
    def figures(self) -> Figures | None:
        return self._figures

    def _primary(self, record: SessionRecord) -> tuple[float | None, float | None, str]:
        """(best ms, best GFLOP/s, shape text) of the session's primary shape: a session that tunes
        several shapes has a best per shape, and the baseline and the roofline are the primary one's."""
        # A session's tasks are fixed when it is created: once it is known to have one, the
        # per-task read (four look-ups per task) is skipped on every later refresh.
        if self._single_task.get(record.id):
            return record.best_ms, record.best_gflops, ""
        try:
            tasks = self._store.tasks(record.id)
        except TunelabError:
            tasks = []
        if len(tasks) > 1:
            t = tasks[0]
            return t.best_ms, t.best_gflops, format_shape(t.shape)
        self._single_task[record.id] = True
        return record.best_ms, record.best_gflops, ""

    def set_record(self, record: SessionRecord | None) -> None:
        """The selected session (again, after its best time changed)."""
        same = record is not None and self._record is not None and record.id == self._record.id
        self._record = record
        self._best = self._primary(record) if record is not None else (None, None, "")
        if not same:
            self._figures = None
            if record is not None and record.best_ms is not None and figures_stored(self._store, record):
                self.measure()
        self._show()

    def _on_link(self, link: str) -> None:
        self.measure(remeasure_vendor=link == REMEASURE)

    def measure(self, *, remeasure_vendor: bool = False) -> None:
        """Fetch (measuring what the store lacks) the vendor baseline and the roofline, in a worker;
        ``remeasure_vendor``: time the vendor again (a doubtful figure, asked by the user)."""
        if self._record is None or self._worker is not None:
            return
        worker = CallWorker(
            self._store.path, session_figures, self._record.id, remeasure_vendor=remeasure_vendor
        )
        worker.succeeded.connect(self._on_done)
        worker.failed.connect(lambda message, _d: self._on_failed(message))
        worker.finished.connect(self._on_finished)
        self._worker = keep_alive(worker)
        worker.start()
        self._show()

    def _on_done(self, figures: Figures) -> None:
        if self._record is not None and figures.session_id == self._record.id:
            self._figures = figures

    def _on_failed(self, message: str) -> None:
        self._figures = Figures(session_id=None, errors=(message,))

    def _on_finished(self) -> None:
        self._worker = None
        r = self._record
        if (
            self._figures is None
            and r is not None
            and r.best_ms is not None
            and figures_stored(self._store, r)
        ):
            self.measure()  # the selection moved on while it ran
        self._show()

    def _show(self) -> None:
        r = self._record
        if r is None or r.best_ms is None:
            self.hide()
            return
        self.show()
        if self._worker is not None:
            self.setText(f"<span style='color:{theme.TEXT_MUTED}'>measuring vendor &amp; roofline…</span>")
            self.setToolTip("")
            return
        if self._figures is None:
            self.setText(MEASURE_LINK)
            self.setToolTip(
                "Measure the vendor library on this problem and this machine's roofline (a few "
                "seconds, once per machine), then show how the best kernel compares"
            )
            return
        best_ms, best_gflops, shape = self._best
        if best_ms is None:
            self.setText(f"<span style='color:{theme.TEXT_MUTED}'>no result for the primary shape yet</span>")
            return
        parts, tips = [], []
        if shape:
            tips.append(f"For the session's primary shape {shape} (it tunes several).")
        vendor = self._figures.vendor.baseline if self._figures.vendor is not None else None
        comparison = self._figures.vendor
        if vendor and vendor.median_ms and comparison is not None:
            x = vendor.median_ms / best_ms
            # the same doubt the CLI states, for the ratio shown here (the best may have moved on)
            doubt = replace(comparison, x_of_vendor=x).doubt
            if doubt:  # the roofline's warning style: amber, ⚠, and a way to measure it again
                parts.append(
                    f"<span style='color:{WARN_COLOUR}'><b>{x:.2f}× vendor ⚠</b></span> "
                    f"<a href='{REMEASURE}'>re-measure</a>"
                )
            else:
                color = theme.GOOD if x >= 1 else theme.TEXT
                parts.append(f"<span style='color:{color}'><b>{x:.2f}× vendor</b></span>")
            tips.append(
                f"Vendor: {vendor.library or '?'} ({vendor.method or ''}) "
                f"{fmt_ms(vendor.median_ms)} ms = {fmt_gflops(vendor.gflops)} GFLOP/s; "
                f"the best kernel {fmt_ms(best_ms)} ms. Above 1×: faster than the vendor."
                + (f" Not to be believed as it stands: {doubt}." if doubt else "")
            )
        elif self._figures.session_id is not None:
            parts.append(f"<span style='color:{theme.TEXT_MUTED}'>no vendor baseline</span>")
            tips.append(
                "No vendor library computes this workload here (a custom workload, or a GPU without "
                "PyTorch or CuPy)."
            )
        roof = self._figures.roofline
        if roof and roof.bound_gflops:
            fraction = (best_gflops or 0.0) / roof.bound_gflops
            if fraction > 1.0:  # above the measured roof: the probes were likely disturbed (see the tooltip)
                parts.append(
                    f"<span style='color:{WARN_COLOUR}'><b>{fraction:.0%} of roofline ⚠</b></span> "
                    f"({roof.bound_by}-bound)"
                )
            else:
                parts.append(f"<b>{fraction:.0%} of roofline</b> ({roof.bound_by}-bound)")
            tips.append(
                f"Roofline: min(peak {fmt_gflops(roof.peak_gflops)} GFLOP/s, "
                f"{roof.intensity or 0:.2f} FLOP/byte × {roof.bandwidth_gbs or 0:.1f} GB/s) = "
                f"{fmt_gflops(roof.bound_gflops)} GFLOP/s; the best kernel reaches "
                f"{fmt_gflops(best_gflops)} GFLOP/s." + (f" {roof.note}" if roof.note else "")
            )
            if roof.schedule_limits:  # what the roofline cost model says holds this schedule back
                parts.append(f"limited by {roof.schedule_limits[0]}")
            if roof.schedule_sentence():
                tips.append(f"The best schedule under the roofline cost model: {roof.schedule_sentence()}.")
        elif roof and roof.note:
            parts.append(f"<span style='color:{theme.TEXT_MUTED}'>no roofline</span>")
            tips.append(roof.note)
        errors = self._figures.errors
        if errors:
            parts.append(f"<span style='color:{theme.ERROR}'>{'; '.join(errors)}</span>")
        self.setText(" · ".join(parts) if parts else MEASURE_LINK)
        self.setToolTip("\n".join(tips))

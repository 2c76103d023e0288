"""How a validation is drawn: the verdict in words, the re-measured schedules, the shapes and the past
runs as tables, and GFLOP/s per shape as a plot. Widgets and functions here hold no state of a run."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from tunelab.app import theme
from tunelab.app.widgets.captioned_plot import CaptionedPlot
from tunelab.app.widgets.formatting import fmt_gflops, fmt_ms, fmt_shape
from tunelab.app.widgets.log_axis import unit_axis
from tunelab.app.widgets.row_table import single_row_table
from tunelab.core.usecases.validation import ScheduleResult, ShapeRow, ValidationReport

VERDICT_STYLE = {  # verdict -> (headline, text colour, background)
    "stable": ("Stable", theme.GOOD, theme.GOOD_BG),
    "noisy": ("Noisy", theme.WARN_DARK, theme.WARN_BG),
    "regressed": ("Regressed", theme.ERROR, theme.ERROR_BG),
}
ROW_BRUSH = {"noisy": QBrush(QColor(theme.WARN_BG)), "regressed": QBrush(QColor(theme.ERROR_BG))}
FALLS_OFF_BRUSH = QBrush(QColor(theme.ERROR_BG))
SCHEDULE_COLUMNS = (
    "Schedule",
    "Recorded ms",
    "Re-measured ms",
    "Ratio",
    "CV",
    "Runs",
    "Quiet runs",
    "Throttled",
    "Placement",
    "Machine",
    "Verdict",
    "Cause",
)
SHAPE_COLUMNS = ("Shape", "Status", "Latency ms", "GFLOP/s", "Tuned ms", "× tuned", "Falls off", "Why")
PAST_COLUMNS = ("When", "Verdict", "Runs", "Summary")
BAR_BRUSH = theme.rgba(theme.ACCENT, 200)
BAR_OFF_BRUSH = theme.rgba(theme.ERROR, 200)
TUNED_BRUSH = theme.rgba(theme.TEXT_FAINT, 150)
RATIO_PEN = theme.WARN
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def _ratio(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.2f}×"


def _pct(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _change(ratio: float | None) -> str:
    """A ratio as a signed change: 1.12 -> "+12%"; None -> "—"."""
    if ratio is None:
        return "—"
    percent = round((ratio - 1) * 100)
    return f"{percent:+d}%" if percent else "0%"


def _varying_label(rows: Sequence[ShapeRow]) -> list[str]:
    """Tick labels naming only the parameters that differ between the shapes."""
    shapes = [r.shape for r in rows]
    keys = [k for k in (shapes[0] if shapes else {}) if len({s.get(k) for s in shapes}) > 1]
    if not keys:
        return [r.shape_text for r in rows]
    return [fmt_shape({k: s[k] for k in keys}) for s in shapes]


def when(run: dict[str, Any]) -> str:
    """When a stored validation was made, to the minute."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(run.get("created_at") or 0))


_MICROSECONDS = re.compile(r"(\d+(?:\.\d+)?) ?(?:us|µs)\b")


def in_ms(text: str) -> str:
    """A report's sentence with its microseconds said in ms, as the tables beside it are (reports
    stored before the core said every time in ms wrote "12.3 us")."""
    return _MICROSECONDS.sub(lambda m: f"{float(m.group(1)) / 1e3:.4g} ms", text)


# ---- the verdict ---------------------------------------------------------------------------------------
def verdict_words(report: ValidationReport) -> tuple[str, str, str]:
    """(headline, cause, figures) of a report: the verdict, its likely cause as a sentence, and the
    figures behind it (the summary without the cause, the ranking when it changed)."""
    verdict = report.verdict
    headline = VERDICT_STYLE.get(verdict, (verdict.capitalize(), "", ""))[0]
    cause = in_ms(report.cause or "")
    summary = in_ms(report.summary)
    at = summary.find(cause) if cause else -1
    if at >= 0:  # "[<schedule>: ]<cause>; <figures>": say the cause once
        cause, summary = summary[:at] + cause, summary[at + len(cause) :].lstrip("; ")
    elif verdict == "stable" and not cause:
        cause = "The figures hold: the re-measurements agree with the recorded ones and with each other."
        summary = summary.removeprefix("the figures hold: ")
    summary = summary[:1].upper() + summary[1:]
    if report.ranking.holds is False:
        summary += (
            ". The ranking changed: recorded "
            + ", ".join(report.ranking.recorded_order)
            + "; re-measured "
            + ", ".join(report.ranking.remeasured_order)
        )
    figures = summary + ("." if summary and not summary.endswith(".") else "")
    return headline, cause[:1].upper() + cause[1:], figures


def verdict_styles(verdict: str | None) -> tuple[str, str, str]:
    """Style sheets (box, headline, cause) for a verdict; None: not validated (grey)."""
    _, color, background = VERDICT_STYLE.get(verdict or "", ("", theme.TEXT_MUTED, theme.NEUTRAL_BG))
    return (
        f"QFrame#verdict_box {{ background: {background}; border-radius: 6px; }}",
        f"font-size: 26px; font-weight: 700; color: {color};",
        f"font-size: 15px; color: {color};",
    )


# ---- tables --------------------------------------------------------------------------------------------
def make_table(columns: tuple[str, ...], stretch: int) -> QTableWidget:
    """A read-only table of whole-row single selection, column `stretch` taking the spare width."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(columns)
    table.setMinimumHeight(36)  # the window may be small: the splitters share what there is
    single_row_table(table).setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return table


def titled(text: str, widget: QWidget) -> QWidget:
    """`widget` under a bold title."""
    page = QWidget()
    layout = QVBoxLayout(page)
    layout.setContentsMargins(0, 4, 0, 0)
    label = QLabel(f"<b>{text}</b>")
    layout.addWidget(label)
    layout.addWidget(widget, 1)
    return page


def fill_schedules(
    table: QTableWidget, schedules: Sequence[ScheduleResult], labels: Mapping[int, str] | None = None
) -> None:
    """One row per re-measured schedule, tinted by its verdict; ``labels``: names by trial id, in place
    of the ones the report was stored with."""
    table.setRowCount(len(schedules))
    for row, s in enumerate(schedules):
        confirmed = s.confirmed
        values = (
            (labels or {}).get(s.trial_id, s.label) if s.trial_id is not None else s.label,
            fmt_ms(s.recorded_ms) + (" *" if confirmed else ""),
            fmt_ms(s.remeasured_ms),
            _ratio(s.ratio),
            _pct(s.cv),
            f"{s.runs} / {s.runs_tried}",
            "—" if s.quiet_runs is None else str(s.quiet_runs),
            "yes" if s.throttled else "no",
            _change(s.placement_ratio),
            _change(s.machine_drift),
            s.verdict,
            s.cause or "",
        )
        tips = {
            1: "* confirmed in fresh processes when the session finished"
            if confirmed
            else "the figure the session measured",
            8: "how much slower with every buffer at the same page offset (tunelab.core.measure.placement)",
            9: "how much slower the machine itself was than at recording, by a reference kernel",
        }
        for col, text in enumerate(values):
            item = QTableWidgetItem(text)
            item.setToolTip(tips.get(col) or s.cause or s.verdict)
            if 1 <= col <= 9:
                item.setTextAlignment(_RIGHT)
            brush = ROW_BRUSH.get(s.verdict)
            if brush is not None:
                item.setBackground(brush)
            table.setItem(row, col, item)


def fill_shapes(table: QTableWidget, rows: Sequence[ShapeRow]) -> None:
    """One row per shape the best schedule was carried over to; those where it falls off highlighted."""
    table.setRowCount(len(rows))
    bold = QFont()
    bold.setBold(True)
    for row, r in enumerate(rows):
        tuned = fmt_ms(r.tuned_ms)
        if r.tuned_session_id is not None:
            tuned += f" (#{r.tuned_session_id})"
        falls = r.falls_off
        values = (
            r.shape_text,
            r.status,
            fmt_ms(r.latency_ms),
            fmt_gflops(r.gflops),
            tuned,
            _ratio(r.ratio_to_tuned),
            "—" if falls is None else ("yes" if falls else "no"),
            "; ".join(r.reasons) or (r.error or ""),
        )
        for col, text in enumerate(values):
            item = QTableWidgetItem(text)
            item.setToolTip(values[-1] or text)
            if 2 <= col <= 5:
                item.setTextAlignment(_RIGHT)
            if falls:
                item.setBackground(FALLS_OFF_BRUSH)
                if col in (0, 6, 7):
                    item.setFont(bold)
            table.setItem(row, col, item)


def fill_past(
    table: QTableWidget, runs: list[dict[str, Any]], purpose: Callable[[dict[str, Any]], str | None]
) -> None:
    """One row per stored validation run; `purpose(run)` is "confirm" for a session's own confirmation."""
    table.blockSignals(True)
    table.setRowCount(len(runs))
    for row, run in enumerate(runs):
        k = len(run.get("results") or [])
        what = f"top {k} × {run.get('runs')}"
        if (
            purpose(run) == "confirm"
        ):  # tunelab.core.trust.confirm: done by the session itself when it finished
            what = f"confirmation: {what}"
        summary = in_ms(str(run.get("summary") or ""))
        values = (when(run), str(run.get("verdict")), what, summary)
        for col, text in enumerate(values):
            item = QTableWidgetItem(text)
            item.setToolTip(summary)
            if col == 1:
                color = VERDICT_STYLE.get(str(run.get("verdict")), ("", theme.TEXT, ""))[1]
                item.setForeground(QColor(color))
            table.setItem(row, col, item)
    table.blockSignals(False)


# ---- the plot ------------------------------------------------------------------------------------------
class ShapesPlot(CaptionedPlot):
    """GFLOP/s per shape: the carried-over schedule's bars (red where it falls off) beside those of the
    schedule tuned for each shape, and its time as a multiple of the tuned one on a right axis, with
    the fall-off limit dashed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        # The legend is a caption above the plot (a legend inside a short plot hides the bars).
        super().__init__(
            f"<b>GFLOP/s per shape</b>: {theme.legend_square(theme.ACCENT)} this schedule "
            f"({theme.legend_square(theme.ERROR)} falls off) · "
            f"{theme.legend_square(theme.TEXT_FAINT)} the schedule tuned for that shape · "
            f"<span style='color:{RATIO_PEN}'>&#9670; × the tuned time</span> (right axis; dashed: the fall-off limit)",
            36,
            parent,
        )
        unit_axis(self.plot.getAxis("left"), "GFLOP/s")
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=BAR_BRUSH)
        self.tuned_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=TUNED_BRUSH)
        self.plot.addItem(self.bars)
        self.plot.addItem(self.tuned_bars)
        self.ratio_view = pg.ViewBox()
        self.plot.showAxis("right")
        self.plot.scene().addItem(self.ratio_view)
        right = self.plot.getAxis("right")
        right.linkToView(self.ratio_view)
        unit_axis(right, "× tuned time", color=RATIO_PEN)
        self.ratio_view.setXLink(self.plot)
        self.ratio_view.setZValue(self.plot.vb.zValue() + 1)  # the ratio line over the bars
        self.ratio_curve = pg.PlotDataItem(
            pen=pg.mkPen(RATIO_PEN, width=2),
            symbol="d",
            symbolSize=10,
            symbolBrush=RATIO_PEN,
            symbolPen=None,
            connect="finite",
        )
        self.ratio_view.addItem(self.ratio_curve)
        # Where the limit lies is the engine's rule (tunelab.core.trust.shapes): drawn once a run says it.
        self.ratio_limit = pg.InfiniteLine(angle=0, pen=pg.mkPen(RATIO_PEN, style=Qt.PenStyle.DashLine))
        self.ratio_limit.hide()
        self.ratio_view.addItem(self.ratio_limit, ignoreBounds=True)
        self.plot.vb.sigResized.connect(self._sync_views)

    def draw(self, rows: Sequence[ShapeRow], max_ratio: float | None) -> None:
        """Show these shape rows; `max_ratio`: the fall-off limit (× the tuned time), None if not known."""
        if max_ratio:
            self.ratio_limit.setValue(float(max_ratio))
        self.ratio_limit.setVisible(bool(max_ratio))
        x = np.arange(len(rows), dtype=float)
        heights = [r.gflops or 0.0 for r in rows]
        brushes = [pg.mkBrush(BAR_OFF_BRUSH if r.falls_off else BAR_BRUSH) for r in rows]
        self.bars.setOpts(x=x - 0.2, height=heights, width=0.38, brushes=brushes)
        tuned = [r.tuned_gflops or 0.0 for r in rows]
        self.tuned_bars.setOpts(x=x + 0.2, height=tuned, width=0.38)
        ratio = np.array(
            [r.ratio_to_tuned if r.ratio_to_tuned is not None else np.nan for r in rows], dtype=float
        )
        finite = np.isfinite(ratio)
        self.ratio_curve.setData(x[finite], ratio[finite])
        self.plot.getAxis("bottom").setTicks([list(zip(x.tolist(), _varying_label(rows), strict=True)), []])
        if len(rows):
            self.plot.setXRange(-0.6, len(rows) - 0.4, padding=0)
            top = max([*heights, *tuned, 1e-9])
            self.plot.setYRange(0, top * 1.1, padding=0)
            high = max(float(ratio[finite].max()) if finite.any() else 1.0, float(max_ratio or 0.0))
            self.ratio_view.setYRange(0, high * 1.15, padding=0)

    def _sync_views(self) -> None:
        self.ratio_view.setGeometry(self.plot.vb.sceneBoundingRect())
        self.ratio_view.linkedViewChanged(self.plot.vb, self.ratio_view.XAxis)

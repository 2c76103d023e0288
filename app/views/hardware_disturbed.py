"""The Hardware view's trials whose readings are not a quiet machine's: those measured while it was not
quiet (from each trial's telemetry stamp: the sentence that counts them, their spans on the time axis,
their list), and those measured on RPC servers (the note that names them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem

from tunelab.app import theme
from tunelab.app.widgets.buffers import GrowingColumns
from tunelab.app.widgets.row_table import single_row_table
from tunelab.app.workers.telemetry_source import disturbance

# Trials measured on a machine that was not quiet: span colour, ring colour, words for the list.
DISTURBED = {
    "throttled": (theme.rgba(theme.ERROR, 60), theme.ERROR, "while the GPU was throttled"),
    "gpu": (theme.rgba(theme.VIOLET, 45), theme.VIOLET, "while another process used the GPU"),
    "busy": (theme.rgba(theme.WARN, 45), theme.WARN, "while another process was busy on the CPU"),
    "warning": (theme.rgba(theme.WARN, 30), theme.WARN, "after a cool-down warning"),
}
MAX_LISTED = 1000  # rows of the disturbed-trials table
MAX_SPANS = 300
LOCAL_DEVICE = "this machine"
MAX_NAMED_SERVERS = 6  # servers named in the remote note; the rest are counted


def _pid_text(pids: list[int], limit: int = 8) -> str:
    if not pids:
        return ""
    shown = ", ".join(str(p) for p in pids[:limit])
    return f"pid {shown}" + (f" and {len(pids) - limit} more" if len(pids) > limit else "")


def disturbed_trials(stamps: dict[int, Any] | None, trials: GrowingColumns) -> list[dict]:
    """One entry per trial of `trials` (id, index, number, start, t, latency by id) whose stamp says the
    machine was not quiet: where it stands, and the cause (tunelab.app.workers.telemetry_source.disturbance)."""
    out = []
    ids = trials.col("id")
    for trial_id, stamp in sorted((stamps or {}).items()):
        row = int(np.searchsorted(ids, trial_id))
        what = disturbance(stamp)
        if row >= len(ids) or ids[row] != trial_id or what is None:
            continue
        col = trials.col
        index, number, start, end, latency = (
            int(col("index")[row]),
            int(col("number")[row]),
            float(col("start")[row]),
            float(col("t")[row]),
            float(col("latency")[row]),
        )
        out.append(
            {
                "trial_id": trial_id,
                "index": index,
                "number": number,
                "start": start,
                "end": end,
                "latency": latency,
                **what,
            }
        )
    return out


def disturbed_words(disturbed: list[dict]) -> str:
    """'3 trials measured while another process was busy on the CPU (pid 123) · …' ('' when none)."""
    parts = []
    for kind, (_, color, words) in DISTURBED.items():
        hits = [d for d in disturbed if d["kind"] == kind]
        if not hits:
            continue
        # The pids that disturbed the most trials first.
        counts = Counter(p for d in hits for p in d["pids"])
        pids = sorted(counts, key=lambda p: (-counts[p], p))
        extra = ""
        if kind == "throttled":
            reasons = sorted({r for d in hits for r in d["throttle_reasons"]})
            extra = f" ({', '.join(reasons)})" if reasons else ""
        elif pids:
            extra = f" ({_pid_text(pids)})"
        elif kind == "warning":
            extra = f" ({hits[0]['warning']})"
        n = len(hits)
        parts.append(
            f"<span style='color:{color}'>{n} trial{'s' if n != 1 else ''} measured {words}{extra}</span>"
        )
    return " · ".join(parts)


def disturbed_spans(disturbed: list[dict], trials: GrowingColumns) -> list[tuple[float, float, str, Any]]:
    """(start, end, tooltip, brush) of each run of consecutive disturbed trials with the same cause,
    widened to stay visible."""
    out = []
    # Spans: runs of consecutive disturbed trials with the same cause, widened to stay visible.
    t = trials.col("t")
    width = max(0.004 * float(t.max() - t.min()) if len(t) else 0.0, 0.05)
    # Each disturbed trial's position among all trials in index order (consecutive: one span).
    by_index = np.sort(trials.col("index"))
    position = {d["index"]: int(np.searchsorted(by_index, d["index"])) for d in disturbed}
    spans: list[list[dict]] = []
    for d in sorted(disturbed, key=lambda d: d["index"]):
        last = spans[-1][-1] if spans else None
        if (
            last is not None
            and last["kind"] == d["kind"]
            and last["cause"] == d["cause"]
            and position.get(d["index"], -2) - position.get(last["index"], -9) == 1
        ):
            spans[-1].append(d)
        else:
            spans.append([d])
    for run in spans[:MAX_SPANS]:
        start, end = min(d["start"] for d in run), max(d["end"] for d in run)
        if end - start < width:
            mid = (start + end) / 2
            start, end = mid - width / 2, mid + width / 2
        first, last = run[0]["number"], run[-1]["number"]
        which = f"trial #{first}" if first == last else f"trials #{first}–#{last} ({len(run)})"
        tip = f"{which}: {run[0]['cause']}"
        brush = DISTURBED[run[0]["kind"]][0]
        out.append((start, end, tip, brush))
    return out


class DisturbedTable(QTableWidget):
    """The list of disturbed trials under the plots: number, time, cause, other pids, device."""

    def __init__(self) -> None:
        super().__init__(0, 5)
        self.setObjectName("disturbed_table")
        self.setHorizontalHeaderLabels(("Trial", "Seconds", "What else was going on", "Other pids", "Device"))
        device_header = self.horizontalHeaderItem(4)
        assert device_header is not None  # set by the labels just above
        device_header.setToolTip(
            "Where the trial's kernel ran: this machine, or the RPC server that measured it"
        )
        self.setAlternatingRowColors(True)
        # The cause column takes the spare width; a long cause elides, each cell's tooltip holds all of it.
        single_row_table(self).setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.hide()

    def fill(self, disturbed: list[dict], device_of: Callable[[int], str | None]) -> None:
        """Show the first MAX_LISTED of `disturbed`, each with the RPC server that measured it (or here)."""
        table = self
        rows = disturbed[:MAX_LISTED]
        table.setRowCount(len(rows))
        for r, d in enumerate(rows):
            values = (
                f"#{d['number']}",
                f"{d['end']:.1f}",
                d["cause"],
                ", ".join(map(str, d["pids"])),
                device_of(d["trial_id"]) or LOCAL_DEVICE,
            )
            for c, text in enumerate(values):
                item = QTableWidgetItem(text)
                item.setToolTip(
                    d["cause"] + (f"\n(cool-down warning: {d['warning']})" if d.get("warning") else "")
                )
                table.setItem(r, c, item)
        table.setVisible(bool(rows))


def remote_note(devices: Iterable[str | None], tracker: str = "") -> str:
    """What the readings of trials measured on `devices` (None: this machine) are: '' when every one
    was measured here, else a sentence naming the servers."""
    counts = Counter(devices)
    local = counts.pop(None, 0)
    servers = sorted(d for d in counts if d is not None)
    if not servers:
        return ""
    named = ", ".join(servers[:MAX_NAMED_SERVERS])
    if len(servers) > MAX_NAMED_SERVERS:
        named += f" and {len(servers) - MAX_NAMED_SERVERS} more"
    through = f"through the RPC tracker at {tracker}" if tracker else "through the RPC tracker"
    remote = sum(counts.values())
    which = "Measured" if not local else f"{remote} of {remote + local} trials measured"
    return (
        f"{which} on {named} {through}: these readings are this machine's, not the device's "
        "(the kernels ran there, the telemetry is read here)."
    )

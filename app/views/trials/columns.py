"""The trials table's columns: their names, the header's text and tooltips, which hold numbers, and the
text each is made wide for."""

from __future__ import annotations

from PySide6.QtCore import Qt

COLUMNS = (
    "#",  # the trial's number within its session, from 1 (what every view calls it)
    "ID",
    "Round",
    "Status",
    "Latency ms",
    "Mean ms",
    "Std ms",
    "Predicted ms",
    "Config",
    "Error",
    "CV %",  # spread of the trial's samples: std / mean
    "IQR ms",  # spread of the middle half of the samples: q3 - q1
    "Failure",  # failure_class of a failed trial: sorting by it groups the failures
    "Device",  # the RPC server that measured the trial; shown only for a session measured remotely
)
# The header shows a unit under its title ("Latency" over "ms"): the columns are then as narrow as
# their numbers, so that every one of them fits a 1280-pixel window. Copies keep the one-line names.
HEADER_TEXT = tuple(
    "\n".join(name.rsplit(" ", 1)) if name.endswith((" ms", " %")) else name for name in COLUMNS
)
# What each column holds, as its header's tooltip.
COLUMN_TIPS = (
    "The trial's number within its session, from 1",
    "The trial's id in the store (unique across sessions)",
    "The batch (round) the trial was measured in",
    "ok, or how the trial failed",
    "Latency: the median of the trial's samples, in ms",
    "The mean of the trial's samples, in ms",
    "The standard deviation of the trial's samples (population, as TVM reports it), in ms",
    "The cost model's prediction, made before the trial was measured, in ms",
    "The knobs' values (hover over a cell for the whole config)",
    "The last line of the error (hover over a cell for all of it)",
    "Coefficient of variation: std / mean of the trial's samples, in %",
    "Interquartile range: q3 − q1 of the trial's samples, in ms — the spread of their middle half, "
    "which one outlying sample cannot widen",
    "The class of a failed trial's failure: sort by it to group the failures",
    "Where the trial was measured: the RPC server (HOST:PORT) the tracker gave it, or this machine",
)
NUMERIC = {0, 1, 2, 4, 5, 6, 7, 10, 11}
CONFIG_COL, ERROR_COL, CV_COL, IQR_COL, FAILURE_COL, DEVICE_COL = 8, 9, 10, 11, 12, 13

# The widest text each column but the config usually shows, which its width is made for: numbers as
# fmt_ms writes them (4 significant digits), the longest status, a common failure class and the first
# words of an error. Longer text elides; the Error tab and the cells' tooltips hold all of an error.
USUAL_TEXT = {
    0: "99999",
    1: "999999",
    2: "999",
    3: "wrong_result",
    4: "0.0002811",
    5: "0.0002811",
    6: "0.0002811",
    7: "0.0002811",
    ERROR_COL: "worker died:",
    CV_COL: "100.0",
    IQR_COL: "0.0002811",
    FAILURE_COL: "build error",
    DEVICE_COL: "127.0.0.1:9091",  # longer addresses elide: the cell's tooltip holds all of it
}


def header_data(section: int, orientation: Qt.Orientation, role: int):
    """The trials table's horizontal header: each column's title, and what it holds as its tooltip."""
    if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
        return None
    if role == Qt.ItemDataRole.DisplayRole:
        return HEADER_TEXT[section]
    if role == Qt.ItemDataRole.ToolTipRole:
        return COLUMN_TIPS[section]
    return None

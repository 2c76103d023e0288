"""The one place the app's colours live: every view, plot and table takes its colours from here.

Each name says the colour's role, not its hue, so a view asks for "the error colour" and the whole app
changes together. Values are hex strings ("#rrggbb"), which Qt style sheets, rich text, QColor and
pyqtgraph all accept; `rgba` gives the same colour with an alpha for pyqtgraph's brushes. The Qt style
sheet in resources/ styles the widgets themselves; this module holds what the code draws.

Imports nothing (no Qt, nothing from the engine), so any module may use it.
"""

from __future__ import annotations

# ---- text ----------------------------------------------------------------------------------------------
TEXT = "#202124"  # body text, plot titles and legends
TEXT_SECONDARY = "#3c4043"  # captions above plots; the y = x line of the cost-model plot
TEXT_MUTED = "#5f6368"  # "not yet" / "none" notes, empty-plot notes, zero lines
TEXT_FAINT = "#80868b"  # what is there only for context: ended sessions, "same as" cells, tuned bars

# ---- states --------------------------------------------------------------------------------------------
ERROR = "#d93025"  # failed, crashed, falls off, throttled, explains the spread
ERROR_BG = "#fce8e6"  # a regressed or falling-off row, a cause that explains the spread
FLAGGED_BG = "#fde3e0"  # a model flagged for bias (a shade apart from ERROR_BG, as it always was)
WARN = "#e37400"  # paused, busy machine, highlights, the GFLOP/s and ratio axes
WARN_DARK = "#b06000"  # a figure not to be held to (⚠), a noisy verdict, the remote note's text
WARN_BG = "#fef7e0"  # a noisy row, the remote note's background
WARN_BORDER = "#f9ab00"  # the remote note's border
GOOD = "#1e8e3e"  # running, stable, best so far, beats the vendor
GOOD_BG = "#e6f4ea"  # a stable verdict, the model steering the search
NEUTRAL_BG = "#f1f3f4"  # not validated; the jitter headline's box
CHANGED_BG = "#fff4d6"  # a cell that differs between the sessions compared

# ---- series --------------------------------------------------------------------------------------------
ACCENT = "#2a6fdb"  # the main series: trial latencies, this schedule's bars, the first session
VIOLET = "#9334e6"  # another process on the GPU
TEAL = "#12a4af"
BROWN = "#795548"
PINK = "#f538a0"
# Sessions side by side (compare), in this order; the first three are also the hardware panels' series.
PALETTE = (ACCENT, WARN, GOOD, VIOLET, ERROR, TEAL, BROWN, PINK)

# ---- shared styles -------------------------------------------------------------------------------------
CAPTION_STYLE = f"color: {TEXT_SECONDARY};"  # a caption written above a plot in place of a legend


def rgba(colour: str, alpha: int) -> tuple[int, int, int, int]:
    """`colour` ("#rrggbb") with `alpha` (0-255), as the (r, g, b, a) tuple pyqtgraph takes for a brush."""
    value = colour.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16), alpha


def legend_square(colour: str) -> str:
    """A filled square in `colour`, for a caption that names a plot's series in rich text."""
    return f"<span style='color:{colour}'>&#9632;</span>"

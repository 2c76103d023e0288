"""A saved plot names what it shows (issue 10): the session's id, workload and shape drawn as a title
above the plot in a PNG, and as the SVG's title and text."""

from __future__ import annotations

from PySide6.QtGui import QImage

from tunelab.app.views.live_plot import LivePlot
from tunelab.app.widgets.plot_export import plot_title, save_plot


def test_saved_plots_carry_the_sessions_title(qtbot, store, tmp_path):
    record = store.sessions()[-1]
    view = LivePlot(store, redraw_ms=10)
    qtbot.addWidget(view)
    view.resize(800, 500)
    view.show()
    view.set_session(record.id)
    title = plot_title(record, "Live")
    assert title == f"Session {record.id} (gemm M=32,N=32,K=32 float32) · Live"

    plain = QImage(str(save_plot(view.exportable(), tmp_path / "plain.png")))
    titled = QImage(str(save_plot(view.exportable(), tmp_path / "titled.png", title=title)))
    assert titled.width() == plain.width() and titled.height() > plain.height()  # a band above the plot
    band = titled.height() - plain.height()
    dark = sum(
        1
        for x in range(0, titled.width() // 2, 2)
        for y in range(0, band, 2)
        if titled.pixelColor(x, y).lightness() < 100
    )
    assert dark > 50, "the title is drawn in the band"

    svg = save_plot(view.exportable(), tmp_path / "titled.svg", title=title).read_text()
    assert f"<title>{title}</title>" in svg and "Session" in svg.split("</title>", 1)[1]

"""No text grows the main window: a 400-character stage, message, run-bar line or Live header is cut
with "…" (whole in its tooltip) and the window keeps the width it was given, at a laptop's 1280x800
and at 1600x1000."""

from __future__ import annotations

import pytest

from tunelab.app.main_window import MainWindow
from tunelab.app.widgets.elided_label import ElidedLabel

LONG = ("confirming the 3 fastest schedule(s) in 3 fresh processes until the machine is quiet " * 6)[:400]
UNBROKEN = "/very/long/path/" + "x" * 384  # no space to wrap at


def _window(qtbot, store, settings, width: int, height: int) -> MainWindow:
    window = MainWindow(store, settings, poll_ms=100, probe_target=False)
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    session_id = min(r.id for r in store.sessions())
    window.browser.select_session(session_id)
    qtbot.waitUntil(lambda: window.session_id == session_id)
    return window


def _settled_width(qtbot, window: MainWindow) -> int:
    qtbot.wait(50)  # layouts are redone from the event loop
    return window.width()


@pytest.mark.parametrize("size", [(1280, 800), (1600, 1000)])
def test_long_text_never_grows_the_window(qtbot, store, settings, size):
    width, height = size
    window = _window(qtbot, store, settings, width, height)
    assert window.width() == width
    bar = window.run_bar

    bar.set_stage(window.session_id, LONG)
    assert _settled_width(qtbot, window) == width
    assert bar.stage_label.isVisible() and bar.stage_label.elided
    assert bar.stage_label.shown_text.endswith("…") and len(bar.stage_label.shown_text) < len(LONG)
    assert bar.stage_label.toolTip() == bar.stage  # the whole line, one hover away
    assert bar.stage.startswith("Confirming the 3 fastest")
    # Pause and Stop stay on the screen beside it.
    for button in (bar.progress, bar.count_label):
        assert button.isVisible() and button.mapTo(window, button.rect().topRight()).x() <= width

    bar.label.setText(f"<b>#1 {LONG}</b> · running")
    assert _settled_width(qtbot, window) == width
    assert bar.label.elided and "<b>" not in bar.label.shown_text  # cut as the plain text it reads
    assert bar.label.toolTip() == bar.label.text()

    window.live.title.setText(LONG)
    assert _settled_width(qtbot, window) == width
    assert window.live.title.elided and window.live.title.toolTip() == LONG

    for message in (LONG, UNBROKEN):
        window.message_bar.show_error(message)
        assert _settled_width(qtbot, window) == width
        assert window.message_bar.label.toolTip() == message and window.message_bar.text == message

    window.statusBar().showMessage(LONG)
    window.target_label.setText(LONG)
    assert _settled_width(qtbot, window) == width

    bar.clear_stage()
    window.message_bar.hide()
    assert _settled_width(qtbot, window) == width


def test_text_that_fits_is_shown_whole_and_as_rich_text(qtbot):
    label = ElidedLabel("<b>#3 gemm</b> · running")
    qtbot.addWidget(label)
    label.setToolTip("the session shown")
    label.resize(600, 30)
    label.show()
    qtbot.waitExposed(label)
    assert not label.elided and label.shown_text == "<b>#3 gemm</b> · running"
    assert label.toolTip() == "the session shown"
    label.resize(40, 30)
    qtbot.waitUntil(lambda: label.elided)
    assert label.shown_text.endswith("…") and label.toolTip() == label.text()
    label.resize(600, 30)
    qtbot.waitUntil(lambda: not label.elided)
    assert label.shown_text == label.text() and label.toolTip() == "the session shown"
    assert label.minimumSizeHint().width() <= 60 < label.sizeHint().width()

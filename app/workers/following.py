"""What the views that follow a session share: reading its newly stored trials, and catching up on
drawing only when they are shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QWidget

from tunelab.app.widgets.buffers import TrialColumns
from tunelab.app.widgets.timers import single_shot
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store


def read_new(
    store: Store, session_id: int | None, since_id: int, on_error: Callable[[str], Any]
) -> TrialColumns | None:
    """The session's trials stored after ``since_id`` as columns; None (and ``on_error(message)``) when
    the store cannot be read, None without a word when no session is followed."""
    if session_id is None:
        return None
    try:
        return store.trial_columns(session_id, since_id=since_id)
    except TunelabError as exc:
        on_error(str(exc))
        return None


class DrawnWhenShown(QWidget):
    """A view that draws only while it is shown, since drawing is the GUI thread's one real cost: a
    redraw asked for while it is hidden only notes that it is behind (`_stale`), and showing it draws.
    `_redraw_timer` (started by the subclass as trials arrive) gathers the redraws asked for within
    `redraw_ms` into one. A subclass draws in `_draw`."""

    def __init__(self, redraw_ms: int | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._stale = False
        self._redraw_timer = single_shot(self, redraw_ms, self._on_redraw)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802
        super().showEvent(event)
        if self._stale:
            self._on_redraw()

    def _on_redraw(self) -> None:
        self._stale = not self.isVisible()
        if not self._stale:
            self._draw()

    def _draw(self) -> None:
        raise NotImplementedError

"""Views shown as the app shows them, for the view tests: owned by qtbot, sized, shown, on a session."""

from __future__ import annotations

from typing import Any, TypeVar

View = TypeVar("View")


def on_screen(
    qtbot: Any, view: View, session_id: int | None = None, size: tuple[int, int] | None = None
) -> View:
    """``view`` added to qtbot (closed after the test), resized to ``size`` (else its own), shown, and set
    to ``session_id`` where one is given."""
    qtbot.addWidget(view)
    if size is not None:
        view.resize(*size)
    view.show()
    if session_id is not None:
        view.set_session(session_id)
    return view

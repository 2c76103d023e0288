"""What the views that follow a session share: reading its newly stored trials, and catching up on
drawing only when they are shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tunelab.app.widgets.buffers import TrialColumns
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


def behind_while_hidden(view: Any) -> bool:
    """True when ``view`` is hidden: it then only remembers that it is behind (``view._stale``) and
    draws when shown, since drawing is the GUI thread's one real cost. False (and not stale) otherwise."""
    view._stale = not view.isVisible()
    return view._stale

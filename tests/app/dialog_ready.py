"""Waiting for the New-session dialog's space editor: it derives the space in a worker thread."""

from __future__ import annotations

from typing import Any

SPACE_WAIT_MS = 120_000  # an auto space's sketches on a loaded 2-core machine


def settled(qtbot: Any, dialog: Any, timeout_ms: int = SPACE_WAIT_MS) -> Any:
    """``dialog`` once its space editor has derived the space (or said why it cannot)."""
    qtbot.waitUntil(lambda: not dialog.space_editor.is_pending(), timeout=timeout_ms)
    return dialog

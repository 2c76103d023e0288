"""JSON text as the store keeps it in its columns (compact in, decoded fast out), and a stored row's id.

Package-private helpers of ``tunelab.core.store``'s modules.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from tunelab.core.errors import StoreError


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


_json_decode = json.JSONDecoder().decode


def _loads(text: str | None) -> Any:
    return None if text is None else _json_decode(text)


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The rowid an INSERT on `cursor` just created (sqlite3 types it optional: None before any insert)."""
    rowid = cursor.lastrowid
    if rowid is None:
        raise StoreError("the database did not report the id of the row it stored")
    return rowid

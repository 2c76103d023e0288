"""The checks both spaces run on edited space data: the list of entries it holds, its integers."""

from __future__ import annotations

import math
from typing import Any

from tunelab.core.errors import SpaceError


def entry_list(data: Any, key: str, space: str) -> list[Any]:
    """``data[key]``, the entries an edited space is made of (its rules, its knobs); SpaceError unless
    ``data`` is a JSON object holding that list. ``space`` names the space in the message ("an auto
    space")."""
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise SpaceError(f'{space} is a JSON object with a "{key}" list')
    return data[key]


def is_int_in(value: Any, lo: int, hi: float = math.inf) -> bool:
    """``value`` is an integer with ``lo <= value <= hi``; JSON's ``true`` and ``false`` are not integers
    here, though Python's bool is an int."""
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi

"""JSON text as the store keeps it in its columns: compact on the way in, decoded fast on the way out.

Package-private helpers of ``tunelab.core.store``'s modules.
"""

from __future__ import annotations

import json
from typing import Any


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


_json_decode = json.JSONDecoder().decode


def _loads(text: str | None) -> Any:
    return None if text is None else _json_decode(text)

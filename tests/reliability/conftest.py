"""The engine tests' helpers (tests/core) importable in the reliability tests, and their `store` fixture here too."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
from stores import store  # noqa: F401  (a fixture: pytest finds it by its name here)

"""Icons and the stylesheet, found next to the package (installed) or in the source tree's resources/."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from PySide6.QtGui import QIcon

_HERE = Path(__file__).resolve().parent


@cache
def resource_dir() -> Path:
    """The source tree's top-level `resources/`, else where a wheel installs it (`share/tunelab`)."""
    for candidate in (_HERE.parent / "resources", Path(sys.prefix) / "share" / "tunelab" / "resources"):
        if (candidate / "tunelab.qss").is_file():
            return candidate
    return _HERE.parent / "resources"


def icon(name: str) -> QIcon:
    """The icon `resources/icons/<name>.svg`; an empty icon when it is missing (never an error)."""
    path = resource_dir() / "icons" / f"{name}.svg"
    return QIcon(str(path)) if path.is_file() else QIcon()


def stylesheet() -> str:
    path = resource_dir() / "tunelab.qss"
    return path.read_text(encoding="utf-8") if path.is_file() else ""

"""The system libraries Qt's xcb platform plugin needs, checked before a QApplication exists.

Without one of them Qt prints "Could not load the Qt platform plugin "xcb"" and aborts the process with a
core dump; tunelab names the missing Debian packages and the apt command instead. No Qt import here: the
check runs before Qt is loaded.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping

# What PySide6's plugins/platforms/libqxcb.so loads (its own NEEDED entries and those of
# libQt6XcbQpa / libQt6Gui / libQt6DBus, as `ldd` lists them), soname -> the Debian package holding it.
# The base libraries every desktop has (libc, libstdc++, zlib...) are left out.
XCB_LIBRARIES: dict[str, str] = {
    "libxcb.so.1": "libxcb1",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
}


def library_loads(soname: str) -> bool:
    """Whether the dynamic loader finds and loads `soname` (the same search Qt's plugin load makes)."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def platform_is_xcb(environ: Mapping[str, str]) -> bool:
    """Whether Qt will open its xcb platform: QT_QPA_PLATFORM unset (and no Wayland session Qt would
    prefer) or exactly `xcb`, and an X display to connect to."""
    if not environ.get("DISPLAY"):
        return False
    platform = environ.get("QT_QPA_PLATFORM", "").strip()
    if platform:
        return platform == "xcb"
    wayland_session = environ.get("XDG_SESSION_TYPE") == "wayland" and bool(environ.get("WAYLAND_DISPLAY"))
    return not wayland_session


def missing_packages(present: Callable[[str], bool] = library_loads) -> list[str]:
    """The Debian packages whose libraries `present` says are missing, in the table's order, once each."""
    missing: list[str] = []
    for soname, package in XCB_LIBRARIES.items():
        if package not in missing and not present(soname):
            missing.append(package)
    return missing


def xcb_blocker(environ: Mapping[str, str], present: Callable[[str], bool] = library_loads) -> str | None:
    """The one line to print instead of Qt's abort when the xcb plugin cannot load, or None when it can
    (or when Qt will not use xcb at all)."""
    if not platform_is_xcb(environ):
        return None
    missing = missing_packages(present)
    if not missing:
        return None
    names = " ".join(missing)
    return (
        f"tunelab: error: the desktop app needs system libraries Qt's xcb plugin loads, missing here: "
        f"{names} (install them: sudo apt-get install {names})"
    )

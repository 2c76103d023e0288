"""First run on a fresh Debian: the libraries Qt's xcb plugin needs are named, with the apt command,
instead of Qt's plugin abort."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tunelab.app.system_libs import XCB_LIBRARIES, library_loads, missing_packages, xcb_blocker

FRESH_DEBIAN_LACKS = {"libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"}


def fresh_debian(soname: str) -> bool:
    return soname not in FRESH_DEBIAN_LACKS


def test_the_missing_packages_are_named_once_with_the_apt_command():
    line = xcb_blocker({"DISPLAY": ":0"}, present=fresh_debian)
    assert line is not None and "\n" not in line
    assert "apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in line
    assert missing_packages(fresh_debian) == ["libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"]


def test_nothing_is_said_when_every_library_is_there():
    assert xcb_blocker({"DISPLAY": ":0"}, present=lambda soname: True) is None


@pytest.mark.parametrize(
    "environ",
    [
        {},  # no display at all: the no-display message speaks instead
        {"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"},
        {"DISPLAY": ":0", "QT_QPA_PLATFORM": "wayland"},
        {"DISPLAY": ":0", "XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0"},
    ],
)
def test_no_check_when_qt_will_not_open_xcb(environ):
    assert xcb_blocker(environ, present=lambda soname: False) is None


def test_the_check_runs_when_xcb_is_asked_for():
    nothing = xcb_blocker({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, present=lambda soname: False)
    assert nothing is not None
    assert all(package in nothing for package in set(XCB_LIBRARIES.values()))


def test_the_check_passes_on_this_machine():
    """The real loader, in a fresh process set up as for a person's X session: nothing is missing here."""
    if not library_loads("libxcb.so.1"):
        pytest.skip("no xcb libraries on this machine (the desktop app could not open an X window here)")
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env["DISPLAY"] = ":0"
    code = "import os, sys; from tunelab.app.system_libs import xcb_blocker; print(xcb_blocker(os.environ))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"

"""`tunelab` / `tunelab gui`: open the main window on a store (the default one, --db or $TUNELAB_DB)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tunelab.app.system_libs import xcb_blocker

APP_NAME = "tunelab"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tunelab gui", description="The tunelab desktop app.")
    parser.add_argument("--db", help="the tunelab database (default: $TUNELAB_DB or the user data folder)")
    args, _qt_args = parser.parse_known_args(argv)
    return args


def _display_available() -> bool:
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(db_path: str | None = None, argv: list[str] | None = None) -> int:
    """Run the GUI until its window closes; returns the exit status (2 when the store cannot be opened)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(argv)
    if not _display_available():
        # Qt would abort the process with a core dump; say what is wrong instead.
        print(
            "tunelab: error: no display to open a window on (set DISPLAY, run under xvfb-run, "
            "or use the command line: tunelab --help)",
            file=sys.stderr,
        )
        return 2
    blocker = xcb_blocker(os.environ)
    if blocker is not None:
        # Qt would print its plugin abort and dump core; name the packages instead.
        print(blocker, file=sys.stderr)
        return 2
    from PySide6.QtCore import QCoreApplication, QSettings
    from PySide6.QtWidgets import QApplication, QMessageBox

    from tunelab.app.main_window import MainWindow
    from tunelab.app.resources import icon, stylesheet
    from tunelab.core.errors import TunelabError
    from tunelab.core.store import Store, default_db_path

    QCoreApplication.setOrganizationName(APP_NAME)
    QCoreApplication.setApplicationName(APP_NAME)
    existing = QApplication.instance()
    app = (
        existing
        if isinstance(existing, QApplication)
        else QApplication([sys.argv[0] if sys.argv else APP_NAME, *argv])
    )
    app.setApplicationDisplayName("tunelab")
    app.setDesktopFileName("tunelab")
    app.setWindowIcon(icon("tunelab"))
    app.setStyleSheet(stylesheet())

    path = Path(db_path or args.db or default_db_path()).expanduser()
    try:
        store = Store(path)
    except TunelabError as exc:
        QMessageBox.critical(None, "tunelab", f"Cannot open the store:\n{exc}")
        print(f"tunelab: {exc}", file=sys.stderr)
        return 2
    window = MainWindow(store, QSettings())
    window.show()
    try:
        return int(app.exec())
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())

"""The QSettings fixtures of the app tests and the GUI benchmarks: never the user's real configuration."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QSettings


@pytest.fixture(scope="session", autouse=True)
def _isolated_settings(tmp_path_factory) -> Iterator[None]:
    """QSettings() never touches the user's real configuration."""
    folder = tmp_path_factory.mktemp("settings")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    for scope in (QSettings.Scope.UserScope, QSettings.Scope.SystemScope):
        QSettings.setPath(QSettings.Format.IniFormat, scope, str(folder))
    yield
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def settings(tmp_path) -> QSettings:
    """A settings file of the test's own."""
    return QSettings(str(tmp_path / "tunelab.ini"), QSettings.Format.IniFormat)

"""Test databases: a fresh real store for each test, planted kernel faults, and a copy of a database file."""

from __future__ import annotations

import sqlite3

import pytest

from tunelab.core.faults import COUNTER_ENV, PLANT_ENV
from tunelab.core.store import Store


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "tunelab.sqlite")
    yield s
    s.close()


def plant(monkeypatch, tmp_path, value: str) -> None:
    """Plant the kernel fault ``value`` in the children this test starts, counting runs in ``tmp_path``."""
    monkeypatch.setenv(PLANT_ENV, value)
    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / "plant-counter"))


def copy_database(src, dst):
    """``dst``, made a consistent copy of the SQLite database ``src`` by SQLite's backup."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()
    return dst

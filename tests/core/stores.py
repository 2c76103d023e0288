"""Test databases: a fresh real store for each test, planted kernel faults, a copy of a database file, and
sessions and trials written through the store's own API where a test needs them without measuring."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tunelab.core.faults import COUNTER_ENV, PLANT_ENV
from tunelab.core.records import Config, NewTrial, SessionSpec
from tunelab.core.store import Store

Said = TypeVar("Said")


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


def add_session(store: Store, spec: SessionSpec | None = None, **columns: Any) -> int:
    """A session with no trial, written as an older tunelab or an import leaves one: ``spec`` (by default
    gemm 8^3) on LLVM with an empty template space, unless ``columns`` (``store.create_session``'s keywords)
    say otherwise. Returns its id."""
    values: dict[str, Any] = dict(
        target_json={"kind": "llvm"},
        target_kind="llvm",
        space_json={"kind": "template", "knobs": []},
        tvm_version="test",
        flops=1024.0,
    )
    spec = spec or SessionSpec(workload="gemm", shape={"M": 8, "N": 8, "K": 8})
    return store.create_session(spec, **(values | columns))


def new_trial(config: Config, samples_ms: tuple[float, ...] = (1.0,), **changes: Any) -> NewTrial:
    """A trial measured ok just now in round 0, as the loop stores one; ``changes`` set any other field (a
    failed trial: ``status``, ``error`` and no samples)."""
    now = time.time()
    values: dict[str, Any] = dict(
        round=0,
        config=config,
        status="ok",
        error=None,
        samples_ms=tuple(samples_ms),
        predicted_ms=None,
        build_s=0.1,
        run_s=0.1,
        started_at=now,
        finished_at=now + 0.2,
    )
    return NewTrial(**(values | changes))


def open_built(built: tuple[Path, Said]) -> Iterator[tuple[Store, Said]]:
    """For a test's fixture (``yield from open_built(...)``): the store a run-wide fixture built, as
    ``(path, what it says of it)``, opened for the one test and closed after it."""
    path, said = built
    store = Store(path)
    yield store, said
    store.close()

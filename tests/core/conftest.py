"""Shared fixtures for the engine tests: real TVM on the LLVM target, real SQLite files."""

from __future__ import annotations

import pytest
from specs import small_spec
from stores import store  # noqa: F401  (a fixture: pytest finds it by its name here)

from tunelab.core.store import Store


@pytest.fixture(scope="session")
def finished_session(tmp_path_factory):
    """One finished real LLVM session (GEMM 32^3, xgb, 8 trials) shared by read-only tests."""
    from tunelab.core.session.loop import create_session

    path = tmp_path_factory.mktemp("finished") / "tunelab.sqlite"
    s = Store(path)
    session = create_session(s, small_spec(tuner="xgb"))
    list(session.run())
    yield path, session.session_id
    s.close()

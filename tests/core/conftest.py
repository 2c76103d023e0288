"""Shared fixtures for the engine tests: real TVM on the LLVM target, real SQLite files."""

from __future__ import annotations

import pytest
from specs import small_spec
from stores import store  # noqa: F401  (a fixture: pytest finds it by its name here)


@pytest.fixture(scope="module")
def cluster():
    """A real RPC tracker and two real servers on 127.0.0.1 (tests/rpc_cluster.py), for one test module."""
    from rpc_cluster import start_cluster

    c = start_cluster(2)
    yield c
    c.close()


@pytest.fixture(scope="session")
def finished_session(tmp_path_factory):
    """One finished real LLVM session (GEMM 32^3, xgb, 8 trials) shared by read-only tests."""
    from confirming import finished_in_file  # imports the session loop, and with it TVM: only when asked

    path = tmp_path_factory.mktemp("finished") / "tunelab.sqlite"
    return path, finished_in_file(path, small_spec(tuner="xgb"))

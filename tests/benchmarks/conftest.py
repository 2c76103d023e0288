"""Fixtures for the GUI and store benchmarks (BENCHMARKS.md): a cached store holding one GEMM 512^3
session of 100,000 trials, an offscreen QApplication styled as the app is, isolated settings, and a
collector whose plain timings are printed at the end of the run.

The benchmarks live outside ``testpaths``, so plain ``pytest`` never collects them; items collected
here are also skipped unless ``tests/benchmarks`` (or a file in it) is named on the command line, so
``pytest tests`` stays quick too.

Run them with ``QT_QPA_PLATFORM=offscreen python -m pytest tests/benchmarks -q -s``.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import pytest

# QSettings in the run's own folder, and a file of each test's own: the app tests' fixtures.
from tests.app.qt_settings import _isolated_settings, settings  # noqa: F401
from tunelab.core.store import Store, schema_version

HERE = Path(__file__).resolve().parent


def _named_here(config: pytest.Config) -> bool:
    for arg in config.invocation_params.args:
        if arg.startswith("-"):
            continue
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _named_here(config):
        return
    skip = pytest.mark.skip(reason="benchmarks run only when tests/benchmarks is named (BENCHMARKS.md)")
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)


# ---------------------------------------------------------------------------------- the big store


def _cache_dir() -> Path:
    folder = Path(os.environ.get("TUNELAB_BENCH_CACHE") or Path(tempfile.gettempdir()) / "tunelab-bench")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _usable(path: Path, n_trials: int) -> int | None:
    """The id of the big session in a cached store, or None when the file is missing or not it."""
    if not path.is_file():
        return None
    try:
        with Store(path, create=False) as store:
            sessions = store.sessions()
            if len(sessions) == 1 and sessions[0].n_trials == n_trials and sessions[0].status == "finished":
                return sessions[0].id
    except Exception:  # noqa: BLE001 - a broken cache is rebuilt
        return None
    return None


@pytest.fixture(scope="session")
def big_store(request) -> tuple[Path, int]:
    """(path, session id) of a store holding one finished GEMM 512^3 session with 100,000 trials.

    Built once (about a minute, through Store.add_trial) and kept in ``$TUNELAB_BENCH_CACHE`` or
    ``<tmp>/tunelab-bench``; the file name carries the builder's and the schema's version, so a change
    to either builds a new one. Benchmarks only read it (their windows never start a session on it).
    """
    import big_store as builder

    path = _cache_dir() / f"gemm512-{builder.N_TRIALS}-b{builder.BUILD_VERSION}-s{schema_version()}.sqlite"
    session_id = _usable(path, builder.N_TRIALS)
    if session_id is None:
        partial = path.with_name(path.name + ".partial")
        for p in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            p.unlink(missing_ok=True)
        started = time.perf_counter()
        builder.build(partial)
        built_s = time.perf_counter() - started
        for suffix in ("-wal", "-shm"):
            Path(f"{partial}{suffix}").unlink(missing_ok=True)  # checkpointed and closed: empty
        partial.replace(path)
        session_id = _usable(path, builder.N_TRIALS)
        assert session_id is not None, f"the big store at {path} did not come out as expected"
        request.config._bench_notes.append(
            f"built the {builder.N_TRIALS}-trial store through Store.add_trial in {built_s:.1f} s -> {path}"
        )
    _check_read_back(path, session_id)
    return path, session_id


def _check_read_back(path: Path, session_id: int) -> None:
    """A few trials read back through Store.trials equal the rows (and samples) stored for them."""
    import big_store as builder

    with Store(path, create=False) as store:
        tail = store.trials(session_id, since_id=store.max_trial_id() - 3, with_samples=True)
        assert len(tail) == 3
        conn = sqlite3.connect(path)
        try:
            for t in tail:
                config, status, latency, predicted = conn.execute(
                    "SELECT config, status, latency_ms, predicted_ms FROM trials WHERE id = ?", (t.id,)
                ).fetchone()
                samples = [
                    r[0]
                    for r in conn.execute("SELECT ms FROM samples WHERE trial_id = ? ORDER BY idx", (t.id,))
                ]
                assert t.config == json.loads(config) and t.status == status
                assert t.latency_ms == latency and t.predicted_ms == predicted
                assert list(t.samples_ms) == samples
                assert t.index == builder.N_TRIALS - 3 + tail.index(t)
        finally:
            conn.close()


# ---------------------------------------------------------------------------------- Qt


@pytest.fixture(scope="session")
def styled_qapp(qapp):
    """pytest-qt's QApplication with the app's style sheet (what the real app paints with)."""
    from tunelab.app.resources import stylesheet

    qapp.setStyleSheet(stylesheet())
    return qapp


# ---------------------------------------------------------------------------------- reporting


def pytest_configure(config: pytest.Config) -> None:
    config._bench_results = []  # (name, stats dict)
    config._bench_notes = []


@pytest.fixture
def record(request):
    """record(name, seconds_list | dict, target_ms=None, note="") keeps a plain timing for the summary."""

    def _record(name: str, values, target_ms: float | None = None, note: str = "") -> None:
        if isinstance(values, dict):
            row = dict(values)
        else:
            ms = sorted(1000.0 * v for v in values)
            row = {"n": len(ms), "min_ms": ms[0], "median_ms": statistics.median(ms), "max_ms": ms[-1]}
        row["target_ms"] = target_ms
        row["note"] = note
        request.config._bench_results.append((name, row))

    return _record


def _num(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    results = getattr(config, "_bench_results", [])
    notes = getattr(config, "_bench_notes", [])
    if not results and not notes:
        return
    tr = terminalreporter
    tr.section("tunelab benchmarks (plain timings, ms)")
    for note in notes:
        tr.write_line(note)
    for name, row in results:
        fields = [
            f"{k}={_num(v)}" if isinstance(v, float) else f"{k}={v}"
            for k, v in row.items()
            if k not in ("target_ms", "note") and v is not None
        ]
        target = row.get("target_ms")
        verdict = ""
        if target is not None:
            worst = row.get("median_ms", row.get("worst_ms"))
            verdict = (
                f"  target < {target:g} ms: {'met' if worst is not None and worst < target else 'MISSED'}"
            )
        tr.write_line(f"{name:<44} {' '.join(fields)}{verdict}")
        if row.get("note"):
            tr.write_line(f"{'':<44} {row['note']}")
    out = os.environ.get("TUNELAB_BENCH_JSON")
    if out:
        Path(out).write_text(json.dumps({"notes": notes, "results": results}, indent=1))

"""Every app worker waits for the app's one import of TVM (tunelab.app.workers.tvm_loader) before its work.

Two threads importing TVM at once left it half initialised for the whole process (the target probe's
worker and the session list on the GUI thread, on every relaunch). Pinned with real CallWorkers on a
real store: while the import is unfinished no worker runs, whatever it calls; once it finishes, all do;
an import that failed is one message that says to restart, in every worker. The whole app in fresh
processes is tests/app/test_relaunch.py."""

from __future__ import annotations

import threading

import pytest

from tunelab.app.workers import tvm_loader
from tunelab.app.workers.engine import CallWorker
from tunelab.core.store import Store


def _ran(_store, started: threading.Event) -> str:
    started.set()
    return "ran"


@pytest.fixture
def unfinished_import(monkeypatch):
    """The loader's state as it is while its thread still imports (the real thread is not restarted)."""
    done = threading.Event()
    monkeypatch.setattr(tvm_loader, "_done", done)
    monkeypatch.setattr(tvm_loader, "_thread", threading.current_thread())
    monkeypatch.setattr(tvm_loader, "_error", None)
    return done


def test_no_worker_runs_before_the_tvm_import_has_finished(qtbot, tmp_path, unfinished_import):
    db = tmp_path / "t.sqlite"
    Store(db).close()
    started = [threading.Event(), threading.Event()]
    results: list[str] = []
    workers = [CallWorker(db, _ran, started[0]), CallWorker(None, lambda e: _ran(None, e), started[1])]
    for worker in workers:
        worker.succeeded.connect(results.append)
        worker.start()
    assert not tvm_loader.ready()
    assert not started[0].wait(0.5) and not started[1].is_set()  # both wait, store-only work too
    unfinished_import.set()
    assert tvm_loader.ready()
    for worker in workers:
        assert worker.wait(60_000)
    qtbot.waitUntil(lambda: results == ["ran", "ran"], timeout=10_000)


def test_a_failed_import_is_one_message_that_says_to_restart(qtbot, tmp_path, unfinished_import, monkeypatch):
    monkeypatch.setattr(tvm_loader, "_error", "ImportError: cannot import name 'Device'")
    unfinished_import.set()
    assert not tvm_loader.ready()
    started = threading.Event()
    failures: list[str] = []
    worker = CallWorker(None, lambda: _ran(None, started))
    worker.failed.connect(lambda message, _details: failures.append(message))
    worker.start()
    assert worker.wait(60_000)
    qtbot.waitUntil(lambda: len(failures) == 1, timeout=10_000)
    assert not started.is_set()
    assert "TVM could not be imported" in failures[0] and "restart tunelab" in failures[0]
    assert "\n" not in failures[0]


def test_the_loader_imports_on_its_own_thread_once():
    tvm_loader.start()
    tvm_loader.start()
    tvm_loader.wait(120)
    assert tvm_loader.ready()
    assert tvm_loader._thread is not None and tvm_loader._thread.name == tvm_loader.THREAD_NAME
    names = [t.name for t in threading.enumerate()]
    assert names.count(tvm_loader.THREAD_NAME) <= 1


def test_no_app_module_imports_tvm_when_it_is_imported():
    """TVM is imported once, on the loader's thread (tunelab.app.workers.tvm_loader): a module of the app
    that pulled it in at import would import it on the GUI thread at launch, racing the loader (the
    cost-model view did, through the bias report's module, until its statistics moved to
    tunelab.core.trust.bias_stats). Every app module is imported in a fresh interpreter."""
    import pkgutil
    import subprocess
    import sys

    import tunelab.app

    names = [m.name for m in pkgutil.walk_packages(tunelab.app.__path__, "tunelab.app.")]
    names = [n for n in names if not n.endswith("__main__")]
    assert "tunelab.app.views.costmodel_view" in names and "tunelab.app.main_window" in names
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "    if 'tvm' in sys.modules:\n"
        "        print(name); break\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"importing {out.stdout.strip()} imported TVM"

"""Measurement on TVM's RPC tracker with real parts: `python -m tvm.exec.rpc_tracker`, two
`python -m tvm.exec.rpc_server` processes on 127.0.0.1 and MetaSchedule's RPCRunner, a real session
through them, a server killed while it measures, and the bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import replace

import psutil
import pytest
from cli_runs import run_tunelab
from rpc_cluster import free_port
from specs import FAST_MEASURE, small_spec

from tunelab.core.faults import COUNTER_ENV, PLANT_ENV
from tunelab.core.measure.remote import RemoteError, tracker_summary
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store

pytestmark = pytest.mark.slow


def remote_spec(cluster, **changes):
    measure = replace(
        FAST_MEASURE, rpc_tracker=str(cluster.tracker), rpc_key=cluster.key, rpc_workers=2, cooldown_s=0
    )
    base = dict(shape={"M": 64, "N": 64, "K": 256}, trials=8, batch=4, measure=measure)
    base.update(changes)
    return small_spec(**base)


def test_a_session_is_measured_on_both_servers_as_well_as_here(cluster, tmp_path, monkeypatch):
    store = Store(tmp_path / "tunelab.sqlite")
    remote = create_session(store, remote_spec(cluster))
    trials = list(remote.run())
    assert store.session(remote.session_id).status == "finished"
    assert len(trials) == 8 and all(t.ok for t in trials), [t.error for t in trials]
    # every trial names the server that measured it; two workers keep both busy
    assert {t.device for t in trials} == set(cluster.servers), [t.device for t in trials]
    stamps = store.trial_telemetry(remote.session_id)
    assert {s["remote_device"] for s in stamps.values()} == set(cluster.servers)
    # the same seed measures the same configs here, on as many threads as a server has: the kernels'
    # quality agrees within noise (the runner's workers start with the session and inherit the variable)
    monkeypatch.setenv("TVM_NUM_THREADS", str(cluster.server_threads))
    local = create_session(store, remote_spec(cluster, measure=replace(FAST_MEASURE, cooldown_s=0)))
    here = {json.dumps(t.config, sort_keys=True): t for t in local.run()}
    assert all(t.device is None for t in here.values())
    there = {json.dumps(t.config, sort_keys=True): t for t in trials}
    assert set(here) == set(there)
    best_here = min(t.latency_ms for t in here.values())
    best_there = min(t.latency_ms for t in there.values())
    print(f"\nbest here {best_here:.4f} ms, through the tracker {best_there:.4f} ms")
    assert 0.7 < best_there / best_here < 1.43, (best_here, best_there)
    store.close()


def _serving(pid: int) -> bool:
    """Whether the server with this pid is serving a session: `tvm.exec.rpc_server` runs its listen loop
    in a child (a PopenWorker), which forks a grandchild per session."""
    try:
        return len(psutil.Process(pid).children(recursive=True)) >= 2
    except psutil.NoSuchProcess:
        return False


def test_a_server_lost_mid_session_costs_no_trial(cluster, tmp_path):
    doomed = cluster.add_server()  # a third server, killed while it runs a candidate
    pid = cluster.servers[doomed].pid
    store = Store(tmp_path / "tunelab.sqlite")
    session = create_session(store, remote_spec(cluster, trials=16))
    stages: list[str] = []
    session.on_stage.append(stages.append)
    killed_at: list[float] = []

    def kill_while_serving() -> None:
        reader = Store(tmp_path / "tunelab.sqlite")  # a connection of this thread's own
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed_at:
            if reader.session(session.session_id).n_trials >= 4 and _serving(pid):
                cluster.kill_server(doomed)
                killed_at.append(time.time())
            time.sleep(0.01)
        reader.close()

    watcher = threading.Thread(target=kill_while_serving, daemon=True)
    watcher.start()
    trials = list(session.run())
    watcher.join()
    assert killed_at, "the third server never got a candidate to measure"
    record = store.session(session.session_id)
    assert record.status == "finished" and record.n_trials == 16 and record.n_failed == 0, [
        t.error for t in trials if not t.ok
    ]
    # what it measured before it died counts; nothing after it died was measured there
    assert all(t.device != doomed for t in trials if t.started_at > killed_at[0] + 1 and t.run_s)
    assert any(f"RPC server {doomed} was lost" in s for s in stages), stages
    assert doomed not in {s.address for s in tracker_summary(cluster.tracker).servers}
    store.close()


def test_wrong_results_name_the_server(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv(PLANT_ENV, "wrong@run/2")  # every second remote run returns garbage
    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / "counter"))
    store = Store(tmp_path / "tunelab.sqlite")
    session = create_session(
        store, remote_spec(cluster, measure=replace(remote_spec(cluster).measure, fail_fast=0))
    )
    trials = list(session.run())
    wrong = [t for t in trials if t.status == "wrong_result"]
    assert wrong and len(wrong) < len(trials)
    for t in wrong:
        assert t.device in cluster.servers, t.device
        assert t.error.startswith(f"on {t.device}: wrong result: max abs error"), t.error
    store.close()


def tunelab(*args: str, db) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TVM_TRACKER_")}
    return run_tunelab(*args, *(["--db", str(db)] if db else []), timeout=300, env=env)


def test_a_tracker_down_or_a_key_without_servers_stores_nothing(cluster, tmp_path):
    store = Store(tmp_path / "tunelab.sqlite")
    down = replace(remote_spec(cluster).measure, rpc_tracker=f"127.0.0.1:{free_port()}")
    with pytest.raises(RemoteError, match="no TVM RPC tracker answers at 127.0.0.1"):
        create_session(store, remote_spec(cluster, measure=down))
    nokey = replace(remote_spec(cluster).measure, rpc_key="nobody")
    with pytest.raises(RemoteError, match=f"no server under key 'nobody'.*{cluster.key} \\(2\\)"):
        create_session(store, remote_spec(cluster, measure=nokey))
    assert store.sessions() == []
    db = tmp_path / "cli.sqlite"
    for args, words in [
        (["--rpc", str(cluster.tracker), "--rpc-key", "nobody"], "no server under key 'nobody'"),
        (["--rpc", "localhost"], "expected HOST:PORT"),
        (["--rpc-key", cluster.key], "--rpc-key needs --rpc HOST:PORT"),
        (["--rpc", str(cluster.tracker)], "--rpc needs --rpc-key"),
    ]:
        proc = tunelab("tune", "gemm", "--shape", "M=32,N=32,K=32", "--trials", "2", *args, db=db)
        assert proc.returncode == 2, (args, proc.stderr)
        assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not db.exists()  # a refused start leaves no (empty) database behind either


def test_target_remote_is_a_servers_cpu_and_a_kernel_it_cannot_run_stores_nothing(cluster, tmp_path):
    """`--target remote` asks a server's TVM for its LLVM triple, CPU and threads; a kernel built for a
    machine the servers are not (here: aarch64 objects, which a server's linker refuses) is caught by the
    remote self-check before the session is stored."""
    from tvm.target import codegen

    from tunelab.core.errors import TargetError

    store = Store(tmp_path / "tunelab.sqlite")
    session = create_session(store, remote_spec(cluster, target="remote", trials=4))
    record = store.session(session.session_id)
    # the servers run on this host: their LLVM names what this process's does
    assert record.target["mtriple"] == str(codegen.llvm_get_system_triple())
    assert record.target["mcpu"] == str(codegen.llvm_get_system_cpu())
    assert record.target["num-cores"] == cluster.server_threads
    trials = list(session.run())
    assert len(trials) == 4 and all(t.ok for t in trials), [t.error for t in trials]
    assert {t.device for t in trials} <= set(cluster.servers)
    arm = '{"kind":"llvm","mtriple":"aarch64-linux-gnu","mcpu":"cortex-a72"}'
    with pytest.raises(TargetError, match=r"fails on server 127\.0\.0\.1:\d+ .*file in wrong format"):
        create_session(store, remote_spec(cluster, target=arm))
    with pytest.raises(TargetError, match="--target remote means a server's CPU: it needs --rpc"):
        create_session(store, small_spec(target="remote"))
    assert [s.id for s in store.sessions()] == [session.session_id]
    store.close()
    db = tmp_path / "cli.sqlite"
    proc = tunelab(
        "tune", "gemm", "--shape", "M=32,N=32,K=32", "--trials", "2", "--target", arm,
        "--rpc", str(cluster.tracker), "--rpc-key", cluster.key, db=db,
    )  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "fails on server" in proc.stderr
    assert not db.exists() or Store(db).sessions() == []


def test_devices_lists_what_the_tracker_holds(cluster):
    proc = tunelab("devices", "--rpc", str(cluster.tracker), "--json", db=None)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {s["address"] for s in doc["servers"] if s["key"] == cluster.key} == set(cluster.servers)
    assert any(k["key"] == cluster.key and k["free"] >= 1 for k in doc["keys"])
    text = tunelab("devices", "--rpc", str(cluster.tracker), db=None)
    assert text.returncode == 0 and cluster.key in text.stdout
    assert all(address in text.stdout for address in cluster.servers)
    down = tunelab("devices", "--rpc", f"127.0.0.1:{free_port()}", db=None)
    assert down.returncode == 2 and "no TVM RPC tracker answers" in down.stderr

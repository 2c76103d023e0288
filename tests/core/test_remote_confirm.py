"""A session measured through TVM's RPC tracker is confirmed on its servers: a real tracker and two real
`python -m tvm.exec.rpc_server` processes on 127.0.0.1 (tests/rpc_cluster.py), a real remote session, its
winners re-measured in fresh server sessions, and a tracker that is down."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
import time
from dataclasses import replace

import psutil
import pytest
from cli_runs import run_tunelab
from confirming import assert_stored_as_it_was, run_confirmed
from rpc_cluster import start_cluster
from specs import FAST_MEASURE, small_spec

from tunelab.core.export.pick import export_pick
from tunelab.core.measure.remote import RemoteError
from tunelab.core.session.loop import create_session
from tunelab.core.store import Store
from tunelab.core.trust.confirm import confirm_session
from tunelab.core.trust.confirmed import CONFIRM_PURPOSE, confirmations
from tunelab.core.usecases.tuning import confirm_when_finished

pytestmark = pytest.mark.slow

CONFIRMING = replace(FAST_MEASURE, cooldown_s=0, confirm_runs=3, confirm_top=2, confirm_max_s=0)


def remote_measure(cluster, **changes):
    fields = dict(rpc_tracker=str(cluster.tracker), rpc_key=cluster.key, rpc_workers=2)
    return replace(CONFIRMING, **{**fields, **changes})


def tunelab(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TVM_TRACKER_")}
    return run_tunelab(*args, timeout=120, env=env)


def test_a_remote_session_is_confirmed_on_its_servers(cluster, tmp_path):
    db = tmp_path / "tunelab.sqlite"
    store = Store(db)
    spec = small_spec(shape={"M": 64, "N": 64, "K": 64}, trials=4, batch=4, measure=remote_measure(cluster))
    session, stages, trials = run_confirmed(store, spec)
    sid = session.session_id
    assert all(t.ok for t in trials), [t.error for t in trials]
    assert any(
        f"in 3 fresh sessions on the servers of {cluster.tracker} (key {cluster.key})" in s for s in stages
    ), stages

    (report,) = session.confirmations
    assert report.source.purpose == CONFIRM_PURPOSE and report.runs == 3 and len(report.schedules) == 2
    full = assert_stored_as_it_was(store, report)
    # every run of every schedule was measured on a server of the key, which it names; no telemetry of
    # this machine stands in for the servers'
    for s in report.schedules:
        assert s.runs == 3 and not s.errors, s.errors
        assert all(m.device in cluster.servers and m.telemetry is None for m in s.measurements)
        assert (
            s.quiet_runs is None
            and s.busy_fraction == 0
            and set(s.layout_ms) == {"staggered", "aligned", "plain"}
        )
    servers = {m["device"] for s in full["schedules"] for m in s["measurements"]}
    assert servers <= set(cluster.servers)
    assert all(address in report.hostname for address in servers), report.hostname
    assert "busy or throttle evidence is not available" in report.summary, report.summary
    assert report.telemetry_status.startswith("not available"), report.telemetry_status

    # the confirmed figures are the two fastest trials', and the ones export and show state
    confirmed = confirmations(store, sid)
    fastest = sorted((t for t in trials if t.ok), key=lambda t: (t.latency_ms, t.id))[:2]
    assert set(confirmed) == {t.id for t in fastest}
    for trial_id, c in confirmed.items():
        assert c.runs == 3 and c.median_ms == pytest.approx(statistics.median(c.samples_ms))
        assert set(c.devices) <= set(cluster.servers) and c.devices
        session_ms = store.trial(trial_id).latency_ms
        assert c.session_ms == pytest.approx(session_ms)
        # the same kernel on the same servers, in the same unit: no telemetry reaches here to tell a busy
        # neighbour (the other test lane's worker moves a microsecond kernel's figure several-fold), a unit
        # slip (seconds for milliseconds) would be 1000x
        assert 0.02 < c.median_ms / session_ms < 50, (c.median_ms, session_ms)
    pick = export_pick(store, sid)
    assert pick.confirmation is not None and pick.confirmation.devices
    assert pick.stated_ms == pytest.approx(confirmed[pick.trial.id].median_ms)
    store.close()

    shown = tunelab("show", str(sid), "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["export"]["trial_id"] == pick.trial.id
    assert doc["export"]["stated_ms"] == pytest.approx(pick.stated_ms)
    assert {c["trial_id"]: c["median_ms"] for c in doc["confirmed"]} == pytest.approx(
        {k: c.median_ms for k, c in confirmed.items()}
    )
    assert all(set(c["devices"]) <= set(cluster.servers) for c in doc["confirmed"])
    text = tunelab("show", str(sid), "--db", str(db))
    assert text.returncode == 0 and "fresh sessions on 127.0.0.1:" in text.stdout, text.stdout


def test_a_tracker_down_confirms_nothing_and_stores_nothing(tmp_path):
    own = start_cluster(1, key="tunelab-going-down")
    store = Store(tmp_path / "tunelab.sqlite")
    try:
        spec = small_spec(trials=2, batch=2, measure=remote_measure(own, rpc_workers=1, confirm_top=1))
        session = confirm_when_finished(create_session(store, spec))
        session.before_finish.insert(0, lambda _: own.close())  # the tracker goes as the session finishes
        stages: list[str] = []
        session.on_stage.append(stages.append)
        trials = list(session.run())
    finally:
        own.close()
    sid = session.session_id
    # the session stands, with its own figures; the confirmation is one line and stores nothing
    assert store.session(sid).status == "finished" and all(t.ok for t in trials)
    failed = [s for s in stages if s.startswith("confirmation failed")]
    assert len(failed) == 1 and f"no TVM RPC tracker answers at {own.tracker}" in failed[0], stages
    assert "\n" not in failed[0]
    with pytest.raises(RemoteError, match=f"no TVM RPC tracker answers at {own.tracker}") as raised:
        confirm_session(store, sid)
    assert "\n" not in str(raised.value)
    assert store.validations(sid) == [] and confirmations(store, sid) == {}
    store.close()


def _serving(pid: int) -> bool:
    """Whether the server with this pid serves a session: its listen loop runs in a child, which forks a
    grandchild per session."""
    try:
        return len(psutil.Process(pid).children(recursive=True)) >= 2
    except psutil.NoSuchProcess:
        return False


def test_a_server_lost_mid_confirmation_costs_no_run(cluster, tmp_path):
    store = Store(tmp_path / "tunelab.sqlite")
    spec = small_spec(trials=3, batch=3, measure=remote_measure(cluster, confirm_runs=0))
    session = create_session(store, spec)
    assert all(t.ok for t in session.run())
    doomed = cluster.add_server()  # a third server, killed while it serves a run of the confirmation
    pid = cluster.servers[doomed].pid
    killed: list[str] = []
    confirming = threading.Event()

    def kill_while_serving() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            if confirming.is_set() and _serving(pid):
                cluster.kill_server(doomed)
                killed.append(doomed)
            time.sleep(0.01)

    watcher = threading.Thread(target=kill_while_serving, daemon=True)
    watcher.start()
    confirming.set()
    try:
        (report,) = confirm_session(store, session.session_id, top_k=1, runs=4, max_s=0)
    finally:
        killed.append("done")  # the watcher stops
        watcher.join()
    assert killed[0] == doomed, "the third server never served a run of the confirmation"
    (s,) = report.schedules
    # every run was measured, none of them on the lost server, and the report names it
    assert s.runs == 4 and not s.errors, s.errors
    assert all(m.device in cluster.servers and m.device != doomed for m in s.measurements)
    assert f"server(s) {doomed} lost mid-run" in report.summary, report.summary
    assert [v["id"] for v in store.validations(session.session_id)] == [report.id]
    store.close()

"""Trials measured on RPC servers (issue "Beyond one machine"), as the Trials table and the Hardware view
show them: the Trials table's Device column names the server of each trial (hidden for a session measured
here), and the Hardware view says plainly that its readings are this machine's, not the device's, and
names the device of each trial it lists.

On real stores: sessions made through the Store with each trial's device set, and one real session
measured through a real tracker and two real servers (tests/rpc_cluster.py)."""

from __future__ import annotations

import csv
import time
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tunelab.app.views.hardware_view import HardwareView, remote_note
from tunelab.app.views.trials.model import COLUMNS, DEVICE_COL
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.core.records import MeasureOptions, NewTrial, SessionSpec
from tunelab.core.store import Store
from tunelab.core.telemetry.readings import TelemetrySample

A, B = "127.0.0.1:9091", "127.0.0.1:9092"
TRACKER = "127.0.0.1:9190"
# (device, status, latency ms) per trial of the remote session: both servers, a failure on one of them
REMOTE_TRIALS = ((A, "ok", 1.5), (B, "ok", 1.2), (A, "run_error", None), (B, "ok", 2.0), (A, "ok", 0.9))


def _session(store: Store, measure: MeasureOptions | None = None) -> int:
    return store.create_session(
        SessionSpec(workload="gemm", shape={"M": 64, "N": 64, "K": 64}, measure=measure or MeasureOptions()),
        target_json={"kind": "llvm"},
        target_kind="llvm",
        space_json={"kind": "template", "knobs": []},
        tvm_version="test",
        flops=2.0 * 64**3,
    )


def _add(store: Store, session_id: int, i: int, device: str | None, status: str = "ok", ms=1.0) -> int:
    now = time.time()
    trial = NewTrial(
        round=0,
        config={"tile": 2**i, "unroll": 16},
        status=status,
        error=None if status == "ok" else "RPCError: the session ended",
        samples_ms=(ms, ms * 1.01, ms * 0.99) if ms else (),
        predicted_ms=None,
        build_s=0.1,
        run_s=0.2,
        started_at=now,
        finished_at=now + 0.1,
        device=device,
    )
    return store.add_trial(session_id, trial, f"k{session_id}-{i}").id


@pytest.fixture
def stores(tmp_path):
    """(store, local session id, remote session id): the local one measured here, the remote one on A and B."""
    store = Store(tmp_path / "remote.sqlite")
    local = _session(store)
    for i in range(3):
        _add(store, local, i, None, "ok", 1.0 + i)
    remote = _session(store, MeasureOptions(rpc_tracker=TRACKER, rpc_key="tunelab-test", rpc_workers=2))
    for i, (device, status, ms) in enumerate(REMOTE_TRIALS):
        _add(store, remote, i, device, status, ms)
    yield store, local, remote
    store.close()


def _shown(view: TrialsTable, col: int) -> list[str]:
    return [view.proxy.data(view.proxy.index(r, col)) for r in range(view.proxy.rowCount())]


def test_the_device_column_names_each_trials_server(qtbot, stores, tmp_path):
    store, local, remote = stores
    view = TrialsTable(store)
    qtbot.addWidget(view)
    view.resize(1280, 600)
    view.show()
    header = view.table.horizontalHeader()
    assert COLUMNS[DEVICE_COL] == "Device"

    view.set_session(local)  # measured here: no column saying "this machine" on every row
    assert view.proxy.rowCount() == 3 and header.isSectionHidden(DEVICE_COL)
    assert set(_shown(view, DEVICE_COL)) == {"this machine"}

    view.set_session(remote)
    assert not header.isSectionHidden(DEVICE_COL)
    assert _shown(view, DEVICE_COL) == [d for d, _, _ in REMOTE_TRIALS]
    tip = view.proxy.data(view.proxy.index(0, DEVICE_COL), Qt.ItemDataRole.ToolTipRole)
    assert tip == f"Measured on the RPC server at {A}"
    assert "RPC server" in view.proxy.headerData(
        DEVICE_COL, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole
    )
    # sorting by it groups each server's trials
    view.table.sortByColumn(DEVICE_COL, Qt.SortOrder.AscendingOrder)
    assert _shown(view, DEVICE_COL) == sorted(d for d, _, _ in REMOTE_TRIALS)
    # the filter finds one server's trials
    view.filter_edit.setText("9092")
    assert set(_shown(view, DEVICE_COL)) == {B} and view.proxy.rowCount() == 2
    view.filter_edit.setText("")
    view.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    # copies and the CSV export carry it
    view.table.selectAll()
    lines = view.selection_text().splitlines()
    assert lines[0].split("\t")[-1] == "Device" and {line.split("\t")[-1] for line in lines[1:]} == {A, B}
    out = tmp_path / "trials.csv"
    view.export_csv(out)
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_id = {t.id: t.device for t in store.trials(remote)}
    assert {int(r["id"]): r["device"] for r in rows} == by_id

    # a session that starts here and gets a trial from a server: the column appears as it arrives
    view.set_session(local)
    assert header.isSectionHidden(DEVICE_COL)
    _add(store, local, 3, B)
    assert view.poll() == 1
    assert not header.isSectionHidden(DEVICE_COL)
    assert _shown(view, DEVICE_COL) == ["this machine"] * 3 + [B]


def test_remote_note_names_the_servers_and_counts_the_rest():
    assert remote_note([None, None]) == ""
    assert remote_note([A, B, A], TRACKER) == (
        f"Measured on {A}, {B} through the RPC tracker at {TRACKER}: these readings are this machine's, "
        "not the device's (the kernels ran there, the telemetry is read here)."
    )
    assert remote_note([A, None, None]).startswith(f"1 of 3 trials measured on {A} through the RPC tracker:")
    many = [f"10.0.0.{i}:9090" for i in range(9)]
    assert "and 3 more through" in remote_note(many)


def test_hardware_view_says_its_readings_are_this_machines_and_lists_each_trials_device(qtbot, stores):
    store, local, remote = stores
    for session_id in (local, remote):
        t0 = store.session(session_id).created_at
        store.add_telemetry(
            session_id,
            [TelemetrySample(t=t0 + 0.1 * i, cpu_load_mean=30.0, cpu_freq_mhz=2500.0) for i in range(20)],
        )
    trials = store.trials(remote)
    busy = trials[1]  # measured on B while a process here was busy: listed, with its device
    store.stamp_trial(busy.id, {"other_busy_pids": [4242], "remote_device": B})
    for t in trials:
        if t.id != busy.id:
            store.stamp_trial(t.id, {"remote_device": t.device})

    view = HardwareView(store, redraw_ms=10)
    qtbot.addWidget(view)
    view.resize(1280, 800)
    view.show()
    view.set_session(remote)
    qtbot.waitExposed(view)
    QApplication.processEvents()
    assert view.stack.currentWidget() is view.panels
    note = view.remote_label.text()
    assert view.remote_label.isVisible(), note
    assert note.startswith(f"Measured on {A}, {B} through the RPC tracker at {TRACKER}:"), note
    assert "these readings are this machine's, not the device's" in note
    # the note is over the plots
    assert view.remote_label.geometry().bottom() <= view.stack.mapTo(view, view.stack.rect().topLeft()).y()
    table = view.disturbed_table
    assert table.horizontalHeaderItem(4).text() == "Device"
    assert table.rowCount() == 1
    assert table.item(0, 0).text() == f"#{busy.number}" and table.item(0, 3).text() == "4242"
    assert table.item(0, 4).text() == B
    assert view.device_of(busy.id) == B

    view.set_session(local)  # measured here: no note
    QApplication.processEvents()
    assert view.remote_label.text() == "" and not view.remote_label.isVisible()


@pytest.fixture(scope="module")
def cluster():
    from rpc_cluster import start_cluster

    c = start_cluster(2)
    yield c
    c.close()


@pytest.mark.slow
def test_a_real_remote_session_shows_its_servers(qtbot, tmp_path, cluster, small_spec):
    """A session measured for real through the tracker: the views show the servers the runner reported."""
    from tunelab.core.session.loop import create_session

    store = Store(tmp_path / "real.sqlite")
    try:
        # the app tests' small measurement (the fixture's), not a conftest module found by import order
        measure = replace(
            small_spec().measure, rpc_tracker=str(cluster.tracker), rpc_key=cluster.key, rpc_workers=2
        )
        session = create_session(store, small_spec(trials=4, batch=4, measure=measure))
        trials = list(session.run())
        assert trials and all(t.device in cluster.servers for t in trials), [t.device for t in trials]

        table = TrialsTable(store)
        qtbot.addWidget(table)
        table.show()
        table.set_session(session.session_id)
        assert not table.table.horizontalHeader().isSectionHidden(DEVICE_COL)
        by_id = {t.id: t.device for t in trials}
        assert {int(i): d for i, d in zip(_shown(table, 1), _shown(table, DEVICE_COL), strict=True)} == by_id

        view = HardwareView(store, redraw_ms=10)
        qtbot.addWidget(view)
        view.show()
        view.set_session(session.session_id)
        QApplication.processEvents()
        note = view.remote_label.text()
        assert note.startswith("Measured on ") and f"through the RPC tracker at {cluster.tracker}" in note
        assert all(d in note for d in set(by_id.values()))
        assert "this machine's, not the device's" in note
    finally:
        store.close()

"""The New-session dialog's "Where to measure" (issue "Beyond one machine"): this machine by default, or
the servers of a TVM RPC tracker, whose keys the dialog asks the tracker for in a thread. Bad input (no
host, no key, a tracker that does not answer) is one message in the dialog and no session starts.

On a real tracker and two real servers (tests/rpc_cluster.py), and a socket that accepts and never
answers, to show the GUI thread does not wait on the network."""

from __future__ import annotations

import socket
import time

import pytest
from dialog_ready import ask_small_gemm, choose_random, settled, small_random_budget
from PySide6.QtCore import QTimer
from rpc_cluster import free_port, start_cluster

from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.core.records import MeasureOptions
from tunelab.core.session.loop import check_spec

pytestmark = pytest.mark.slow

QUERY_MS = 120_000  # the first query imports TVM in its thread: seconds on a loaded machine


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster(2)
    yield c
    c.close()


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    # the catalog workload's space is derived in a thread: wait for it, so Start depends on the remote box only
    qtbot.waitUntil(
        lambda: dialog.space_editor.is_valid() and not dialog.space_editor.is_pending(), timeout=60_000
    )
    return dialog


def _remote(dialog: NewSessionDialog, host: str, port: int) -> None:
    box = dialog.remote_options
    box.remote_radio.setChecked(True)
    box.host_edit.setText(host)
    box.host_edit.textEdited.emit(host)  # as typed
    box.port_spin.setValue(port)


def _query(qtbot, dialog: NewSessionDialog) -> None:
    box = dialog.remote_options
    box.query_button.click()
    assert box.is_querying() and not box.query_button.isEnabled()
    assert not dialog.start_button.isEnabled()
    qtbot.waitUntil(lambda: not box.is_querying(), timeout=QUERY_MS)


def test_this_machine_is_the_default_and_measures_here(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    box = dialog.remote_options
    assert box.local_radio.isChecked() and not box.is_remote
    assert not any(
        w.isEnabled()
        for w in (box.host_edit, box.port_spin, box.key_combo, box.workers_spin, box.query_button)
    )
    assert box.port_spin.value() == 9190  # TVM's default tracker port
    measure = dialog.spec().measure
    assert not measure.remote
    assert (measure.rpc_tracker, measure.rpc_key, measure.rpc_workers) == ("", "", 1)
    assert measure == MeasureOptions()
    assert settled(qtbot, dialog).can_start()
    assert "measured here" in dialog.summary.text()


def test_bad_remote_input_is_one_message_and_no_session_starts(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    box = dialog.remote_options
    assert dialog.measure_box.cooldown_spin.isEnabled()
    box.remote_radio.setChecked(True)
    assert all(w.isEnabled() for w in (box.host_edit, box.port_spin, box.key_combo, box.workers_spin))
    # a remote session never cools down (this machine's load is not the device's): the field says so
    assert not dialog.measure_box.cooldown_spin.isEnabled()
    assert "not used when measuring on an RPC tracker" in dialog.measure_box.cooldown_spin.toolTip()
    # no host
    assert not dialog.can_start()
    assert dialog.error_label.isVisibleTo(dialog)
    assert dialog.error_label.text() == "Remote measurement needs the RPC tracker's host (and port)."
    box.query_button.click()  # nothing to ask
    assert not box.is_querying()
    dialog.start_button.click()
    assert dialog.result() != dialog.DialogCode.Accepted
    # a host, not asked yet: no key to choose
    _remote(dialog, "127.0.0.1", free_port())
    assert not dialog.can_start()
    assert "Query the tracker at 127.0.0.1:" in dialog.error_label.text()
    # HOST:PORT typed into the host field goes into the two fields
    box.host_edit.setText("127.0.0.1:9777")
    box.host_edit.editingFinished.emit()
    assert box.host_edit.text() == "127.0.0.1" and box.port_spin.value() == 9777
    # nothing listens there: the tracker's one sentence, and Start stays off
    port = free_port()
    box.port_spin.setValue(port)
    _query(qtbot, dialog)
    assert not dialog.can_start()
    text = dialog.error_label.text()
    assert text.startswith(f"no TVM RPC tracker answers at 127.0.0.1:{port}"), text
    assert "\n" not in text and dialog.error_label.isVisibleTo(dialog)
    assert box.key_combo.count() == 0
    dialog.start_button.click()
    assert dialog.result() != dialog.DialogCode.Accepted
    # back to this machine: the remote fields no longer stop it
    box.local_radio.setChecked(True)
    assert settled(qtbot, dialog).can_start() and not dialog.error_label.isVisibleTo(dialog)


def test_the_tracker_is_asked_off_the_gui_thread(qtbot, settings):
    """A tracker that accepts the connection and never answers: the click returns at once, the GUI
    keeps running its timers, and the query ends in the dialog's message after its timeout."""
    dialog = _dialog(qtbot, settings)
    box = dialog.remote_options
    box.query_timeout_s = 2.0
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        _remote(dialog, "127.0.0.1", silent.getsockname()[1])
        ticks = []
        timer = QTimer()
        timer.timeout.connect(lambda: ticks.append(time.monotonic()))
        timer.start(50)
        t0 = time.monotonic()
        box.query_button.click()
        assert time.monotonic() - t0 < 0.5
        assert box.is_querying() and "Asking the tracker at 127.0.0.1:" in box.status.text()
        qtbot.waitUntil(lambda: not box.is_querying(), timeout=QUERY_MS)
        timer.stop()
    assert len(ticks) >= 10, "the GUI thread waited on the tracker"
    assert "timed out" in dialog.error_label.text() and not dialog.can_start()


def test_the_trackers_keys_fill_the_key_box_and_the_spec_measures_there(qtbot, settings, cluster):
    dialog = _dialog(qtbot, settings)
    box = dialog.remote_options
    _remote(dialog, cluster.tracker.host, cluster.tracker.port)
    _query(qtbot, dialog)
    assert [box.key_combo.itemText(i) for i in range(box.key_combo.count())] == ["tunelab-test (2 servers)"]
    assert box.key() == cluster.key  # the only key: chosen
    assert box.status.text() == f"The tracker at {cluster.tracker} holds 2 servers under 1 key."
    assert set(box.key_combo.toolTip().removeprefix(f"{cluster.key}: ").split(", ")) == set(cluster.servers)
    box.workers_spin.setValue(4)
    choose_random(dialog)
    assert settled(qtbot, dialog).can_start(), dialog.error_label.text()
    assert f"measured through {cluster.tracker} (tunelab-test, 4 at once)" in dialog.summary.text()
    spec = dialog.spec()
    assert spec.measure.remote
    assert (spec.measure.rpc_tracker, spec.measure.rpc_key, spec.measure.rpc_workers) == (
        str(cluster.tracker),
        cluster.key,
        4,
    )
    check_spec(spec)  # what the session loop takes
    # the rest of the measurement options are the box's as before
    assert spec.measure.number == dialog.number_spin.value()
    dialog.start_button.click()
    qtbot.waitUntil(
        lambda: dialog.result() == dialog.DialogCode.Accepted, timeout=60_000
    )  # checked in a worker

    # Remembered: the next dialog measures there again, once the tracker has answered anew.
    again = NewSessionDialog(settings)
    qtbot.addWidget(again)
    other = again.remote_options
    assert other.is_remote and other.host_edit.text() == cluster.tracker.host
    assert other.port_spin.value() == cluster.tracker.port and other.workers_spin.value() == 4
    qtbot.waitUntil(lambda: not other.is_querying(), timeout=QUERY_MS)
    qtbot.waitUntil(again.can_start, timeout=60_000)
    assert other.key() == cluster.key
    assert again.spec().measure == spec.measure

    # Another port: the keys were the other tracker's, so they go, and Start waits for a new answer.
    other.port_spin.setValue(free_port())
    assert other.key_combo.count() == 0 and not again.can_start()
    assert "Query the tracker at" in again.error_label.text()


def test_a_session_started_from_the_dialog_is_measured_on_the_trackers_servers(
    qtbot, settings, cluster, tmp_path
):
    """New session → Remote → Query → Start in the main window: the child tunes through the tracker and the
    Trials table and the Hardware view name the servers that measured it."""
    from tunelab.app.main_window import MainWindow
    from tunelab.app.views.trials.model import DEVICE_COL
    from tunelab.core.store import Store

    store = Store(tmp_path / "tunelab.sqlite")
    window = MainWindow(store, settings, poll_ms=100, probe_target=False)
    qtbot.addWidget(window)
    window.show()
    dialog = _dialog(qtbot, settings)
    ask_small_gemm(dialog)
    qtbot.waitUntil(
        lambda: dialog.space_editor.is_valid() and not dialog.space_editor.is_pending(), timeout=60_000
    )
    small_random_budget(dialog, trials=4, batch=4)
    dialog.confirm_spin.setValue(0)
    _remote(dialog, cluster.tracker.host, cluster.tracker.port)
    _query(qtbot, dialog)
    dialog.remote_options.workers_spin.setValue(2)
    assert settled(qtbot, dialog).can_start(), dialog.error_label.text()
    dialog.start_button.click()
    qtbot.waitUntil(
        lambda: dialog.result() == dialog.DialogCode.Accepted, timeout=60_000
    )  # checked in a worker
    try:
        assert window.start_session(dialog.spec()) is not None
        qtbot.waitUntil(lambda: window.worker is None, timeout=180_000)
        (record,) = store.sessions()
        assert record.status == "finished", record.error
        assert record.measure["rpc_tracker"] == str(cluster.tracker) and record.measure["rpc_workers"] == 2
        devices = {t.id: t.device for t in store.trials(record.id)}
        assert len(devices) == 4 and set(devices.values()) <= set(cluster.servers), devices

        window.browser.select_session(record.id)
        trials = window.trials
        qtbot.waitUntil(lambda: trials.proxy.rowCount() == 4)
        assert not trials.table.horizontalHeader().isSectionHidden(DEVICE_COL)
        shown = {
            int(trials.proxy.data(trials.proxy.index(r, 1))): trials.proxy.data(
                trials.proxy.index(r, DEVICE_COL)
            )
            for r in range(4)
        }
        assert shown == devices
        window.tabs.setCurrentWidget(window.hardware)
        qtbot.waitUntil(lambda: window.hardware.remote_label.isVisible())
        note = window.hardware.remote_label.text()
        assert f"through the RPC tracker at {cluster.tracker}" in note and "not the device's" in note
        assert all(d in note for d in set(devices.values()))
    finally:
        window.close()
        store.close()


def test_the_servers_cpu_is_a_target_the_dialog_asks_a_server_for(qtbot, settings, cluster):
    """Target "Server's CPU (RPC)": the kernels are built for what a server under the key reports of its
    CPU (`--target remote`); without a tracker and key it says what it needs and Start stays off; the
    server is asked in a thread, and the space is derived for its answer."""
    from tunelab.core.measure.remote import TrackerAddress, remote_target

    dialog = _dialog(qtbot, settings)
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("remote"))
    assert not dialog.target_options.isVisibleTo(dialog)  # no fields: the server names its CPU
    assert not dialog.can_start()
    assert dialog.problem_error.text().startswith("Server's CPU: choose Remote (RPC tracker)")
    assert dialog.target_label.text() == "a server's CPU, once a tracker and key are chosen"
    _remote(dialog, cluster.tracker.host, cluster.tracker.port)
    assert not dialog.can_start()
    _query(qtbot, dialog)  # the key is chosen, so a server is asked
    qtbot.waitUntil(lambda: not dialog.is_asking_server(), timeout=QUERY_MS)
    qtbot.waitUntil(
        lambda: dialog.space_editor.is_valid() and not dialog.space_editor.is_pending(), timeout=60_000
    )
    assert dialog.problem_error.text() == ""
    expected = remote_target(TrackerAddress.parse(str(cluster.tracker)), cluster.key)
    assert dialog._target is not None and dialog._target.json == expected.json
    assert dialog.target_label.text() == expected.description
    assert f"key {cluster.key}" in dialog.target_label.toolTip()
    assert expected.description in dialog.summary.text()
    choose_random(dialog)
    assert settled(qtbot, dialog).can_start(), dialog.error_label.text()
    spec = dialog.spec()
    assert spec.target == "remote" and spec.measure.rpc_key == cluster.key
    assert check_spec(spec).target.json == expected.json  # the session builds for the same target
    dialog.start_button.click()  # checked with the server's answer, not by asking the network again
    qtbot.waitUntil(
        lambda: dialog.result() == dialog.DialogCode.Accepted, timeout=60_000
    )  # checked in a worker
    # Where to measure changed back to this machine: the server's CPU has no server, Start is off
    dialog.remote_options.local_radio.setChecked(True)
    assert not dialog.can_start()
    assert dialog.problem_error.text().startswith("Server's CPU: choose Remote (RPC tracker)")
    # and a CPU target again shows the fields
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    assert dialog.target_options.isVisibleTo(dialog)
    qtbot.waitUntil(dialog.can_start, timeout=60_000)

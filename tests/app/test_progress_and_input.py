"""Progress that is true and input that is never silently changed (issue 25, items 7 and 8): the ETA from
whole batches, a note the moment Start is pressed, "computing…" that says how long, a shape of 0 that is
a message (not 512 again), distinct default names, the GPU options disabled with a note where there is
no GPU."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tunelab.app.dialogs.measure_options import MeasureOptionsBox
from tunelab.app.dialogs.new_session import NewSessionDialog
from tunelab.app.views.bias_table import BiasTable
from tunelab.app.widgets.run_bar import RunBar, eta_seconds
from tunelab.app.workers.telemetry_source import gpu_status_known, machine_gpu_status
from tunelab.core.store import Store


def test_eta_counts_whole_batches_not_the_gaps_between_a_batchs_trials():
    # 8-trial batches of 20 s each (search, build, run), the trials of a batch finishing within 1 s.
    rounds = [(8, 0.0, 20.0), (8, 39.0, 40.0), (8, 59.2, 60.0)]
    # Two whole batches after the first: 40 s for 16 trials -> 2.5 s a trial, 40 trials left.
    assert eta_seconds(rounds, 24, 64) == 100.0
    assert eta_seconds(rounds[:1], 8, 64) == 20.0 / 8 * 56  # the first batch alone: from its start
    assert eta_seconds([], 0, 64) is None
    assert eta_seconds(rounds, 64, 64) == 0.0
    # Paused for an hour between two batches: that hour is not tuning time.
    paused = [(8, 0.0, 20.0), (8, 39.0, 40.0), (8, 3700.0, 3720.0)]
    assert eta_seconds(paused, 24, 64) == (20.0 + 20.0) / 16 * 40


def test_run_bar_eta_from_a_stored_session_and_the_starting_note(qtbot, store):
    record = max(store.sessions(), key=lambda r: r.n_trials)
    bar = RunBar(store, *(_action() for _ in range(2)))
    qtbot.addWidget(bar)
    bar.resize(1400, 40)
    bar.show()
    bar.set_session(record, columns=store.trial_columns(record.id))
    c = store.trial_columns(record.id)
    batches = sorted(set(c["round"].tolist()))
    assert len(batches) >= 2
    # Seconds a trial from the batches after the first: from the first batch's last finish to the last.
    first_end = c["finished_at"][c["round"] == batches[0]].max()
    n_after = int((c["round"] != batches[0]).sum())
    per_trial = (c["finished_at"].max() - first_end) / n_after
    left = 5
    running = type(record)(**{**_fields(record), "n_trials": record.trials_budget - left})
    assert abs(bar.eta(running) - per_trial * left) < 1e-6

    bar.set_session(None)
    bar.set_starting("Starting the tuning process…")
    assert bar.stage == "Starting the tuning process…" and bar.stage_label.isVisible()
    bar.set_session(record.id)  # whichever session is shown, until the session itself is there
    assert bar.stage == "Starting the tuning process…"
    bar.clear_stage()
    assert bar.stage == "" and not bar.stage_label.isVisible()


def test_bias_table_busy_label_says_for_how_long_and_goes(qtbot, monkeypatch):
    from tunelab.app.views import bias_table

    table = BiasTable()
    qtbot.addWidget(table)
    table.show()
    table.set_busy(True)
    assert table.busy_label.isVisible() and table.busy_label.text() == "computing…"
    table._busy_since -= 45  # as if it had run for 45 s
    table._show_busy()
    assert (
        table.busy_label.text().startswith("computing… 45 s (") and "busy machine" in table.busy_label.text()
    )
    assert bias_table.SLOW_S <= 45
    table.set_busy(False)
    assert not table.busy_label.isVisible()


def _dialog(qtbot, settings) -> NewSessionDialog:
    dialog = NewSessionDialog(settings)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.target_combo.setCurrentIndex(dialog.target_combo.findData("llvm"))
    for name, value in {"M": 32, "N": 32, "K": 32}.items():
        dialog._shape_spins[name].setValue(value)
    qtbot.waitUntil(dialog.can_start, timeout=60_000)
    return dialog


def test_a_shape_of_zero_is_a_message_not_a_silent_512(qtbot, settings):
    dialog = _dialog(qtbot, settings)
    spin = dialog._shape_spins["M"]
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, "0")
    qtbot.keyClick(spin, Qt.Key.Key_Tab)  # focus leaves the box: a QSpinBox puts back its last value
    assert spin.value() == 0 and spin.text() == "0"
    qtbot.waitUntil(lambda: dialog.problem_error.isVisible(), timeout=30_000)
    assert "'M' must be at least 1, got 0" in dialog.problem_error.text()
    assert not dialog.start_button.isEnabled()
    # An emptied box is 0 too: said, not replaced.
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClick(spin, Qt.Key.Key_Delete)
    qtbot.keyClick(spin, Qt.Key.Key_Tab)
    assert spin.value() == 0
    spin.setValue(64)
    qtbot.waitUntil(dialog.can_start, timeout=60_000)
    assert not dialog.problem_error.isVisible() and dialog.shape()["M"] == 64


def test_sessions_of_one_problem_get_distinct_default_names(tmp_path, small_spec):
    from tunelab.core.session.loop import create_session

    store = Store(tmp_path / "names.sqlite")
    try:
        names = [create_session(store, small_spec(name="")).record.name for _ in range(3)]
        named = create_session(store, small_spec(name="mine")).record.name
    finally:
        store.close()
    assert names == ["gemm M=32,N=32,K=32", "gemm M=32,N=32,K=32 #2", "gemm M=32,N=32,K=32 #3"]
    assert named == "mine"


def test_gpu_options_disabled_with_a_note_without_a_gpu(qtbot):
    box = MeasureOptionsBox()
    qtbot.addWidget(box)
    box.show()
    qtbot.waitUntil(gpu_status_known, timeout=60_000)  # NVML is asked in a worker; the box follows
    has_gpu, _ = machine_gpu_status()
    assert box.lock_check.isEnabled() == has_gpu and box.l2_combo.isEnabled() == has_gpu
    assert box.gpu_note.isVisible() == (not has_gpu)
    if not has_gpu:
        assert box.gpu_note.text().startswith("No NVIDIA GPU on this machine")


def _action():
    from PySide6.QtGui import QAction

    return QAction("x")


def _fields(record) -> dict:
    from dataclasses import fields

    return {f.name: getattr(record, f.name) for f in fields(record)}

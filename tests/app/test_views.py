"""Each view built from a real store holding real tuned sessions."""

from __future__ import annotations

import csv
import json
import time

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from readings import gpu_burst
from showing import on_screen

from tests.core.stores import add_session, new_trial
from tunelab.app.views.compare import CompareView
from tunelab.app.views.costmodel_view import CostModelView
from tunelab.app.views.hardware_view import HardwareView
from tunelab.app.views.live_plot import LivePlot
from tunelab.app.views.trials.model import COLUMNS
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.app.widgets.plot_export import save_plot


def _first(store):
    return store.sessions()[-1]


def test_live_plot_draws_every_trial(qtbot, store):
    record = _first(store)
    trials = store.trials(record.id)
    view = LivePlot(store, redraw_ms=10)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    assert view.n_trials == len(trials) == 8
    x, y = view.ok_curve.getData()
    ok = [t for t in trials if t.ok]
    assert len(x) == len(ok)
    np.testing.assert_allclose(
        np.power(10, y) if view.log_check.isChecked() else y, [t.latency_ms for t in ok], rtol=1e-9
    )
    best = view.best_curve.yData
    assert best is not None and np.all(np.diff(best) <= 0)  # best so far never gets worse
    assert view.gflops_curve.yData.max() > 0
    assert f"{len(trials)} trials" in view.title.text()
    assert not view.plot_item.getAxis("right").logMode  # GFLOP/s stays linear under a log latency axis


def test_live_plot_marks_failed_trials_at_the_top(qtbot, store_copy):
    record = _first(store_copy)
    failed = new_trial({"broken": 1}, (), round=9, status="build_error", error="TVMError: boom", run_s=None)
    store_copy.add_trial(record.id, failed, "broken")
    view = LivePlot(store_copy, redraw_ms=10)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    assert view.n_failed == 1
    fx, fy = view.failed_curve.getData()
    _, oky = view.ok_curve.getData()
    assert list(fx) == [9] and fy[0] > oky.max()  # the 9th trial of the session: trial #9
    assert "1 failed" in view.title.text()
    view.log_check.setChecked(False)  # linear axis: still drawn, still on top
    fx, fy = view.failed_curve.getData()
    assert fy[0] > view.ok_curve.getData()[1].max()


def test_costmodel_view_pairs_predictions_with_measurements(qtbot, store):
    record = _first(store)
    predicted = [t for t in store.trials(record.id) if t.ok and t.predicted_ms is not None]
    view = CostModelView(store, redraw_ms=10)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    assert view.n_pairs == len(predicted) > 0
    x, y = view.scatter.getData()
    assert len(x) == len(predicted)
    rounds = [r for r in store.rounds(record.id) if r.spearman is not None]
    assert len(view.rank_bars.opts["x"]) == len(rounds)
    assert "Spearman" in view.summary.text()
    view.set_session(None)
    assert view.summary.text() == "No session selected."


def test_trials_table_sorts_filters_shows_details_and_exports(qtbot, store, tmp_path):
    record = _first(store)
    trials = store.trials(record.id, with_samples=True)
    view = TrialsTable(store)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    assert view.proxy.rowCount() == len(trials) == 8

    view.table.sortByColumn(COLUMNS.index("Latency ms"), Qt.SortOrder.AscendingOrder)
    shown = view.visible_trials()
    assert [t.latency_ms for t in shown] == sorted(t.latency_ms for t in trials)

    view.filter_edit.setText("round")  # matches nothing but the header name: no rows
    assert view.proxy.rowCount() == 0
    view.filter_edit.setText("unroll=512")
    assert 0 < view.proxy.rowCount() < 8
    assert all(t.config["unroll"] == 512 for t in view.visible_trials())
    assert "of 8 trials" in view.count_label.text()
    view.filter_edit.clear()

    best = store.best_trial(record.id)
    view.select_trial(best.id)
    assert view.selected_trial() == best.id
    assert json.loads(view.config_text.toPlainText()) == best.config
    assert f"{len(best.samples_ms)} samples" in view.samples_text.toPlainText()
    view.copy_selection()
    copied = QGuiApplication.clipboard().text().splitlines()
    assert copied[0].split("\t") == list(COLUMNS) and copied[1].split("\t")[0] == str(best.id)

    out = tmp_path / "trials.csv"
    assert view.export_csv(out) == 8
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 and {int(r["id"]) for r in rows} == {t.id for t in trials}
    assert json.loads(rows[0]["config"])


def test_trials_table_takes_read_trials_and_keeps_sort_and_selection_on_appends(qtbot, store_copy):
    from tunelab.core.records import NewTrial

    record = _first(store_copy)
    view = TrialsTable(store_copy)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id, trials=store_copy.trials(record.id))
    assert view.model.rowCount() == 8
    view.table.sortByColumn(COLUMNS.index("Latency ms"), Qt.SortOrder.DescendingOrder)
    picked = view.visible_trials()[2].id
    view.select_trial(picked)

    now = time.time()
    for i, (status, samples) in enumerate(
        (("build_error", ()), ("ok", (1e-6, 1e-6, 1e-6)), ("ok", (1e6, 1e6, 1e6)))
    ):
        store_copy.add_trial(
            record.id,
            NewTrial(
                round=9,
                config={"appended": i},
                status=status,
                error="TVMError: boom" if not samples else None,
                samples_ms=samples,
                predicted_ms=None,
                build_s=0.1,
                run_s=None,
                started_at=now,
                finished_at=now,
            ),
            f"appended-{i}",
        )
    assert view.poll() == 3
    latencies = [t.latency_ms for t in view.visible_trials()]
    assert latencies[-1] is None  # failed last, in either order
    assert latencies[:-1] == sorted(latencies[:-1], reverse=True) and latencies[0] > 1e5
    assert view.selected_trial() == picked  # the sort moved the selection along

    view.filter_edit.setText("APPENDED=")  # case-insensitive, over the config summary
    assert view.proxy.rowCount() == 3 and "3 of 11 trials" in view.count_label.text()


def test_compare_two_sessions(qtbot, store):
    records = store.sessions()
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    assert view.session_list.count() == 2
    with qtbot.waitSignal(view.selection_changed):
        view.session_list.item(0).setCheckState(Qt.CheckState.Checked)
    view.set_checked([r.id for r in records])
    assert sorted(view.checked()) == sorted(r.id for r in records)
    curves = view.by_trial.listDataItems()
    assert len(curves) == 2 and len(view.by_time.listDataItems()) == 2
    for curve in curves:
        assert np.all(np.diff(curve.yData) <= 0)
    assert view.summary_table.columnCount() == 2
    labels = [view.summary_table.verticalHeaderItem(r).text() for r in range(view.summary_table.rowCount())]
    assert "Best ms" in labels and "Tuner" in labels
    tuners = {view.summary_table.item(labels.index("Tuner"), c).text() for c in range(2)}
    assert tuners == {"random", "genetic"}
    knobs = [view.diff_table.verticalHeaderItem(r).text() for r in range(view.diff_table.rowCount())]
    assert "tile_i" in knobs and "order" in knobs
    assert "knobs differ" in view.diff_label.text()


def test_hardware_view_without_telemetry_says_so(qtbot, store_copy):
    # A session stored without any telemetry (as an older tunelab, or a CLI without a sampler, leaves it).
    session_id = add_session(store_copy)
    view = on_screen(qtbot, HardwareView(store_copy, redraw_ms=10), session_id)
    assert view.stack.currentWidget() is view.empty
    assert f"No telemetry recorded for session {session_id}" in view.empty.text()
    from tunelab.app.workers.telemetry_source import gpu_status_known, machine_gpu_status

    qtbot.waitUntil(gpu_status_known, timeout=60_000)  # NVML is asked in a worker
    if not machine_gpu_status()[0]:
        qtbot.waitUntil(lambda: "No NVIDIA GPU here: CPU only" in view.empty.text(), timeout=5000)


def test_hardware_view_plots_telemetry_and_throttling(qtbot, store_copy):
    record = _first(store_copy)
    t0 = record.created_at
    samples = gpu_burst(t0, lambda i: 1980 - (300 if 20 <= i < 30 else 0), lambda i: 20 <= i < 30)
    recorded = len(store_copy.telemetry(record.id))  # what the sampler took while it tuned
    store_copy.add_telemetry(record.id, samples)
    view = HardwareView(store_copy, redraw_ms=10)
    qtbot.addWidget(view)
    view.show()
    view.set_session(record.id)
    assert view.n_samples == recorded + 50
    assert view.stack.currentWidget() is view.panels
    assert {"temperature", "power", "clocks", "utilization"} <= set(view._plots)
    assert view._regions  # the throttled stretch is shaded
    assert "throttled in 10 samples" in view.status.text()


def test_plots_save_as_png_and_svg(qtbot, store, tmp_path):
    view = LivePlot(store, redraw_ms=10)
    qtbot.addWidget(view)
    view.resize(800, 500)
    view.show()
    view.set_session(_first(store).id)
    png = save_plot(view.exportable(), tmp_path / "live.png")
    svg = save_plot(view.exportable(), tmp_path / "live.svg")
    assert png.stat().st_size > 5000
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()


def _add_trials(store, session_id, n_ok=2, n_failed=1, tag="extra"):
    """Store a few more trials (ok and failed) in a session, as a tuning process would."""
    from tunelab.core.records import NewTrial

    now = time.time()
    for i in range(n_ok + n_failed):
        ok = i < n_ok
        store.add_trial(
            session_id,
            NewTrial(
                round=99,
                config={tag: i},
                status="ok" if ok else "run_error",
                error=None if ok else "boom\nTVMError",
                samples_ms=(0.5 + i, 0.6 + i, 0.7 + i) if ok else (),
                predicted_ms=0.55 + i if ok else None,
                build_s=0.1,
                run_s=0.1,
                started_at=now,
                finished_at=now + 0.01 * i,
            ),
            f"{tag}-{i}",
        )


def test_trials_table_from_columns_shows_what_it_shows_from_records(qtbot, store_copy):
    record = _first(store_copy)
    _add_trials(store_copy, record.id)  # failed trials too
    records = store_copy.trials(record.id)
    from_columns, from_records = TrialsTable(store_copy), TrialsTable(store_copy)
    for view in (from_columns, from_records):
        qtbot.addWidget(view)
        view.show()
    from_columns.set_session(record.id)  # reads Store.trial_columns; configs only when shown
    from_records.set_session(record.id, trials=records)
    a, b = from_columns.model, from_records.model
    assert a.rowCount() == b.rowCount() == len(records) == 11
    for row in range(len(records)):
        for col in range(len(COLUMNS)):
            assert a.display_text(row, col) == b.display_text(row, col), (row, col)
            for role in (Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.ForegroundRole):
                assert a.data(a.index(row, col), role) == b.data(b.index(row, col), role)
    for col in range(len(COLUMNS)):
        for order in (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder):
            np.testing.assert_array_equal(a.sort_order(col, order), b.sort_order(col, order))
    for text in ("unroll=", "run_error", "tvmerror", "extra="):
        np.testing.assert_array_equal(a.filter_mask(text), b.filter_mask(text))
    assert from_columns.visible_trials() == records
    fresh = TrialsTable(store_copy)  # no config read yet: sorted, the proxy reads the shown rows' configs
    qtbot.addWidget(fresh)
    fresh.set_session(record.id)
    for view in (fresh, from_records):
        view.table.sortByColumn(COLUMNS.index("Latency ms"), Qt.SortOrder.DescendingOrder)
    shown = [
        [view.proxy.data(view.proxy.index(r, c)) for r in range(len(records)) for c in range(len(COLUMNS))]
        for view in (fresh, from_records)
    ]
    assert shown[0] == shown[1]
    full = a.trial(a.row_of(records[-1].id))  # the full record, read when it is needed
    assert full.id == records[-1].id and full.config == records[-1].config and full.error == records[-1].error


def test_views_take_one_shared_read_and_follow_new_trials(qtbot, store_copy):
    from PySide6.QtGui import QAction

    from tunelab.app.widgets.run_bar import RunBar

    record = _first(store_copy)
    _add_trials(store_copy, record.id, tag="before")
    columns = store_copy.trial_columns(record.id)
    live, own_live = LivePlot(store_copy, redraw_ms=10), LivePlot(store_copy, redraw_ms=10)
    cost, own_cost = CostModelView(store_copy, redraw_ms=10), CostModelView(store_copy, redraw_ms=10)
    hardware = HardwareView(store_copy, redraw_ms=10)
    table = TrialsTable(store_copy)
    run_bar = RunBar(store_copy, QAction("Pause"), QAction("Stop"))
    for view in (live, own_live, cost, own_cost, hardware, table, run_bar):
        qtbot.addWidget(view)
        view.show()
    for view in (live, cost, hardware, table, run_bar):
        view.set_session(record, columns=columns)
    own_live.set_session(record.id)
    own_cost.set_session(record.id)
    assert live.n_trials == own_live.n_trials == 11 and live.n_failed == own_live.n_failed == 1
    for a, b in (
        (live.ok_curve, own_live.ok_curve),
        (live.best_curve, own_live.best_curve),
        (live.failed_curve, own_live.failed_curve),
        (cost.scatter, own_cost.scatter),
    ):
        for x, y in zip(a.getData(), b.getData(), strict=True):
            np.testing.assert_array_equal(x, y)
    assert cost.n_pairs == own_cost.n_pairs and live.title.text() == own_live.title.text()
    assert len(hardware._trials) == table.model.rowCount() == 11

    # New trials: the main window reads them once and hands the batch to every view.
    last = int(columns["id"][-1])
    _add_trials(store_copy, record.id, n_ok=3, n_failed=2, tag="after")
    batch = store_copy.trial_columns(record.id, since_id=last)
    assert len(batch["id"]) == 5
    for view in (live, cost, hardware, table, run_bar):
        view.add(batch)
        view.add(batch)  # handed twice (or partly held already): nothing is counted twice
    own_live.poll()
    own_cost.poll()
    assert live.n_trials == own_live.n_trials == 16 and live.n_failed == own_live.n_failed == 3
    assert cost.n_pairs == own_cost.n_pairs
    assert table.model.rowCount() == len(hardware._trials) == 16
    assert [t.id for t in table.visible_trials()] == [t.id for t in store_copy.trials(record.id)]
    qtbot.waitUntil(lambda: live.redraws >= 2 and own_live.redraws >= 2, timeout=3000)
    np.testing.assert_array_equal(live.ok_curve.getData()[1], own_live.ok_curve.getData()[1])
    # the run bar keeps each round's latest finish for its ETA (whole batches: search, build and run)
    last_round = max(run_bar._rounds)
    assert run_bar._rounds[last_round][2] == float(batch["finished_at"][-1])


def test_run_bar_count_is_text_beside_the_bar_and_a_pending_pause_goes_once_it_took_effect(qtbot, store_copy):
    from PySide6.QtGui import QAction

    from tunelab.app.widgets.run_bar import RunBar

    record = _first(store_copy)
    run_bar = RunBar(store_copy, QAction("Pause"), QAction("Stop"))
    qtbot.addWidget(run_bar)
    run_bar.show()
    run_bar.set_session(record)
    # Nothing drawn on the bar, where its fill splits the text; the count is a label of its own.
    assert not run_bar.progress.isTextVisible()
    assert run_bar.count == f"{record.n_trials} / {record.trials_budget} trials"
    assert run_bar.count_label.isVisible()
    assert run_bar.count_label.width() >= run_bar.count_label.sizeHint().width()

    store_copy.set_status(record.id, "running")
    run_bar.refresh(pending="pause")
    assert "pausing after the current batch" in run_bar.label.text()
    store_copy.set_status(record.id, "paused")  # the child paused after its batch
    run_bar.refresh(pending="pause")
    assert "paused" in run_bar.label.text() and "pausing" not in run_bar.label.text()
    run_bar.refresh(pending="stop")
    assert "stopping after the current batch" in run_bar.label.text()
    store_copy.set_status(record.id, "cancelled")
    run_bar.refresh(pending="stop")
    assert "stopping" not in run_bar.label.text()


def _drawn_tick_labels(axis) -> list[str]:
    """The tick labels an axis draws now (pyqtgraph's own draw specs: what its paint writes)."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(16, 16, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [] if specs is None else [text for _, _, text in specs[2] if text.strip()]


def _settle(qtbot, *plots) -> None:
    qtbot.wait(50)
    for plot in plots:
        plot.vb.prepareForPaint()
    QGuiApplication.processEvents()


def _visible_axes(plot):
    return [
        (side, plot.getAxis(side))
        for side in ("left", "bottom", "right", "top")
        if plot.getAxis(side).isVisible()
    ]


def test_compare_axes_show_numbers_and_the_legend_covers_no_curve(qtbot, store):
    records = store.sessions()
    view = CompareView(store)
    qtbot.addWidget(view)
    view.show()
    view.set_checked([r.id for r in records])
    for size in ((1400, 800), (1390, 560)):  # the second: the tab in a 1600x1000 window (plots 190 px high)
        view.resize(*size)
        _settle(qtbot, view.by_trial, view.by_time)
        for plot in (view.by_trial, view.by_time):
            for side, axis in _visible_axes(plot):
                assert axis.style["showValues"], side
                assert len(_drawn_tick_labels(axis)) >= 2, (size, plot.titleLabel.text, side, axis.range)
            assert not view.legend.sceneBoundingRect().intersects(plot.vb.sceneBoundingRect())
    assert len(view.legend.items) == len(records)
    trial_labels = _drawn_tick_labels(view.by_trial.getAxis("bottom"))
    assert all(label.lstrip("-").isdigit() for label in trial_labels), trial_labels


def test_a_log_axis_over_a_narrow_range_still_has_numbers(qtbot):
    """Best latencies within 0.012-0.018 ms hold no 1, 2 or 5 of a decade: the axis used to be bare."""
    import pyqtgraph as pg

    from tunelab.app.widgets.log_axis import LogAxis

    widget = pg.PlotWidget(axisItems={"left": LogAxis("left")})
    qtbot.addWidget(widget)
    widget.show()
    plot = widget.getPlotItem()
    plot.setLogMode(y=True)
    for height, (lo, hi) in ((400, (0.012, 0.018)), (150, (0.0139, 0.0232))):  # 150 px: the Compare tab's
        widget.resize(500, height)
        plot.clear()
        plot.plot([0, 1, 2, 3], [hi, 0.5 * (lo + hi), lo, lo])
        plot.enableAutoRange()
        _settle(qtbot, plot)
        labels = _drawn_tick_labels(plot.getAxis("left"))
        assert len(labels) >= 2, (height, labels)
        values = [float(label) for label in labels]
        assert all(0.9 * lo <= v <= 1.1 * hi for v in values), values


def test_live_plot_axes_integer_trials_gflops_never_negative_and_an_empty_state(qtbot, store):
    record = _first(store)
    view = LivePlot(store, redraw_ms=10)
    qtbot.addWidget(view)
    view.resize(1200, 700)
    view.show()
    assert view.empty_label.isVisible() and not view.plot_widget.isVisible()  # nothing selected yet
    view.set_session(record.id)
    assert not view.empty_label.isVisible() and view.plot_widget.isVisible()
    _settle(qtbot, view.plot_item)
    view.gflops_view.prepareForPaint()
    for side, axis in _visible_axes(view.plot_item):
        assert axis.style["showValues"], side
        assert len(_drawn_tick_labels(axis)) >= 2, (side, axis.range)
    trial_labels = _drawn_tick_labels(view.plot_item.getAxis("bottom"))
    assert all(label.isdigit() for label in trial_labels), trial_labels  # no 0.5 of a trial
    assert view.gflops_view.viewRange()[1][0] >= 0
    view.gflops_view.translateBy(y=-1e6)  # dragged down as far as it goes: still not below 0
    assert view.gflops_view.viewRange()[1][0] >= 0
    view.set_session(None)
    assert view.empty_label.isVisible() and not view.plot_widget.isVisible()
    assert "No session selected" in view.empty_label.text()

"""The Trials table as a performance engineer reads it (issue 10): each trial's spread as CV and IQR,
and every column, Failure included, in sight without scrolling in a 1280×800 window (and a larger one).

On a real store, sessions made through the Store (no tuning: the numbers are chosen so that the
quartiles fall between samples and one trial has an outlier)."""

from __future__ import annotations

import csv
import time

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.core.stores import add_session
from tunelab.app.main_window import MainWindow
from tunelab.app.resources import stylesheet
from tunelab.app.views.trials.model import COLUMNS, CONFIG_COL, DEVICE_COL, ERROR_COL, FAILURE_COL, IQR_COL
from tunelab.app.views.trials.widget import TrialsTable
from tunelab.app.widgets.formatting import fmt_ms
from tunelab.core.records import NewTrial, SessionSpec
from tunelab.core.store import Store

# Samples (ms) of the ok trials: spreads from none to an outlier that widens the std but not the IQR.
SAMPLES = (
    (1.0, 1.2, 1.1, 1.05),
    (0.52, 0.5, 0.51),
    (2.0,),
    (3.0, 3.0, 3.0),
    (0.0101, 0.0102, 0.0107, 0.0108, 0.011, 0.0125, 0.5),
    (12.5, 12.0, 14.0, 13.0, 12.2),
    (0.25, 0.27, 0.26, 0.30, 0.24, 0.25),
    (104.2, 101.9, 103.3, 102.0),
    (0.00021, 0.00023, 0.00022),
    (7.0, 7.5, 6.5, 9.0, 7.2, 7.1, 7.3, 7.4),
    (0.9, 0.95),
    (5.5, 5.25, 5.0),
)
FAILURES = (
    ("run_error", "worker died: signal 4 (SIGILL): an instruction this CPU lacks"),
    ("build_error", "TVMError: cannot vectorize a loop of extent 7"),
)


SERVERS = ("127.0.0.1:9091", "127.0.0.1:9092")  # where a remote session's trials were measured


def make_spread_store(path, devices=(None,)):
    """A store with one session: the ok trials of SAMPLES, then two failed ones (no samples); trial i
    measured on devices[i % len(devices)] (None: this machine)."""
    store = Store(path)
    session_id = add_session(
        store, SessionSpec(workload="gemm", shape={"M": 64, "N": 64, "K": 64}), flops=2.0 * 64**3
    )
    now = time.time()
    trials = [("ok", None, samples) for samples in SAMPLES] + [(s, e, ()) for s, e in FAILURES]
    for i, (status, error, samples) in enumerate(trials):
        config = {"tile_i": [8, 4, 2], "tile_j": [16, 1], "unroll": 16 * (i + 1), "vectorize": i % 2 == 0}
        trial = NewTrial(
            round=i // 4,
            config=config,
            status=status,
            error=error,
            samples_ms=samples,
            predicted_ms=0.0123,
            build_s=0.1,
            run_s=0.2 if samples else None,
            started_at=now,
            finished_at=now,
            device=devices[i % len(devices)],
        )
        store.add_trial(session_id, trial, f"k{i}")
    return store, session_id


@pytest.fixture
def spread_store(tmp_path):
    store, session_id = make_spread_store(tmp_path / "spread.sqlite")
    yield store, session_id
    store.close()


@pytest.fixture
def remote_spread_store(tmp_path):
    """The same session measured on two RPC servers."""
    store, session_id = make_spread_store(tmp_path / "remote.sqlite", SERVERS)
    yield store, session_id
    store.close()


def _shown(view: TrialsTable, col: int) -> list[str]:
    return [view.proxy.data(view.proxy.index(r, col)) for r in range(view.proxy.rowCount())]


def test_iqr_column_shows_sorts_and_says_what_it_is(qtbot, spread_store, tmp_path):
    store, session_id = spread_store
    view = TrialsTable(store)
    qtbot.addWidget(view)
    view.show()
    view.set_session(session_id)
    assert view.proxy.rowCount() == len(SAMPLES) + len(FAILURES)
    assert COLUMNS[IQR_COL - 1] == "CV %" and COLUMNS[IQR_COL] == "IQR ms"  # next to CV, which stays

    samples_of = {t.id: t.samples_ms for t in store.trials(session_id, with_samples=True)}
    expected = {}
    for trial_id, samples in samples_of.items():
        if samples:
            q1, q3 = np.percentile(np.asarray(samples), [25, 75])
            expected[trial_id] = fmt_ms(float(q3 - q1))
        else:
            expected[trial_id] = "—"
    ids = [int(text) for text in _shown(view, 1)]
    assert _shown(view, IQR_COL) == [expected[i] for i in ids]
    # The outlier (0.5 ms) sets the std near 0.17 ms; the IQR stays the middle half's 0.0013 ms.
    assert expected[ids[4]] == "0.0013" and store.trial(ids[4]).std_ms > 0.1
    assert _shown(view, IQR_COL)[-2:] == ["—", "—"]  # the failed trials have no samples

    def spreads() -> list[float]:
        by_id = {t.id: t.iqr_ms for t in store.trials(session_id)}
        return [by_id[int(text)] for text in _shown(view, 1)]

    view.table.sortByColumn(IQR_COL, Qt.SortOrder.AscendingOrder)
    shown = spreads()
    assert shown[-2:] == [None, None]  # no samples, no spread: last
    assert shown[:-2] == sorted(shown[:-2])
    view.table.sortByColumn(IQR_COL, Qt.SortOrder.DescendingOrder)
    shown = spreads()
    assert shown[-2:] == [None, None]
    assert shown[:-2] == sorted(shown[:-2], reverse=True)

    horizontal = Qt.Orientation.Horizontal
    assert view.proxy.headerData(IQR_COL, horizontal) == "IQR\nms"  # unit under the title
    tip = view.proxy.headerData(IQR_COL, horizontal, Qt.ItemDataRole.ToolTipRole)
    assert "q3 − q1" in tip and "middle half" in tip
    assert all(view.proxy.headerData(c, horizontal, Qt.ItemDataRole.ToolTipRole) for c in range(len(COLUMNS)))

    # The export carries the quartiles themselves.
    out = tmp_path / "trials.csv"
    view.export_csv(out)
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    stored = {t.id: t for t in store.trials(session_id)}
    for row in rows:
        t = stored[int(row["id"])]
        for name in ("q1_ms", "q3_ms"):
            value = getattr(t, name)
            assert (row[name] == "") if value is None else float(row[name]) == value


@pytest.mark.parametrize("remote", [False, True], ids=["here", "remote"])
@pytest.mark.parametrize("styled", [True, False], ids=["app-style", "no-style"])
@pytest.mark.parametrize("size", [(1280, 800), (1600, 1000)], ids=["1280x800", "1600x1000"])
def test_every_trials_column_is_in_sight_in_the_main_window(
    qtbot, qapp, spread_store, remote_spread_store, settings, size, styled, remote
):
    # Measured here, the Device column is hidden (it would say "this machine" on every row); measured on
    # RPC servers, it is shown and fits with the rest.
    store, session_id = remote_spread_store if remote else spread_store
    # The app runs with its style sheet (tunelab.app.main): bold, padded header titles are wider.
    qapp.setStyleSheet(stylesheet() if styled else "")
    try:
        window = MainWindow(store, settings, poll_ms=100, probe_target=False)
        qtbot.addWidget(window)
        window.resize(*size)
        window.show()
        qtbot.waitExposed(window)
        window.browser.select_session(session_id)
        window.tabs.setCurrentWidget(window.trials)
        view = window.trials
        qtbot.waitUntil(lambda: view.proxy.rowCount() == len(SAMPLES) + len(FAILURES))
        QApplication.processEvents()
        assert window.size().toTuple() == size

        table, header = view.table, view.table.horizontalHeader()
        assert header.isSectionHidden(DEVICE_COL) is not remote
        columns = [c for c in range(len(COLUMNS)) if not header.isSectionHidden(c)]
        assert columns == list(range(len(COLUMNS) - (0 if remote else 1)))
        if remote:
            assert set(_shown(view, DEVICE_COL)) == set(SERVERS)
        width = table.viewport().width()
        spans = {
            c: (header.sectionViewportPosition(c), header.sectionViewportPosition(c) + header.sectionSize(c))
            for c in columns
        }
        assert table.horizontalScrollBar().maximum() == 0, spans
        for col, (left, right) in spans.items():
            assert 0 <= left and right <= width, (COLUMNS[col], left, right, width)
            # The title reads whole, room for the sort arrow included.
            assert header.sectionSize(col) >= header.sectionSizeHint(col), COLUMNS[col]
        # the columns fill the view, Failure last (then Device, where shown)
        assert spans[columns[-1]][1] >= width - 1 and columns[-1] == (DEVICE_COL if remote else FAILURE_COL)
        # Numbers, statuses, failure classes and servers read whole; only the config and the error elide
        # (their tooltips and the Knobs / Error tabs hold all of them).
        cell = table.fontMetrics()
        for col in set(columns) - {CONFIG_COL, ERROR_COL}:
            widest = max(cell.horizontalAdvance(text) for text in _shown(view, col))
            assert widest + 8 <= header.sectionSize(col), (COLUMNS[col], widest, header.sectionSize(col))
        # The config keeps room to be read; a remote session's Device column takes about 100 px of it
        # (at 1280 px and the app's style, 152 of 258 are left: some 25 characters of knobs).
        assert header.sectionSize(CONFIG_COL) >= (150 if remote else 200), header.sectionSize(CONFIG_COL)
        # The detail pane leaves the table a screenful of rows.
        assert table.viewport().height() >= 6 * table.rowHeight(0), table.viewport().height()
        window.close()
    finally:
        qapp.setStyleSheet("")


def test_columns_refit_when_the_style_sheet_changes(qtbot, qapp, spread_store):
    store, session_id = spread_store
    qapp.setStyleSheet("")
    view = TrialsTable(store)
    qtbot.addWidget(view)
    view.resize(1280, 600)
    view.show()
    view.set_session(session_id)
    header = view.table.horizontalHeader()
    plain = [header.sectionSize(c) for c in range(len(COLUMNS))]
    try:
        qapp.setStyleSheet(stylesheet())  # bold, padded titles: wider than the plain ones
        QApplication.processEvents()
        fitted = [header.sectionSize(c) for c in range(len(COLUMNS))]
        assert fitted != plain
        for col in range(len(COLUMNS)):
            assert header.sectionSize(col) >= header.sectionSizeHint(col), COLUMNS[col]
    finally:
        qapp.setStyleSheet("")

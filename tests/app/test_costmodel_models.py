"""The cost-model view's Compare models section: every registered model refit on the session's own trials
(tunelab.core.usecases.model_compare, in a child process), one table row per model and shape, the model
that steered the session marked, and a message instead of a table when there is nothing to compare."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from showing import on_screen

from tests.core.specs import quick_spec
from tests.core.stores import add_session, open_built
from tests.core.stores import copy_database as copy_db
from tunelab.app.views.costmodel_view import CostModelView
from tunelab.app.views.model_table import COLUMNS, bias_words, duration_words
from tunelab.core.records import SessionSpec
from tunelab.core.store import Store
from tunelab.core.usecases.model_compare import compare_models

pytestmark = pytest.mark.slow

WAIT_MS = 120_000  # the child imports TVM and builds the space: seconds, more on a loaded machine


@pytest.fixture(scope="module")
def models_db(xgb_db, tmp_path_factory):
    """The run's xgb store (its xgb session tunes two shapes, tests/app/conftest.py) plus an xgb session
    steered by the mlp model (one shape) and a session with no trial. Returns (path, {name: session id})."""
    from tunelab.core.session.loop import create_session

    source, two_shapes = xgb_db
    path = copy_db(source, tmp_path_factory.mktemp("models") / "models.sqlite")
    with Store(path) as store:
        spec = quick_spec(
            tuner="xgb", tuner_options={"model": "mlp"}, shape={"M": 64, "N": 64, "K": 128}, trials=16
        )
        session = create_session(store, spec)
        for _ in session.run():
            pass
        ids = {"mlp": session.session_id, "two_shapes": two_shapes, "empty": add_session(store)}
    return path, ids


@pytest.fixture
def models_store(models_db):
    yield from open_built(models_db)


def _view(qtbot, store, size=(1280, 800)):
    return on_screen(qtbot, CostModelView(store, redraw_ms=10, bias_ms=10), size=size)


def _cells(section, row):
    return [section.model.text(row, c) for c in range(len(COLUMNS))]


def test_bias_and_time_in_words():
    assert bias_words(0.12) == "12 % too slow" and bias_words(-0.08) == "8 % too fast"
    assert bias_words(0.001) == "exact" and bias_words(None) == "—"
    assert duration_words(0.0223) == "22 ms" and duration_words(2.34) == "2.3 s"


def test_compare_models_fills_the_table_and_marks_the_steering_model(qtbot, models_store):
    store, ids = models_store
    view = _view(qtbot, store)
    view.set_session(ids["mlp"])
    section = view.models
    assert not section.table.isVisible() and "Compare models refits" in section.message.text()
    qtbot.mouseClick(section.button, Qt.MouseButton.LeftButton)
    assert section.running and "refitting" in section.message.text()  # said at once, the GUI not blocked
    assert not section.button.isEnabled()
    qtbot.waitUntil(lambda: not section.running, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not view.bias_running, timeout=WAIT_MS)

    expected = compare_models(store, [ids["mlp"]])
    assert section.table.isVisible() and section.model.rowCount() == len(expected) == 4
    assert [s.model for s in section.scores] == ["xgb", "mlp", "roofline", "hybrid"]
    for row, want in enumerate(expected):
        got = section.scores[row]
        assert (got.model, got.shape, got.rounds, got.predictions) == (
            want.model,
            want.shape,
            want.rounds,
            want.predictions,
        )
        assert want.predictions > 0
        cells = _cells(section, row)
        assert cells[2] == f"{want.rounds} ({want.predictions} trials)"
        assert cells[3] == ("—" if want.spearman is None else f"{want.spearman:.2f}")
        assert cells[5] == ("—" if want.topk_recall is None else f"{want.topk_recall:.2f}")
        assert cells[6] == bias_words(want.bias) and cells[6].endswith(("too slow", "too fast", "exact"))
        assert cells[7] == ("—" if want.spread is None else f"{want.spread:.2f}")
        assert cells[8].endswith(("ms", " s"))
        # the table's own cells say the same as its model's text
        assert section.table.model().index(row, 3).data() == cells[3]
    # The mlp steered this session (the xgb tuner's option model): its row, and only it, is marked.
    assert section.steering_rows() == [1]
    assert "★" in _cells(section, 1)[0] and "steered" in _cells(section, 1)[0]
    assert all("★" not in _cells(section, row)[0] for row in (0, 2, 3))
    assert "★ mlp steered this session" in section.message.text()
    assert section.table.isColumnHidden(1)  # one shape: no shape column

    # Legible at a laptop's size: every row shown, and the plots keep their room.
    QApplication.processEvents()
    assert section.table.viewport().height() >= 4 * section.table.rowHeight(0)
    for plot in (view.residual_plot, view.rank_plot):
        assert plot.getAxis("left").geometry().height() >= 120, plot.titleLabel.text

    # Away and back: the result is kept for the same trials, not computed again.
    view.set_session(ids["two_shapes"])
    assert not section.table.isVisible()
    view.set_session(ids["mlp"])
    assert not section.running and section.table.isVisible() and section.model.rowCount() == 4


def test_a_session_of_two_shapes_gets_a_row_per_model_and_shape(qtbot, models_store):
    store, ids = models_store
    view = _view(qtbot, store, size=(1600, 1000))
    view.set_session(ids["two_shapes"])
    view.models.start()
    qtbot.waitUntil(lambda: not view.models.running, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not view.bias_running, timeout=WAIT_MS)
    expected = compare_models(store, [ids["two_shapes"]])
    section = view.models
    assert section.table.isVisible()
    assert [(s.model, s.shape) for s in section.scores] == [(s.model, s.shape) for s in expected]
    assert len({str(s.shape) for s in section.scores}) == 2 and not section.table.isColumnHidden(1)
    assert section.steering_rows() == [i for i, s in enumerate(expected) if s.model == "xgb"]  # default
    for row, want in enumerate(expected):
        if not want.predictions:
            assert _cells(section, row)[2] == "none: too few trials"


def test_a_session_without_successful_trials_says_so_instead_of_a_table(qtbot, models_store):
    store, ids = models_store
    view = _view(qtbot, store)
    view.set_session(ids["empty"])
    view.models.start()
    qtbot.waitUntil(lambda: not view.models.running, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not view.bias_running, timeout=WAIT_MS)
    section = view.models
    assert not section.table.isVisible() and section.scores == []
    assert (
        f"session {ids['empty']} has no successful trial to compare cost models on" in section.message.text()
    )
    assert section.button.isEnabled()  # it can be asked again


def test_no_session_no_button(qtbot, models_store):
    store, _ = models_store
    view = _view(qtbot, store)
    view.set_session(None)
    assert not view.models.button.isEnabled() and "no session selected" in view.models.message.text()
    view.models.start()
    assert not view.models.running


def test_the_model_selector_draws_another_models_predictions_and_bias(qtbot, models_store):
    """Pick a model the session did not run: the scatter, the residuals, the rank bars and the bias table
    are its out-of-sample predictions (refit in the bias report's child), and back to the session's own."""
    from tunelab.core.trust.predictions import model_predictions

    store, ids = models_store
    view = _view(qtbot, store)
    sid = ids["mlp"]
    view.set_session(sid)
    qtbot.waitUntil(lambda: not view.bias_running and view.bias.report is not None, timeout=WAIT_MS)
    box = view.model_box
    labels = [box.itemText(i) for i in range(box.count())]
    assert labels[0] == "mlp — steered this session" and box.itemData(0) is None
    assert labels[1:] == [
        f"{m} — refit on these trials, out of sample" for m in ("xgb", "roofline", "hybrid")
    ]
    own_scatter = (view.scatter.xData, view.scatter.yData)  # as given (getData is log10 on log axes)
    own_n = view.n_pairs

    view.select_model("roofline")
    assert view.model == "roofline"
    assert view.scatter_note.text == "Working out roofline's predictions…"  # said at once, while it computes
    qtbot.waitUntil(lambda: view._model_pairs is not None and not view.bias_running, timeout=WAIT_MS)
    trials = {t.id: t for t in store.trials(sid)}
    expected = {
        tid: ms
        for tid, ms in model_predictions(store, sid, "roofline").predicted_ms.items()
        if trials[tid].ok
    }
    measured, predicted = view.scatter.xData, view.scatter.yData
    order = sorted(expected)
    np.testing.assert_allclose(predicted, [expected[t] for t in order])
    np.testing.assert_allclose(measured, [trials[t].latency_ms for t in order])
    numbers, residual = view.residuals.xData, view.residuals.yData
    assert list(numbers) == [trials[t].number for t in order]
    np.testing.assert_allclose(residual, [100 * (expected[t] / trials[t].latency_ms - 1) for t in order])
    assert view.bias.report.model == "roofline" and view.bias.report.n == len(expected)
    assert "model <b>roofline</b> (refit on these trials, out of sample)" in view.summary.text()
    assert len(view.rank_bars.opts["x"]) >= 1 and view.scatter_note.text == ""

    view.select_model(None)
    assert view.model is None and view.n_pairs == own_n
    np.testing.assert_array_equal(view.scatter.yData, own_scatter[1])
    qtbot.waitUntil(lambda: not view.bias_running and view.bias.report.model is None, timeout=WAIT_MS)


def test_a_sessions_shadow_models_come_second_in_the_selector(qtbot, models_store, tmp_path):
    store, _ = models_store
    with Store(tmp_path / "shadow.sqlite") as other:
        spec = SessionSpec(
            workload="gemm", shape={"M": 8, "N": 8, "K": 8}, tuner="random", shadow_models=("hybrid",)
        )
        sid = add_session(other, spec)
        view = _view(qtbot, other)
        view.set_session(sid)
        box = view.model_box
        assert [box.itemText(i) for i in range(box.count())] == [
            "xgb — its stored predictions",
            "hybrid — predicted live beside it, not steering",
            "mlp — refit on these trials, out of sample",
            "roofline — refit on these trials, out of sample",
        ]
        view.set_session(None)
        assert not box.isEnabled() and box.count() == 0
        qtbot.waitUntil(lambda: not view.bias_running, timeout=WAIT_MS)

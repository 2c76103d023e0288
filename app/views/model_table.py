"""Would another cost model have ranked this session's schedules better? tunelab.core.usecases.model_compare's
scores (every registered model refit on the session's own trials in time order, judged out of sample) as a
table, one row per model and shape, with the model that steered the session marked.

The scores are computed in a child process (``tunelab models SID --json``): building the search spaces,
extracting features and fitting the models hold the GIL for seconds, which in a thread of the app would
stall the GUI (the bias report is computed in a child for the same reason). It runs when asked (the
Compare models button), never on a poll, and its result is kept per session until the session has new
trials.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QTableView, QVBoxLayout, QWidget

from tunelab.app import theme
from tunelab.app.widgets.fields import push_button
from tunelab.app.widgets.row_table import single_row_table
from tunelab.app.widgets.table_model import HeaderedTableModel
from tunelab.app.workers.engine import CallWorker, ChildFailed, keep_alive
from tunelab.core.errors import TunelabError
from tunelab.core.store import Store
from tunelab.core.usecases.model_compare import ModelScore

TITLE = "<b>Compare cost models</b>"
STEERING_BRUSH = QBrush(QColor(theme.GOOD_BG))
CHILD_TIMEOUT_S = 600
DETAIL_LINES = 40
COLUMNS = (
    "Model",
    "Shape",
    "Rounds predicted",
    "Spearman ρ",
    "ρ per round (mean)",
    "Top-k recall",
    "Bias (median trial)",
    "Spread (σ of log)",
    "Training time",
)
SHAPE_COLUMN = 1
ROWS_SHOWN = 6  # the table is as tall as its rows up to this many (then it scrolls): the rest is the plots'
NUMERIC_COLUMNS = (2, 3, 4, 5, 7, 8)


def bias_words(bias: float | None) -> str:
    """ModelScore.bias (exp(median log(pred / measured)) - 1) in words: '12 % too slow' (the model predicts a
    higher latency than measured), '8 % too fast', 'exact'."""
    if bias is None or not math.isfinite(bias):
        return "—"
    percent = round(abs(bias) * 100)
    if percent == 0:
        return "exact"
    return f"{percent} % too {'slow' if bias > 0 else 'fast'}"


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None or not math.isfinite(value) else format(value, fmt)


def duration_words(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def shape_words(shape: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def steering_model(record) -> tuple[str, str]:
    """(the model whose predictions the session stored, how it used them), in words for the table."""
    name, steered = record.predicting_model
    return name, "steered this session" if steered else "made this session's predictions"


def model_scores_in_child(store: Store, session_ids: list[int]) -> list[ModelScore]:
    """tunelab.core.usecases.model_compare.compare_models in a child process (``tunelab models ... --json``).
    Its error (e.g. a session without successful trials) is a ChildFailed with the command's one sentence."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tunelab",
            "models",
            *map(str, session_ids),
            "--json",
            "--db",
            str(store.path),
        ],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    details = "\n".join(proc.stderr.splitlines()[-DETAIL_LINES:])
    if proc.returncode != 0:
        said = [ln for ln in proc.stderr.splitlines() if ln.startswith("tunelab: ")]
        message = said[-1].removeprefix("tunelab: ").removeprefix("error: ") if said else ""
        raise ChildFailed(
            message or f"the model comparison's process ended with status {proc.returncode}", details
        )
    try:
        return [ModelScore(**row) for row in json.loads(proc.stdout)]
    except (ValueError, TypeError) as exc:
        raise ChildFailed(f"the model comparison's process wrote no report ({exc})", details) from None


class ModelScoreModel(HeaderedTableModel):
    """One row per ModelScore, in the order compare_models gives them (per shape, then per model)."""

    columns = COLUMNS

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._scores: list[ModelScore] = []
        self._steering = ""
        self._steering_role = ""
        self._k: int | None = None

    def n_rows(self) -> int:
        return len(self._scores)

    @property
    def scores(self) -> list[ModelScore]:
        return list(self._scores)

    def set_scores(self, scores: list[ModelScore], steering: str, steering_role: str, k: int | None) -> None:
        self.beginResetModel()
        self._scores = list(scores)
        self._steering, self._steering_role, self._k = steering, steering_role, k
        self.endResetModel()

    def is_steering(self, row: int) -> bool:
        return self._scores[row].model == self._steering

    def text(self, row: int, column: int) -> str:
        s = self._scores[row]
        if column == 0:
            return f"{s.model} ★ {self._steering_role}" if self.is_steering(row) else s.model
        if column == 1:
            return shape_words(s.shape)
        if column == 2:
            return f"{s.rounds} ({s.predictions} trials)" if s.predictions else "none: too few trials"
        if column == 3:
            return _num(s.spearman, ".2f")
        if column == 4:
            return _num(s.spearman_round_mean, ".2f")
        if column == 5:
            return _num(s.topk_recall, ".2f")
        if column == 6:
            return bias_words(s.bias)
        if column == 7:
            return _num(s.spread, ".2f")
        return duration_words(s.train_s) if s.predictions else "—"

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, column = index.row(), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(row, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._scores[row].sentence()
        if role == Qt.ItemDataRole.TextAlignmentRole and column in NUMERIC_COLUMNS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.BackgroundRole and self.is_steering(row):
            return STEERING_BRUSH
        if role == Qt.ItemDataRole.FontRole and self.is_steering(row) and column == 0:
            bold = QFont()
            bold.setBold(True)
            return bold
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return HEADER_TIPS[section].format(k=self._k if self._k else "the session's batch size")
        return super().headerData(section, orientation, role)


HEADER_TIPS = (
    "The cost model, refit on this session's trials; ★ marks the one whose predictions the session stored",
    "The shape (task) the model was judged on",
    "Rounds (batches) predicted out of sample: trained on the rounds before, predicting the next",
    "Rank correlation of the predictions with the measured latencies, over every predicted trial",
    "The mean of each predicted round's own rank correlation",
    "Of the k = {k} fastest predicted trials, the share the model also ranked among its k fastest",
    "The typical miss on the median trial: 'too slow' predicts a higher latency than measured",
    "Standard deviation of log(predicted ÷ measured): how far off the model is, either way",
    "Time spent fitting the model, over all rounds (the tooltip of a row has the predicting time)",
)


class ModelCompareSection(QWidget):
    """A Compare models button, one line saying what is shown (or why nothing is), and the score table."""

    def __init__(self, store: Store, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self.session_id: int | None = None
        self._worker: CallWorker | None = None
        self._worker_session: int | None = None
        self._worker_trials = 0  # the session's trial count when the worker started
        # Per session: (its trial count when computed, the scores); a new trial makes them stale.
        self._cache: dict[int, tuple[int, list[ModelScore]]] = {}
        self._steering = ("xgb", "steered this session")
        self._k: int | None = None

        self.button = push_button(
            "Compare models",
            "Refit every cost model (xgb, mlp, roofline, hybrid) on this session's trials in time order and "
            "judge each on the rounds it did not see (takes seconds; runs in the background)",
            self.start,
            "compare_models_button",
        )
        self.message = QLabel()
        self.message.setObjectName("compare_models_message")
        # One line beside the button, cut at the window's edge (its whole text is the tooltip): wrapped, its
        # height depended on a width the splitter only knows later, and the section took too much room.
        self.message.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.button)
        top.addWidget(self.message, 1)

        self.model = ModelScoreModel(self)
        self.table = QTableView()
        self.table.setObjectName("model_compare_table")
        self.table.setModel(self.model)
        header = single_row_table(self.table)
        # Not stretched: a wide right-aligned last column put its times far from their rows' names.
        header.setStretchLastSection(False)
        self.table.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        self.set_session(None)

    # ---- public --------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._worker is not None

    @property
    def scores(self) -> list[ModelScore]:
        """What the table shows (empty when it shows a message instead)."""
        return self.model.scores if self.table.isVisibleTo(self) else []

    def steering_rows(self) -> list[int]:
        return [r for r in range(self.model.n_rows()) if self.model.is_steering(r)]

    def set_session(self, session_id: int | None) -> None:
        """Show a session's comparison if it was computed for its current trials, else say how to get it."""
        self.session_id = session_id
        if session_id is None:
            self.button.setEnabled(False)
            self._show_message(f"{TITLE}: no session selected.")
            return
        try:
            record = self._store.session(session_id)
        except TunelabError as exc:
            self.button.setEnabled(False)
            self._show_message(f"{TITLE}: {exc}")
            return
        self._steering = steering_model(record)
        self._k = record.batch
        self.button.setEnabled(not self.running)
        cached = self._cache.get(session_id)
        if cached is not None and cached[0] == record.n_trials:
            self._show_scores(cached[1])
        elif self.running and self._worker_session == session_id:
            self._show_message(f"{TITLE}: refitting every model on session {session_id}'s trials…")
        else:
            self._show_message(
                f"{TITLE}: would another model have ranked these schedules better? Compare models refits "
                f"each one on session {session_id}'s trials, round by round, out of sample."
            )

    def note_new_trials(self) -> None:
        """The shown session has new trials: a shown comparison no longer covers them all."""
        if self.table.isVisibleTo(self) and not self.running:
            self._say(
                f"{TITLE} (session {self.session_id}): computed before its latest trials; "
                "press Compare models again to include them"
            )

    def start(self) -> None:
        """Compute the comparison for the shown session in the background (one at a time)."""
        if self.session_id is None or self.running:
            return
        sid = self.session_id
        try:
            self._worker_trials = self._store.session(sid).n_trials
        except TunelabError as exc:
            self._show_message(f"{TITLE}: {exc}")
            return
        worker = CallWorker(self._store.path, model_scores_in_child, [sid])
        # Bound methods of this GUI-thread object: the worker's signals are queued to the GUI thread.
        worker.succeeded.connect(self._on_done)
        worker.failed.connect(self._on_failed)
        worker.finished.connect(self._on_finished)
        self._worker, self._worker_session = keep_alive(worker), sid
        self.button.setEnabled(False)
        self._show_message(f"{TITLE}: refitting every model on session {sid}'s trials… (takes seconds)")
        worker.start()

    # ---- worker --------------------------------------------------------------------------------
    def _on_done(self, scores: list[ModelScore]) -> None:
        sid = self._worker_session  # still set: `finished` comes after `succeeded`
        if sid is None:
            return
        self._cache[sid] = (self._worker_trials, scores)
        if sid == self.session_id:
            self._show_scores(scores)

    def _on_failed(self, message: str, _details: str) -> None:
        if self._worker_session == self.session_id:
            self._show_message(f"{TITLE}: cannot compare them: {message}")

    def _on_finished(self) -> None:
        self._worker = self._worker_session = None
        self.button.setEnabled(self.session_id is not None)

    # ---- shown ---------------------------------------------------------------------------------
    def _show_message(self, text: str) -> None:
        self.model.set_scores([], *self._steering, self._k)
        self.table.hide()
        self._say(text)
        self._fit_height()

    def _show_scores(self, scores: list[ModelScore]) -> None:
        if not any(s.predictions for s in scores):
            self._show_message(
                f"{TITLE}: too few trials to judge any model: each needs a few rounds of trials to train on "
                "before it can predict the next round (more trials, or smaller batches)."
            )
            return
        self.model.set_scores(scores, *self._steering, self._k)
        shapes = {shape_words(s.shape) for s in scores}
        self.table.setColumnHidden(SHAPE_COLUMN, len(shapes) < 2)
        self.table.show()
        self._fit_height()
        model, role = self._steering
        best = _best(scores)
        verdict = f" · best rank correlation: {best}" if best else ""
        self._say(
            f"{TITLE} (session {self.session_id}): each refit on the rounds before and judged on the next "
            f"· ★ {model} {role}{verdict}"
        )

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.message.setToolTip(text)

    def _fit_height(self) -> None:
        """No taller than what it shows, so the splitter gives the rest to the plots and the bias table."""
        if self.table.isVisibleTo(self):
            rows = min(max(self.model.n_rows(), 1), ROWS_SHOWN)
            self.table.setFixedHeight(
                self.table.horizontalHeader().sizeHint().height()
                + rows * self.table.verticalHeader().defaultSectionSize()
                + 2 * self.table.frameWidth()
                + self.table.horizontalScrollBar().sizeHint().height()  # room for it in a narrow window
            )
        layout = self.layout()
        if layout is not None:
            self.setMaximumHeight(layout.sizeHint().height())


def _best(scores: list[ModelScore]) -> str:
    """The model with the highest pooled Spearman ρ per shape, in words ('' when none has one)."""
    by_shape: dict[str, list[ModelScore]] = {}
    for s in scores:
        if s.spearman is not None and math.isfinite(s.spearman):
            by_shape.setdefault(shape_words(s.shape), []).append(s)
    words = []
    for shape, group in by_shape.items():
        top = max(group, key=lambda s: s.spearman or -2.0)
        words.append(f"{top.model} ({shape})" if len(by_shape) > 1 else top.model)
    return ", ".join(words)

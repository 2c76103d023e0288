"""Which model's predictions the cost-model view judges: the Model selector's entries, and another
model's (number, measured, predicted, id, round) pairs and per-round ρ, from its bias report's points."""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from tunelab.app.widgets.buffers import GrowingColumns
from tunelab.core.records import BiasReport, SessionRecord
from tunelab.core.usecases.model_compare import COST_MODEL_WORDS, cost_model_names, spearman

PAIR_COLUMNS = ("number", "measured", "predicted", "id", "round")
SOURCE_LABELS = {  # how a model's predictions of the session were made, as the selector says it
    "shadow": "predicted live beside it, not steering",
    "refit": "refit on these trials, out of sample",
}


def add_models(box: QComboBox, record: SessionRecord) -> None:
    """The selector's models for a session: its own first (data None), then its shadow models, then the rest."""
    own, steered = record.predicting_model
    box.addItem(f"{own} — {'steered this session' if steered else 'its stored predictions'}", None)
    shadows = [m for m in record.shadow_models if m != own]
    for name in [*shadows, *(m for m in cost_model_names() if m != own and m not in shadows)]:
        source = "shadow" if name in shadows else "refit"
        box.addItem(f"{name} — {SOURCE_LABELS[source]}", name)
        box.setItemData(box.count() - 1, COST_MODEL_WORDS.get(name, ""), Qt.ItemDataRole.ToolTipRole)


def model_pairs(report: BiasReport, session_id: int | None, measured_cols: GrowingColumns) -> GrowingColumns:
    """The report's predictions of session `session_id`'s trials, paired with the trials measured
    (`measured_cols`: id, number, round, measured, by id); trials it does not know are left out."""
    mine = sorted(
        (tid, measured, predicted)
        for tid, (sid, measured, predicted, _label) in (report.points or {}).items()
        if sid == session_id
    )
    ids = measured_cols.col("id")
    got = np.array([t for t, _, _ in mine], dtype=np.float64)
    where = np.searchsorted(ids, got)
    known = (where < len(ids)) & (ids[np.minimum(where, len(ids) - 1)] == got) if len(ids) else got < 0
    pairs = GrowingColumns(*PAIR_COLUMNS)
    pairs.extend(
        number=measured_cols.col("number")[where[known]],
        measured=np.array([m for _, m, _ in mine])[known],
        predicted=np.array([p for _, _, p in mine])[known],
        id=got[known],
        round=measured_cols.col("round")[where[known]],
    )
    return pairs


def round_spearman(pairs: GrowingColumns) -> list[tuple[int, float]]:
    """(round, ρ) of every round in `pairs` with a finite ρ, in round order."""
    if not len(pairs):
        return []
    rounds = pairs.col("round")
    out = []
    for r in np.unique(rounds):
        here = rounds == r
        rho = spearman(pairs.col("predicted")[here], pairs.col("measured")[here])
        if rho is not None and math.isfinite(rho):
            out.append((int(r), rho))
    return out

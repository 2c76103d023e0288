"""The tuner score (tunelab.core.search.scoring) of sessions compared side by side.

Two or more sessions of one workload, shape and dtype are scored over a common budget (the fewest trials
any of them has) against random search, taken from the best reference the sessions offer:

1. a session that measured every config of the template space they all searched (a grid session run
   to the end): random search is *calculated* on its table, and every session's choices are looked up
   in that table, so the noise between two measurements of one config is not counted as search skill;
2. else a random-search session among them: its own best-so-far is the reference (one sampled run),
   and each session is scored on its own measurements;
3. else no score, with the reason in words.

Multi-shape sessions are scored by their primary shape, as the Compare curves are drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.records import SessionRecord, config_key
from tunelab.core.search.scoring import (
    RandomBaseline,
    aggregate,
    exhaustive_baseline,
    sampled_baseline,
    score_curve,
)

if TYPE_CHECKING:
    from tunelab.core.store import Store


@dataclass(frozen=True)
class CompareScores:
    """Each compared session's mean P(t) over the budget, in the order asked (None: not scored)."""

    session_ids: tuple[int, ...]
    scores: tuple[float | None, ...]
    budget: int
    reference: str  # how f_random was had, in words; "" when there is no score
    reference_id: int | None  # the session the reference comes from
    reason: str | None = None  # why there is no score (None when there is one)


def no_score(records: list[SessionRecord], reason: str) -> CompareScores:
    return CompareScores(
        session_ids=tuple(r.id for r in records),
        scores=tuple(None for _ in records),
        budget=0,
        reference="",
        reference_id=None,
        reason=reason,
    )


def template_size(space: dict[str, Any]) -> int | None:
    """How many configs a template space's JSON holds (None for any other space)."""
    if space.get("kind") != "template" or not space.get("knobs"):
        return None
    return math.prod(len(k.get("candidates") or ()) for k in space["knobs"])


def same_space(a: SessionRecord, b: SessionRecord) -> bool:
    return a.space_kind == b.space_kind and a.space.get("knobs") == b.space.get("knobs")


def primary_run(store: Store, record: SessionRecord) -> tuple[list[int], list[float | None]]:
    """(trial ids, latencies with None for a failure) of the session's primary shape, in measurement order.

    Read as columns, not records: the Compare view asks again whenever a ticked session gains a trial."""
    c = store.trial_columns(record.id)
    keep = np.ones(len(c["id"]), dtype=bool)
    tasks = store.tasks(record.id)
    if len(tasks) > 1:
        keep = (c["task_id"] == tasks[0].id) | (c["task_id"] == -1)
    ok = c["ok"][keep] & np.isfinite(c["latency_ms"][keep])
    lat = [float(v) if good else None for v, good in zip(c["latency_ms"][keep], ok, strict=True)]
    return [int(i) for i in c["id"][keep]], lat


def config_keys(store: Store, record: SessionRecord, ids: list[int]) -> list[str]:
    configs = store.trial_configs(record.id)
    return [config_key(configs[i]) for i in ids]


def compare_scores(store: Store, records: list[SessionRecord]) -> CompareScores:
    """The scores of `records` (two or more sessions) against the best random-search reference they offer."""
    if len(records) < 2:
        return no_score(records, "Tick two or more sessions of one workload to score them.")
    first = records[0]
    if any((r.workload, r.shape, r.dtype) != (first.workload, first.shape, first.dtype) for r in records):
        return no_score(records, "No score: the sessions tune different workloads or shapes.")
    if len({r.space_kind for r in records}) > 1:
        return no_score(records, "No score: not comparable, different spaces (template and auto).")
    runs = {r.id: primary_run(store, r) for r in records}
    if any(not runs[r.id][0] for r in records):
        return no_score(records, "No score: a session has no trials yet.")
    budget = min(len(ids) for ids, _ in runs.values())

    for ref in records:
        size = template_size(ref.space)
        # A session measures a config at most once: only one with as many trials as its space can be
        # exhaustive, and only then are its configs read.
        if size is None or len(runs[ref.id][0]) < size or not all(same_space(ref, o) for o in records):
            continue
        keys = {r.id: config_keys(store, r, runs[r.id][0]) for r in records}
        if len(set(keys[ref.id])) != size:
            continue
        table = dict(zip(keys[ref.id], runs[ref.id][1], strict=True))
        if all(v is None for v in table.values()):
            return no_score(records, f"No score: every config of #{ref.id}'s space failed.")
        # Every session's path, looked up in the one table: the spaces are the same, so the reference
        # measured each config any of them chose.
        paths = {r.id: [table.get(k) for k in keys[r.id]] for r in records}
        baseline = exhaustive_baseline(list(table.values()), budget)
        how = f"random search calculated on #{ref.id}'s exhaustive space ({size} configs)"
        return _scored(records, paths, baseline, budget, how, ref.id)

    randoms = [r for r in records if r.tuner == "random"]
    if not randoms:
        return no_score(
            records,
            "No score: none of these sessions measured its whole space, and none is a random-search "
            "session to score against.",
        )
    ref = max(randoms, key=lambda r: len(runs[r.id][0]))
    measured = {r.id: runs[r.id][1] for r in records}
    ok = [v for run in measured.values() for v in run if v is not None]
    if not ok:
        return no_score(records, "No score: every trial of these sessions failed.")
    baseline = sampled_baseline(measured[ref.id], optimum=min(ok), fill=max(ok), budget=budget)
    how = f"random-search session #{ref.id} (one sampled run; the optimum: the best any of them found)"
    return _scored(records, measured, baseline, budget, how, ref.id)


def _scored(
    records: list[SessionRecord],
    runs: dict[int, list[float | None]],
    baseline: RandomBaseline,
    budget: int,
    how: str,
    ref_id: int,
) -> CompareScores:
    scores = []
    for r in records:
        value = aggregate(score_curve(runs[r.id], baseline, budget))
        scores.append(None if math.isnan(value) else value)
    reason = None
    if all(s is None for s in scores):
        reason = f"No score: random search already holds the optimum within {budget} trials."
    return CompareScores(
        session_ids=tuple(r.id for r in records),
        scores=tuple(scores),
        budget=budget,
        reference=how,
        reference_id=ref_id,
        reason=reason,
    )

"""Cost-model bias: where the latency model is wrong, per shape and per region of the space.

For every successful trial that carries a prediction (the model's guess made before measuring,
``TrialRecord.predicted_ms``) the residual is ``log(predicted_ms / measured_ms)`` (natural log):
0 is a perfect guess, +0.69 a guess twice too slow (the model over-predicts the latency), -0.69
a guess twice too fast (it under-predicts it).

Groups (each one a set of such trials):

- ``all``: every trial;
- ``shape``: the session's shape (several sessions of a workload give several shapes; sessions of
  the same problem are pooled);
- template spaces: ``knob``, one group per value of each categorical knob (``order=ro,si,ri``,
  ``unroll=64``, ``vectorize=true``, ...), and ``tile``, one group per tile knob and size bucket of
  its innermost factor (small: 1-4, medium: 5-16, large: over 16);
- auto spaces: ``sketch``, one group per sketch index.

Each group reports n, the residuals' mean and spread (sample standard deviation, None below two
trials), the Spearman rank correlation of predicted against measured latency, and the top-k recall
(the share of the k fastest measured trials that are among the k fastest predicted; k = 5, or n
when n < 5). Rank statistics pool sessions after dividing both latencies of each trial by the
geometric mean measured latency of its session, so different shapes do not rank against each
other by size (residuals are unchanged by that).

A group is flagged (tunelab.core.trust.bias_stats) when ``|mean| > BIAS_LIMIT`` (0.3: the model is
systematically off by more than 35 %), or when ``spearman < RANK_LIMIT`` (0.3) with ``n >= RANK_MIN_N`` (8 trials).
Results are frozen records (nothing is stored): a ``BiasReport`` of ``BiasGroup`` (both in
tunelab.core.records, which the desktop app reads without loading TVM); its ``summary`` says it in words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.records import BiasCounts, BiasGroup, BiasPoint, BiasReport
from tunelab.core.stats import positive_finite
from tunelab.core.trust.bias_stats import BIAS_LIMIT, DEFAULT_K, RANK_LIMIT, RANK_MIN_N, group_stats
from tunelab.core.trust.predictions import SOURCE_WORDS, model_predictions, prediction_source
from tunelab.core.workloads.base import format_shape

TILE_BUCKETS = (("small", 1, 4), ("medium", 5, 16), ("large", 17, None))


def tile_bucket(factor: int) -> str:
    """The size bucket of a tile's innermost factor: "small" (1-4), "medium" (5-16), "large" (> 16)."""
    for name, lo, hi in TILE_BUCKETS:
        if factor >= lo and (hi is None or factor <= hi):
            return name
    return "small"


def _bucket_label(name: str) -> str:
    for bucket, lo, hi in TILE_BUCKETS:
        if bucket == name:
            return f"{bucket} ({lo}-{hi})" if hi is not None else f"{bucket} (> {lo - 1})"
    return name


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def regions(config: Mapping[str, Any], space_kind: str) -> list[tuple[str, str, str]]:
    """(dimension, key, label) of every space region a config belongs to."""
    out: list[tuple[str, str, str]] = []
    if space_kind == "auto" or ("sketch" in config and "decisions" in config):
        sketch = config.get("sketch")
        out.append(("sketch", f"sketch={sketch}", f"sketch {sketch}"))
        return out
    for name, value in config.items():
        if isinstance(value, list):
            if value and all(isinstance(f, int) for f in value):
                bucket = tile_bucket(int(value[-1]))
                out.append(("tile", f"{name}:{bucket}", f"{name} innermost {_bucket_label(bucket)}"))
        else:
            text = _value_text(value)
            out.append(("knob", f"{name}={text}", f"{name}={text}"))
    return out


# ----------------------------------------------------------------------------------------------- rows


def collect_rows(
    store: Any, session_ids: Sequence[int], model: str | None = None
) -> tuple[list[dict[str, Any]], BiasCounts]:
    """The trials with a usable prediction from each session, as plain rows, and counts of all of them.

    A row: ``session_id, task_id, trial_id, round, shape_key, shape_label, space_kind, config,
    predicted_ms, measured_ms``. ``model`` (a registered cost model): its predictions instead of the
    stored ones (tunelab.core.trust.predictions: a shadow model's, or the model refit out of sample).
    """
    if not session_ids:
        raise TunelabError("pick at least one session for the cost-model bias report")
    records = [store.session(int(i)) for i in dict.fromkeys(session_ids)]
    multi_wl = len({r.workload for r in records}) > 1
    multi_dtype = len({r.dtype for r in records}) > 1
    multi_target = len({r.target_kind for r in records}) > 1
    rows: list[dict[str, Any]] = []
    counts = {"trials": 0, "failed": 0, "no_prediction": 0}

    def shape_key_label(record: Any, shape: dict[str, int]) -> tuple[str, str]:
        label = format_shape(shape)
        if multi_wl:
            label = f"{record.workload} {label}"
        if multi_dtype:
            label += f" {record.dtype}"
        if multi_target:
            label += f" on {record.target_kind}"
        return f"{record.workload}|{format_shape(shape)}|{record.dtype}|{record.target_kind}", label

    for record in records:
        # A session tuning several shapes (tasks) contributes each trial under its own shape.
        task_shapes = {t.id: t.shape for t in store.tasks(record.id)}
        others = None if model is None else model_predictions(store, record.id, model).predicted_ms
        for t in store.trials(record.id):
            predicted = t.predicted_ms if others is None else others.get(t.id)
            key, label = shape_key_label(record, task_shapes.get(t.task_id, record.shape))
            counts["trials"] += 1
            if t.status != "ok" or not positive_finite(t.latency_ms):
                counts["failed"] += 1
                continue
            if not positive_finite(predicted):
                counts["no_prediction"] += 1
                continue
            rows.append(
                {
                    "session_id": record.id,
                    "task_id": t.task_id,
                    "trial_id": t.id,
                    "round": t.round,
                    "shape_key": key,
                    "shape_label": label,
                    "space_kind": record.space_kind,
                    "config": t.config,
                    "predicted_ms": float(predicted),
                    "measured_ms": float(t.latency_ms),
                }
            )
    return rows, BiasCounts(**counts, predicted=len(rows))


# ------------------------------------------------------------------------------------------- statistics


def describe(group: BiasGroup) -> str:
    """What is wrong with one group, in words ("" when it is not flagged)."""
    overall = group.dimension == "all"
    where = (
        ""
        if overall
        else (f" for shape {group.label}" if group.dimension == "shape" else f" for {group.label}")
    )
    parts = []
    if group.biased and group.residual_mean is not None:
        mean = group.residual_mean
        verb = "under-predicts" if mean < 0 else "over-predicts"
        parts.append(
            f"the model {verb} latency{where} by {math.exp(abs(mean)):.1f}x on average"
            + (" overall" if overall else "")
        )
    if group.ranks_poorly:
        rank = f"(Spearman {group.spearman:.2f}, n={group.n})"
        if parts:
            parts.append(
                f"{'ranks' if overall else 'it ranks'} poorly{' there' if not overall else ''} {rank}"
            )
        else:
            parts.append(f"the model ranks poorly{where or ' overall'} {rank}")
    return ", and ".join(parts)


def analyze(rows: Iterable[Mapping[str, Any]], *, k: int = DEFAULT_K) -> BiasReport:
    """Group rows (as :func:`collect_rows` makes them) and compute every group's statistics.

    Rows need ``predicted_ms``, ``measured_ms``, ``config``; ``session_id``, ``shape_key``,
    ``shape_label`` and ``space_kind`` are optional (one session, one shape, the space kind
    guessed from the config). The report names no sessions, and counts only the rows it judged.
    """
    if k < 1:
        raise TunelabError(f"k must be at least 1, not {k}")
    rows = [
        r for r in rows if positive_finite(r.get("predicted_ms")) and positive_finite(r.get("measured_ms"))
    ]
    # Per-session normalisation for the rank statistics (geometric mean measured latency).
    by_session: dict[Any, list[float]] = {}
    for r in rows:
        by_session.setdefault((r.get("session_id"), r.get("task_id")), []).append(math.log(r["measured_ms"]))
    scale = {s: math.exp(sum(v) / len(v)) for s, v in by_session.items()}

    members: dict[tuple[str, str], dict[str, Any]] = {}

    def add(dimension: str, key: str, label: str, index: int) -> None:
        entry = members.setdefault(
            (dimension, key), {"dimension": dimension, "key": key, "label": label, "rows": []}
        )
        entry["rows"].append(index)

    for index, r in enumerate(rows):
        add("all", "all", "all trials", index)
        shape_key = r.get("shape_key", "shape")
        add("shape", str(shape_key), str(r.get("shape_label", shape_key)), index)
        for dimension, key, label in regions(r.get("config") or {}, str(r.get("space_kind", ""))):
            add(dimension, key, label, index)

    order = {"all": 0, "shape": 1, "knob": 2, "tile": 3, "sketch": 4}
    groups: list[BiasGroup] = []
    seen: dict[tuple[int, ...], str] = {}
    for (dimension, key), entry in sorted(members.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
        grp_rows = [rows[i] for i in entry["rows"]]
        s = [scale[(r.get("session_id"), r.get("task_id"))] for r in grp_rows]
        stats = group_stats(
            [r["predicted_ms"] for r in grp_rows],
            [r["measured_ms"] for r in grp_rows],
            k=k,
            rank_predicted=[r["predicted_ms"] / x for r, x in zip(grp_rows, s, strict=True)],
            rank_measured=[r["measured_ms"] / x for r, x in zip(grp_rows, s, strict=True)],
        )
        # A group holding exactly the trials of an earlier one (a knob value only one shape used)
        # repeats its verdict: the summary names the earlier one only.
        same_as = seen.setdefault(tuple(entry["rows"]), entry["label"])
        group = BiasGroup(
            dimension=dimension,
            key=key,
            label=entry["label"],
            **asdict(stats),
            words="",
            trial_ids=tuple(r.get("trial_id") for r in grp_rows),
            same_as=None if same_as == entry["label"] else same_as,
        )
        groups.append(replace(group, words=describe(group)) if group.flagged else group)
    return BiasReport(
        session_ids=(),
        counts=BiasCounts(trials=len(rows), predicted=len(rows)),
        n=len(rows),
        k=k,
        groups=tuple(groups),
        flagged=tuple(g.label for g in groups if g.flagged),
        thresholds={"bias_limit": BIAS_LIMIT, "rank_limit": RANK_LIMIT, "rank_min_n": RANK_MIN_N},
        summary=summarize(groups),
    )


def summarize(groups: Sequence[BiasGroup]) -> str:
    """Plain words: where the model is off, then how it does overall.

    The overall group leads when it is flagged; then up to three other flagged groups, worst first
    (groups of two or more trials before single trials, larger |mean| first, then lower
    Spearman, then more trials). A group holding every
    trial (the only shape, a knob value every trial shares) says nothing beyond the overall group and
    is left out of the words; so is a group flagged only for the overall bias it inherits (its mean
    within BIAS_LIMIT of the overall mean).
    """
    overall = next((g for g in groups if g.dimension == "all"), None)
    if overall is None or overall.n == 0 or overall.residual_mean is None:
        return "No successful trial has a cost-model prediction yet, so there is nothing to judge."
    rho = overall.spearman
    rho_text = f"Spearman {rho:.2f}" if rho is not None else "Spearman undefined"
    totals = (
        f"overall {rho_text}, top-{overall.k} recall {overall.topk_recall:.2f}, "
        f"mean residual {overall.residual_mean:+.2f}, n={overall.n}"
    )

    base = overall.residual_mean

    def telling(g: BiasGroup) -> bool:
        if not g.flagged or g.dimension == "all" or g.n >= overall.n or g.same_as:
            return False
        if g.ranks_poorly:
            return True
        if not overall.biased:
            return True
        mean = g.residual_mean or 0.0  # a flagged group has trials, hence a mean
        return (mean > 0) != (base > 0) or abs(mean) - abs(base) > BIAS_LIMIT

    def worst_first(g: BiasGroup) -> tuple[bool, float, float, int, str]:
        return (
            g.n < 2,
            -round(abs(g.residual_mean or 0.0), 3) if g.biased else 0.0,
            g.spearman if g.spearman is not None else 1.0,
            -g.n,
            g.label,
        )

    others = sorted((g for g in groups if telling(g)), key=worst_first)
    parts = []
    if overall.flagged:
        parts.append(overall.words)
    parts += [g.words for g in others[:3]]
    if len(others) > 3:
        parts.append(f"{len(others) - 3} more group(s) are flagged")
    if not parts:
        if overall.n < RANK_MIN_N:
            ranks = "has too few trials to judge its ranking"
        else:
            ranks = "ranks well" if rho is not None and rho >= RANK_LIMIT else "ranks poorly"
        return f"The model is within 35 % on average in every group and {ranks} ({totals})."
    text = "; ".join(parts)
    text = text[0].upper() + text[1:]
    if overall.n < RANK_MIN_N:
        tail = "; too few trials to judge its ranking overall"
    elif overall.ranks_poorly:
        tail = ""  # already said
    else:
        tail = "; it ranks well elsewhere" if not overall.biased else "; it ranks well overall"
    return f"{text}{tail} ({totals})."


def bias_report(
    store: Any, session_ids: Sequence[int], *, k: int = DEFAULT_K, model: str | None = None
) -> BiasReport:
    """The cost-model bias of one or more sessions (see the module docstring); ``model``: judge that
    registered cost model's predictions instead of the stored ones (:func:`collect_rows`)."""
    rows, counts = collect_rows(store, session_ids, model)
    return _about_model(
        replace(
            analyze(rows, k=k), session_ids=tuple(dict.fromkeys(int(i) for i in session_ids)), counts=counts
        ),
        store,
        model,
    )


def _about_model(report: BiasReport, store: Any, model: str | None) -> BiasReport:
    """The report with the model it judged named, and where its predictions came from, first in words."""
    if model is None:
        return report
    name, source = prediction_source(store.session(report.session_ids[0]), model)
    if source == "stored":
        return replace(report, model=name)
    return replace(
        report, model=name, summary=f"Cost model {name} ({SOURCE_WORDS[source]}): {report.summary}"
    )


def bias_report_by_task(
    store: Any, session_ids: Sequence[int], *, k: int = DEFAULT_K, model: str | None = None
) -> BiasReport:
    """:func:`bias_report` with a shape group per task of a multi-shape session, and ``points``: trial id
    -> (session id, measured ms, predicted ms, shape label) for the desktop app's plots."""
    rows, counts = collect_rows(store, session_ids, model)
    tasks_of: dict[int, dict[int, Any]] = {}
    for sid in dict.fromkeys(r["session_id"] for r in rows):
        tasks = store.tasks(sid)
        if len(tasks) > 1:
            by_id = {t.id: t for t in tasks}
            tasks_of[sid] = {t.id: by_id.get(t.task_id) for t in store.trials(sid)}
    records = {sid: store.session(sid) for sid in tasks_of}
    for r in rows:
        sid = r["session_id"]
        r["sid"] = sid
        task = tasks_of.get(sid, {}).get(r["trial_id"])
        if task is None:
            continue
        base, own = format_shape(records[sid].shape), format_shape(task.shape)
        r["shape_label"] = r["shape_label"].replace(base, own)
        r["shape_key"] = r["shape_key"].replace(base, own)
        # Rank statistics normalise per session; a task is a shape of its own, so normalise per task.
        r["session_id"] = f"{sid}/{task.index}"
    points: dict[int, BiasPoint] = {
        r["trial_id"]: (r["sid"], r["measured_ms"], r["predicted_ms"], r["shape_label"]) for r in rows
    }
    return _about_model(
        replace(
            analyze(rows, k=k),
            session_ids=tuple(dict.fromkeys(int(i) for i in session_ids)),
            counts=counts,
            points=points,
        ),
        store,
        model,
    )

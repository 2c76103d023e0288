"""The statistics of one group of a cost model's predictions against measurements, with its flags: the
part of the bias report (tunelab.core.trust.bias) the desktop app's cost-model view computes live, kept
apart from the report so the app can import it without TVM."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tunelab.core.search.costmodel import spearman, topk_recall

BIAS_LIMIT = 0.3  # |mean log residual| above this: biased (exp(0.3) = 1.35)
RANK_LIMIT = 0.3  # Spearman below this (with enough trials): ranks poorly
RANK_MIN_N = 8  # fewer trials say too little about ranking to flag it
DEFAULT_K = 5


@dataclass(frozen=True)
class GroupStats:
    """The statistics of one group of trials, with its flags (:func:`group_stats`)."""

    n: int
    residual_mean: float | None  # mean log(predicted / measured); None without trials
    residual_std: float | None  # sample standard deviation; None below two trials
    ratio: float | None  # exp(residual_mean): the typical predicted / measured
    direction: str | None  # "over" | "under" | "exact" (the model over- or under-predicts latency)
    spearman: float | None
    topk_recall: float | None
    k: int  # the k of topk_recall (at most n)
    biased: bool
    ranks_poorly: bool
    flagged: bool


def group_stats(
    predicted: Sequence[float] | np.ndarray,
    measured: Sequence[float] | np.ndarray,
    *,
    k: int = DEFAULT_K,
    rank_predicted: Sequence[float] | np.ndarray | None = None,
    rank_measured: Sequence[float] | np.ndarray | None = None,
) -> GroupStats:
    """n, residual mean and std, ratio, Spearman and top-k recall of one group, with its flags.

    Residuals come from `predicted`/`measured`; rank statistics from `rank_predicted` and
    `rank_measured` when given (normalised latencies), else from the same values.
    """
    p = np.asarray(predicted, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    n = len(p)
    res = np.log(p / m) if n else np.zeros(0)
    mean = float(res.mean()) if n else None
    std = float(res.std(ddof=1)) if n >= 2 else None
    rp = np.asarray(rank_predicted if rank_predicted is not None else p, dtype=np.float64)
    rm = np.asarray(rank_measured if rank_measured is not None else m, dtype=np.float64)
    rho = spearman(rp, rm) if n else None
    kk = min(k, n)
    recall = topk_recall(rp, rm, kk) if kk >= 1 else None
    biased = mean is not None and abs(mean) > BIAS_LIMIT
    ranks_poorly = rho is not None and n >= RANK_MIN_N and rho < RANK_LIMIT
    if mean is None:
        direction = None
    elif mean > 0:
        direction = "over"
    elif mean < 0:
        direction = "under"
    else:
        direction = "exact"
    return GroupStats(
        n=n,
        residual_mean=mean,
        residual_std=std,
        ratio=math.exp(mean) if mean is not None else None,
        direction=direction,
        spearman=rho,
        topk_recall=recall,
        k=kk,
        biased=biased,
        ranks_poorly=ranks_poorly,
        flagged=biased or ranks_poorly,
    )

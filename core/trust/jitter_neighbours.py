"""The jitter analysis's ``neighbours`` cause: the runs other busy processes shared against those they did not."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from tunelab.core.trust.jitter_records import JitterCause, pct
from tunelab.core.trust.jitter_runs import Run, background_pids, med_of, were, who
from tunelab.core.trust.remeasure.report import ms_text

# (share, pids, busy runs, their median, the rest's median)
_Group = tuple[float, list[int], int, float, float]


def _recorded_beside_neighbours(
    runs: list[Run], tolerance: float, recorded_ms: float | None, recorded_disturbance: str | None
) -> JitterCause | None:
    """The recorded figure was taken while other processes were busy (the confirmation's own telemetry
    says so) and the quiet runs now differ from it beyond ``tolerance``: the neighbours of the recording
    explain the difference (the issue's story: a figure confirmed on a busy machine, then "regressed").
    None when the recording was quiet, or the quiet runs agree with it."""
    busy_parts = [part for part in (recorded_disturbance or "").split("; ") if " busy" in part]
    quiet = [r.median_ms for r in runs if r.watched and not r.busy and not r.throttled]
    if not busy_parts or not recorded_ms or not quiet:
        return None
    now_ms = med_of(quiet)
    share = now_ms / recorded_ms - 1
    if abs(share) <= tolerance:
        return None
    what = "optimistic" if share > 0 else "pessimistic"
    sentence = (
        f"the recorded {ms_text(recorded_ms)} was measured while {'; '.join(busy_parts)}; on a quiet machine "
        f"now ({len(quiet)} runs with no other busy process) it runs {ms_text(now_ms)}, "
        f"{pct(abs(share))} {'slower' if share > 0 else 'faster'}: the recorded figure was {what}, and the "
        "quiet figure is the one to trust"
    )
    pids = [int(x) for part in busy_parts for x in re.findall(r"pid (\d+)", part)]
    evidence: dict[str, Any] = {
        "busy_runs": sum(1 for r in runs if r.watched and r.busy),
        "quiet_runs": len(quiet),
        "pids": pids,
        "recorded_disturbance": recorded_disturbance,
        "busy_ms": recorded_ms,
        "quiet_ms": now_ms,
        "baseline": "quiet runs now",
        "groups": [],
    }
    return JitterCause("neighbours", abs(share), tolerance, True, sentence, evidence)


def neighbours_cause(
    runs: list[Run],
    tolerance: float,
    recorded_ms: float | None,
    recorded_quiet: bool,
    recorded_disturbance: str | None = None,
) -> JitterCause:
    """Runs split by each other busy process (those busy in the same runs together): the runs it was
    busy in against the watched runs it was not; a process busy in every run against the recorded figure;
    and the recording's own neighbours (:func:`_recorded_beside_neighbours`) when the runs now are quiet."""
    watched = [r for r in runs if r.watched]
    names = {p: n for r in runs for p, n in r.names.items()}
    seen = Counter(p for r in watched for p in set(r.busy))
    evidence: dict[str, Any] = {
        "busy_runs": sum(1 for r in watched if r.busy),
        "quiet_runs": sum(1 for r in watched if not r.busy),
        "pids": [],
        "process_names": {str(p): names.get(str(p), "exited") for p in seen},
        "groups": [],
    }
    if not watched:
        return JitterCause("neighbours", None, tolerance, False, "no telemetry covered the runs", evidence)
    if not seen:
        then = _recorded_beside_neighbours(runs, tolerance, recorded_ms, recorded_disturbance)
        if then is not None:
            return then
        return JitterCause(
            "neighbours",
            0.0,
            tolerance,
            False,
            f"no other process was busy during any of the {len(watched)} runs",
            evidence,
        )
    background = background_pids(runs)
    groups = _groups(watched, seen, background)
    evidence["groups"] = [
        {"pids": pids, "runs": n, "busy_ms": b, "other_ms": o, "share": sh} for sh, pids, n, b, o in groups
    ]
    always = sorted(background, key=lambda p: -seen[p])
    them = "it" if len(always) == 1 else "them"
    always_text = (
        f"{who(always, names)} {were(always)} busy during every run, so no run tells what the kernel does "
        f"without {them}"
        if always
        else ""
    )
    if not (groups and groups[0][0] > tolerance) and (
        then := _recorded_beside_neighbours(runs, tolerance, recorded_ms, recorded_disturbance)
    ):
        return then
    if groups and groups[0][0] > tolerance:
        named = [g for g in groups if g[0] > tolerance]
        return _groups_explain(named, len(watched), names, always_text, tolerance, evidence)
    if always and recorded_ms is not None and recorded_quiet:
        return _always_against_recorded(always, watched, names, recorded_ms, tolerance, evidence)
    if groups:  # others came and went without slowing the kernel beyond the tolerance
        share, pids, n, busy_ms, base = groups[0]
        sentence = (
            f"{who(pids, names)} {were(pids)} busy during {n} of {len(watched)} runs, but those were only "
            f"{pct(share)} slower ({ms_text(busy_ms)} vs {ms_text(base)}), within the {pct(tolerance)} tolerance"
        )
        if always_text:
            sentence += f"; {always_text}"
        return JitterCause("neighbours", max(share, 0.0), tolerance, False, sentence, evidence)
    evidence["baseline"] = None
    return JitterCause(
        "neighbours",
        None,
        tolerance,
        False,
        f"{always_text}, and no figure recorded on a quiet machine is there to compare with: measure again "
        "on a quiet machine",
        evidence,
    )


def _groups(watched: list[Run], seen: Counter[int], background: frozenset[int]) -> list[_Group]:
    """The other processes that came and went, grouped by the runs they were busy in, largest share first."""
    by_runs: dict[tuple[int, ...], list[int]] = {}
    for pid, _ in seen.most_common():
        if pid not in background:
            by_runs.setdefault(tuple(r.run for r in watched if pid in r.busy), []).append(pid)
    groups = []
    for members, pids in by_runs.items():
        with_ = [r.median_ms for r in watched if r.run in members]
        without = [r.median_ms for r in watched if r.run not in members]
        busy_ms, base = med_of(with_), med_of(without)
        groups.append((busy_ms / base - 1, pids, len(with_), busy_ms, base))
    groups.sort(key=lambda g: -g[0])
    return groups


def _groups_explain(
    named: list[_Group],
    watched: int,
    names: dict[str, str],
    always_text: str,
    tolerance: float,
    evidence: dict[str, Any],
) -> JitterCause:
    """The groups whose runs ran slower beyond ``tolerance`` explain the spread, the largest in words."""
    evidence["pids"] = [p for g in named for p in g[1]]
    share, pids, n, busy_ms, base = named[0]
    evidence.update(busy_ms=busy_ms, quiet_ms=base, baseline="runs without them")
    sentence = (
        f"{who(pids, names)} {were(pids)} busy during {n} of {watched} runs: those ran {pct(share)} "
        f"slower ({ms_text(busy_ms)} vs {ms_text(base)} in the {watched - n} without)"
    )
    for sh, more, m, _b, _o in named[1:]:
        sentence += f"; {who(more, names)} during {m} runs: {pct(sh)} slower"
    if always_text:
        sentence += f"; {always_text}"
    return JitterCause("neighbours", share, tolerance, True, sentence, evidence)


def _always_against_recorded(
    always: list[int],
    watched: list[Run],
    names: dict[str, str],
    recorded_ms: float,
    tolerance: float,
    evidence: dict[str, Any],
) -> JitterCause:
    """Processes busy during every run: the runs against the figure the session recorded on a quiet machine."""
    all_ms = med_of([r.median_ms for r in watched])
    share = all_ms / recorded_ms - 1
    explains = share > tolerance
    evidence.update(
        pids=always if explains else [], busy_ms=all_ms, quiet_ms=recorded_ms, baseline="recorded"
    )
    sentence = (
        f"{who(always, names)} {were(always)} busy during every run, which ran {pct(abs(share))} "
        f"{'slower' if share >= 0 else 'faster'} ({ms_text(all_ms)}) than the {ms_text(recorded_ms)} "
        "the session recorded on a quiet machine"
    )
    if not explains:
        sentence += f", within the {pct(tolerance)} tolerance"
    return JitterCause("neighbours", share, tolerance, explains, sentence, evidence)

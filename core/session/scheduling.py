"""Which task of a running session gets the next batch, and when its first trials say stop."""

from __future__ import annotations

from tunelab.core.session.task import TuningTask


def next_task(tasks: list[TuningTask], early_stop: int | None) -> TuningTask | None:
    """The task whose best latency improved most in its last batch (ties: the fewest trials), among
    those neither exhausted nor early-stopped; None when none is left."""
    live = [t for t in tasks if not t.exhausted and (early_stop is None or t.since_best < early_stop)]
    if not live:
        return None
    return min(live, key=lambda t: t.priority())


def fail_fast_reason(tasks: list[TuningTask], limit: int, before: int, after: int) -> str:
    """Why the session should stop now, when its first `limit` trials all failed alike; else ""."""
    from tunelab.core.faults import failure_class

    if limit <= 0 or not before < limit <= after:
        return ""
    trials = sorted((t for task in tasks for t in task.history), key=lambda t: t.id)[:limit]
    if len(trials) < limit or any(t.ok for t in trials):
        return ""
    classes = {failure_class(t.status, t.error) for t in trials}
    if len(classes) != 1:
        return ""
    sample = (trials[-1].error or trials[-1].status).strip().splitlines()[0][:300]
    return f"the first {limit} trials all failed with {classes.pop()}: {sample}"

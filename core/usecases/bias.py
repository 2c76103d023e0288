"""Where a cost model is wrong: a session's residuals per shape, knob region and sketch (`tunelab bias`, the
app's Cost model view through a `tunelab bias` child)."""

from __future__ import annotations

from collections.abc import Sequence

from tunelab.core.errors import TunelabError
from tunelab.core.store import Store
from tunelab.core.trust.bias import BiasReport, bias_report, bias_report_by_task

__all__ = ["BiasReport", "session_bias"]


def session_bias(
    store: Store, session_ids: Sequence[int], *, top_k: int, model: str | None = None, by_task: bool = False
) -> BiasReport:
    """The bias report of the sessions' trials (``model``: judge that cost model's predictions instead of
    the stored ones; ``by_task``: a shape group per task of a several-shape session, with plot points)."""
    if top_k < 1:
        raise TunelabError("--top-k must be at least 1")
    return (bias_report_by_task if by_task else bias_report)(store, session_ids, k=top_k, model=model)

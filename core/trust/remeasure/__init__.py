"""Re-measuring tuned schedules in fresh processes ("validation"): ``api`` (what callers use), ``pool``
(the worker processes), ``worker`` (the child's entry point), ``verdict`` (judging the runs) and
``report`` (the results as records, their JSON and text).

Kept empty: the worker child (``python -m tunelab.core.trust.remeasure.worker``) imports this package
first, and must not import the rest of it."""

"""What a tunelab process sets up before it runs its first kernel."""

from __future__ import annotations


def prepare_process() -> None:
    """Every core for TVM's thread pool: its default is half the CPUs on x86, so kernels would run on half
    the cores (tunelab.core.measure.threads)."""
    from tunelab.core.measure.threads import use_every_core

    use_every_core()

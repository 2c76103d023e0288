"""A shape as text ("M=512,N=256"), the one way the engine and the app write it.

Kept apart from tunelab.core.workloads.base, which imports TVM: the app writes shapes in every table
and must not load TVM into the GUI process for it.
"""

from __future__ import annotations

from collections.abc import Mapping


def format_shape(shape: Mapping[str, int]) -> str:
    """``{"M": 512, "N": 256}`` -> ``"M=512,N=256"`` (the inverse of ``parse_shape`` for a full shape)."""
    return ",".join(f"{k}={int(v)}" for k, v in shape.items())

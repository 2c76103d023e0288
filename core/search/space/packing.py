"""Whether the auto space packs its inputs: the ``pack_inputs`` limit of MultiLevelTiling, "auto" by default.

Packing copies each input's outermost tile into a buffer of its own before the inner loops run, as BLAS
packs its panels. The copy pays when each packed element is used many times afterwards, and costs
more than it saves when it is not: measured on this project's benchmark (BENCHMARKS.md, "Search
structures"), GEMM 1024x1024x1024 (every element of A and B used 1024 times) was 1.14x faster packed,
the skinny GEMM 16x1024x1024 (each element of B used 16 times) 0.69x. "auto" therefore packs when the
*least* reused input is used at least :data:`PACK_MIN_REUSE` times. TVM-free, so the space editor and
the CLI can say what "auto" resolves to without building a space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

AUTO = "auto"
# Between the measured loser (16 uses per element) and winner (1024), on the side of not packing: a
# copy of a panel that is read only a few dozen times again is the case packing lost.
PACK_MIN_REUSE = 256


@dataclass(frozen=True)
class PackingChoice:
    """What ``pack_inputs`` resolved to for one problem, and why (said in the space's JSON)."""

    setting: bool | str  # what the space asked for: True, False or "auto"
    packs: bool
    min_reuse: float | None  # multiply-adds per element of the least reused input; None when unknown

    def words(self) -> str:
        if self.setting != AUTO:
            return f"pack_inputs {str(self.packs).lower()} (set)"
        if self.min_reuse is None:
            return "pack_inputs auto: off (the inputs' reuse is unknown)"
        verdict = "on" if self.packs else "off"
        relation = "≥" if self.packs else "<"
        return (
            f"pack_inputs auto: {verdict} (the least reused input's elements are used {self.min_reuse:.0f} "
            f"times {relation} {PACK_MIN_REUSE})"
        )

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.setting, "packs": self.packs, "min_reuse": self.min_reuse}


def input_reuse(workload: Any, shape: dict[str, int]) -> list[float]:
    """Multiply-adds per element of each input (FLOP / 2 / elements): how often a packed copy is read."""
    fma = float(workload.flops(shape)) / 2.0
    return [fma / math.prod(dims) for dims in workload.input_shapes(shape) if math.prod(dims) > 0]


def choose_packing(setting: bool | str, workload: Any, shape: dict[str, int]) -> PackingChoice:
    """Resolve a ``pack_inputs`` setting: a boolean stands; "auto" packs when every input is reused enough."""
    if setting != AUTO:
        return PackingChoice(setting, bool(setting), None)
    try:
        reuse = input_reuse(workload, shape)
    except Exception:  # noqa: BLE001 - a workload that cannot count its FLOPs or inputs: do not pack
        reuse = []
    if not reuse:
        return PackingChoice(AUTO, False, None)
    least = min(reuse)
    return PackingChoice(AUTO, least >= PACK_MIN_REUSE, least)

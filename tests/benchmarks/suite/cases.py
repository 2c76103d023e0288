"""The suite's cases and tiers: which problems are tuned, with what budgets and seeds, against which goals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """One problem tuned by tunelab (and, with ``raw``, by plain ``tune_tir``) once per seed.

    ``checkpoints`` are the budgets the kernel-quality table reports: the best kernel among a run's first
    N trials is what a budget of N would have found, since MetaSchedule's search does not look at the
    budget it is given (it only stops there)."""

    name: str
    workload: str
    shape: dict[str, int]
    budget: int
    checkpoints: tuple[int, ...]
    seeds: tuple[int, ...] = (0,)
    raw: bool = True  # also tune with plain tune_tir, for the vs-raw and overhead tables
    batch: int = 16
    goals: dict[int, float] = field(default_factory=dict)  # checkpoint -> the x-vendor goal
    # Search structures switched on beside the default session, each a run of its own: variant name ->
    # {sketch rule: {limit: value}} for the auto space (the switches of the space editor); the key
    # "tuner" instead holds options of the evolutionary tuner ({"population_size": 512}).
    variants: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # Variants of the same form run only when named (run_suite --variant NAME): experiments.
    probes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "workload": self.workload,
            "shape": dict(self.shape),
            "budget": self.budget,
            "checkpoints": list(self.checkpoints),
            "seeds": list(self.seeds),
            "raw": self.raw,
            "batch": self.batch,
            "goals": {str(k): v for k, v in self.goals.items()},
            "variants": self.variants,
        }


GEMM_1024 = {"M": 1024, "N": 1024, "K": 1024}
GEMM_WIDE = {"M": 512, "N": 512, "K": 2048}
GEMM_SKINNY = {"M": 16, "N": 1024, "K": 1024}
GEMM_ODD = {"M": 96, "N": 200, "K": 72}
CONV_RESNET: dict[str, int] = {}  # conv2d_nchw's default: N=1, C=K=64, 56x56, 3x3, pad 1
CONV_RESNET_BLOCKED: dict[str, int] = {}  # conv2d_nchwc's default: the same layer in blocks of 16 channels

# The goals, x vendor (vendor time / tunelab time), per budget.
SQUARE_GOALS = {64: 0.5, 256: 0.6, 1000: 0.8}
WEAK_BLAS_GOALS = {1000: 1.0}
CONV_GOALS = {1000: 0.8}
# Experiments on the search (BENCHMARKS.md 1b), run only when named with --variant: tune_tir's
# cost-model warm-up, and the population tunelab used before it took MetaSchedule's 512.
SEARCH_PROBES: dict[str, dict[str, dict[str, Any]]] = {
    "warmup100": {"tuner": {"warmup_samples": 100}},
    "pop256": {"tuner": {"population_size": 256}},
}
# pack_inputs is "auto" by default (tunelab.core.search.space.packing): GEMM 1024^3 packs, the skinny GEMM
# does not. Each case runs the other choice beside it, so the structures table keeps measuring the rule.
PACKED = {"pack_inputs": {"MultiLevelTiling": {"pack_inputs": True}}}
UNPACKED = {"unpacked": {"MultiLevelTiling": {"pack_inputs": False}}}

TIERS: dict[str, list[Case]] = {
    # CI-sized (under 20 minutes on 2 cores): one seed of each tool at 64 trials.
    "quick": [
        Case(
            "gemm_1024",
            "gemm",
            GEMM_1024,
            64,
            (64,),
            goals=SQUARE_GOALS,
            variants=UNPACKED,
            probes=SEARCH_PROBES,
        ),
        Case(
            "gemm_skinny",
            "gemm",
            GEMM_SKINNY,
            64,
            (64,),
            goals=WEAK_BLAS_GOALS,
            variants=PACKED,
            probes=SEARCH_PROBES,
        ),
    ],
    # In the background (hours): the 1000-trial rows, and three seeds of each tool for the vs-raw rows.
    "long": [
        Case(
            "gemm_1024",
            "gemm",
            GEMM_1024,
            1000,
            (64, 256, 1000),
            seeds=(0, 1, 2),
            goals=SQUARE_GOALS,
            variants=UNPACKED,
        ),
        Case("gemm_512x512x2048", "gemm", GEMM_WIDE, 1000, (64, 256, 1000), raw=False, goals=SQUARE_GOALS),
        Case(
            "gemm_skinny", "gemm", GEMM_SKINNY, 1000, (64, 256, 1000), seeds=(0, 1, 2), goals=WEAK_BLAS_GOALS
        ),
        Case("gemm_odd", "gemm", GEMM_ODD, 1000, (64, 256, 1000), raw=False, goals=WEAK_BLAS_GOALS),
        Case("conv2d_resnet", "conv2d_nchw", CONV_RESNET, 1000, (64, 256, 1000), raw=False, goals=CONV_GOALS),
        Case(
            "conv2d_resnet_nchwc",
            "conv2d_nchwc",
            CONV_RESNET_BLOCKED,
            1000,
            (64, 256, 1000),
            raw=False,
            goals=CONV_GOALS,
        ),
    ],
    # The machinery end to end in a few minutes (tests of the suite itself, not figures to quote).
    "tiny": [
        Case("gemm_128", "gemm", {"M": 128, "N": 128, "K": 128}, 8, (4, 8), batch=4),
    ],
}

"""Frozen records of the trust checks: a machine's roofline profile, a vendor baseline and a cost-model bias report."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class MachineProfile:
    """This machine's roofline for one target kind (tunelab.core.trust.roofline): the peak FLOP/s per dtype
    and the memory bandwidth, as the store keeps it (table ``machine_profile``)."""

    target_kind: str
    hostname: str
    peak_gflops: dict[str, float]  # dtype -> GFLOP/s
    bandwidth_gbs: float  # 10^9 bytes/s
    detail: dict[
        str, Any
    ]  # what was probed and how: BLAS, kernel, probe sizes (CPU) or library, device (GPU)
    version: int  # tunelab.core.trust.roofline.PROFILE_VERSION when it was measured
    elapsed_s: float  # the probes' time
    measured_at: float
    # Set by a look-up (tunelab.core.trust.roofline.machine_profile): True when it came from the store.
    # None on a profile as measured, which is what the store keeps.
    cached: bool | None = None

    @property
    def kernel(self) -> str | None:
        """The BLAS and its kernel (CPU) or the library (GPU) the peak was measured with."""
        return self.detail.get("kernel") or self.detail.get("library")

    def to_json(self) -> dict[str, Any]:
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        if self.cached is None:
            del data["cached"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MachineProfile:
        """The profile `to_json` wrote (a stored one, or one with ``cached``)."""
        return cls(**{f.name: copy.deepcopy(data[f.name]) for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class VendorBaseline:
    """One problem (workload, shape, dtype, target kind) through the vendor library
    (tunelab.core.trust.baselines), as the store keeps it (table ``vendor_baselines``)."""

    workload: str
    shape: dict[str, int]
    dtype: str
    target_kind: str
    library: str  # "NumPy + openblas 0.3.31 (Haswell kernel, 2 threads)", "PyTorch 2.5 (cuBLAS)"
    method: str  # "np.matmul", "im2col + np.matmul", "conv2d", ...
    median_ms: float
    samples_ms: tuple[float, ...]
    gflops: float | None
    correct: bool  # the output matched the workload's NumPy reference
    max_abs_err: float
    measure: dict[str, Any]  # number, repeat, min_repeat_ms, warmup, settle_s (the pause before timing)
    measured_at: float
    blas: dict[str, Any] | None  # NumPy's BLAS as threadpoolctl names it (CPU); None on a GPU
    # The machine it was measured on, named once stored (the store keys baselines by it); a
    # measurement not stored yet names none and its JSON has no "hostname".
    hostname: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        data["samples_ms"] = list(self.samples_ms)
        if self.hostname is None:
            del data["hostname"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VendorBaseline:
        """The baseline `to_json` wrote (a stored one names its ``hostname``); other keys (the session's
        side of a :class:`tunelab.core.trust.baselines.VendorComparison`) are left out."""
        values = {f.name: copy.deepcopy(data[f.name]) for f in fields(cls) if f.name in data}
        values["samples_ms"] = tuple(values["samples_ms"])
        return cls(**values)


# trial id -> (session id, measured ms, predicted ms, shape label): a trial in the desktop app's bias plots
BiasPoint = tuple[int, float, float, str]


@dataclass(frozen=True)
class BiasGroup:
    """One group of a report: a shape, a knob value, a tile size bucket, a sketch, or every trial."""

    dimension: str  # "all" | "shape" | "knob" | "tile" | "sketch"
    key: str
    label: str
    n: int
    residual_mean: float | None
    residual_std: float | None
    ratio: float | None
    direction: str | None
    spearman: float | None
    topk_recall: float | None
    k: int
    biased: bool
    ranks_poorly: bool
    flagged: bool
    words: str  # what is wrong, in words ("" when not flagged)
    trial_ids: tuple[int | None, ...]
    same_as: str | None  # the label of an earlier group holding exactly the same trials

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["trial_ids"] = list(self.trial_ids)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BiasGroup:
        values = {f.name: data[f.name] for f in fields(cls)}
        values["trial_ids"] = tuple(values["trial_ids"])
        return cls(**values)


@dataclass(frozen=True)
class BiasCounts:
    """The trials of a report's sessions: all of them, and which could not be judged."""

    trials: int = 0
    failed: int = 0  # not ok, or no latency
    no_prediction: int = 0  # measured before the model could predict
    predicted: int = 0  # the ones judged


@dataclass(frozen=True)
class BiasReport:
    """The cost-model bias of one or more sessions (tunelab.core.trust.bias: ``bias_report``); here, not
    there, so the desktop app reads it without loading the engine (TVM)."""

    session_ids: tuple[int, ...]
    counts: BiasCounts
    n: int  # trials judged
    k: int
    groups: tuple[BiasGroup, ...]
    flagged: tuple[str, ...]  # labels of the flagged groups
    thresholds: dict[str, float]
    summary: str
    points: dict[int, BiasPoint] | None = None  # only by task (``bias_report_by_task``)
    model: str | None = None  # the cost model judged, when asked for one; None: the stored predictions

    def to_json(self) -> dict[str, Any]:
        """As ``tunelab bias --json`` prints it: with ``points`` (``--by-task``) the figures come first and the
        trial ids are the keys of ``points`` (strings once in JSON)."""
        head = {"session_ids": list(self.session_ids), "counts": asdict(self.counts)}
        if self.model is not None:
            head["model"] = self.model
        body = {
            "n": self.n,
            "k": self.k,
            "groups": [g.to_json() for g in self.groups],
            "flagged": list(self.flagged),
            "thresholds": dict(self.thresholds),
            "summary": self.summary,
        }
        if self.points is None:
            return {**head, **body}
        # the key order `tunelab bias --by-task --json` has always had
        return {**body, **head, "points": {t: list(p) for t, p in self.points.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BiasReport:
        points = data.get("points")
        return cls(
            session_ids=tuple(data["session_ids"]),
            counts=BiasCounts(**data["counts"]),
            n=data["n"],
            k=data["k"],
            groups=tuple(BiasGroup.from_json(g) for g in data["groups"]),
            flagged=tuple(data["flagged"]),
            thresholds=dict(data["thresholds"]),
            summary=data["summary"],
            points=None if points is None else {int(t): tuple(p) for t, p in points.items()},
            model=data.get("model"),
        )

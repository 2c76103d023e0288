"""The shape check's results (:func:`tunelab.core.trust.shapes.across_shapes`) as frozen records.

Each record has one JSON mapping (``to_json`` / ``from_json``): the document ``across_shapes`` has always
given, which a stored validation keeps (its ``shapes`` rows and ``across_shapes``). ``from_json`` reads
documents of older versions too: a missing key takes its default. TVM-free, so the CLI and the app can
read a stored check without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FallsOffRule:
    """The limits a shape is judged by (:func:`tunelab.core.trust.shapes.judge`)."""

    max_ratio_to_tuned: float  # slower than the shape's own tuned schedule by more than this: falls off
    min_gflops_fraction: float  # below this fraction of the tuned shape's GFLOP/s: falls off

    def to_json(self) -> dict[str, float]:
        return {
            "max_ratio_to_tuned": self.max_ratio_to_tuned,
            "min_gflops_fraction": self.min_gflops_fraction,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FallsOffRule:
        return cls(float(data["max_ratio_to_tuned"]), float(data["min_gflops_fraction"]))


@dataclass(frozen=True, slots=True)
class ShapeRow:
    """The tuned schedule carried over to one shape and measured there.

    ``status`` is "ok", or why it does not work there ("untransferable", "invalid", a measurement's
    status); ``changed`` names the knobs whose value changed on the way; the ``tuned_*`` figures are
    the schedule the store holds for exactly this shape (``tuned_stored_ms`` as stored, ``tuned_ms``
    measured again in the same run); ``falls_off`` is None until judged."""

    shape: dict[str, int]
    shape_text: str
    status: str = "ok"
    error: str | None = None
    config: Any = None  # the carried-over config (a space's Config), None where there is none
    changed: tuple[str, ...] = ()
    latency_ms: float | None = None
    samples_ms: tuple[float, ...] = ()
    gflops: float | None = None
    tuned_session_id: int | None = None
    tuned_trial_id: int | None = None
    tuned_ms: float | None = None
    tuned_stored_ms: float | None = None
    tuned_gflops: float | None = None
    ratio_to_tuned: float | None = None
    falls_off: bool | None = None
    reasons: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": dict(self.shape),
            "shape_text": self.shape_text,
            "status": self.status,
            "error": self.error,
            "config": self.config,
            "changed": list(self.changed),
            "latency_ms": self.latency_ms,
            "samples_ms": list(self.samples_ms),
            "gflops": self.gflops,
            "tuned_session_id": self.tuned_session_id,
            "tuned_trial_id": self.tuned_trial_id,
            "tuned_ms": self.tuned_ms,
            "tuned_stored_ms": self.tuned_stored_ms,
            "tuned_gflops": self.tuned_gflops,
            "ratio_to_tuned": self.ratio_to_tuned,
            "falls_off": self.falls_off,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShapeRow:
        return cls(
            shape=dict(data.get("shape") or {}),
            shape_text=str(data.get("shape_text", "")),
            status=data.get("status", "ok"),
            error=data.get("error"),
            config=data.get("config"),
            changed=tuple(data.get("changed") or ()),
            latency_ms=data.get("latency_ms"),
            samples_ms=tuple(data.get("samples_ms") or ()),
            gflops=data.get("gflops"),
            tuned_session_id=data.get("tuned_session_id"),
            tuned_trial_id=data.get("tuned_trial_id"),
            tuned_ms=data.get("tuned_ms"),
            tuned_stored_ms=data.get("tuned_stored_ms"),
            tuned_gflops=data.get("tuned_gflops"),
            ratio_to_tuned=data.get("ratio_to_tuned"),
            falls_off=data.get("falls_off"),
            reasons=tuple(data.get("reasons") or ()),
        )

    @staticmethod
    def is_row_json(data: Mapping[str, Any]) -> bool:
        """Whether a stored validation's ``shapes`` row is one of these (a validation's own-shape row
        has no ``falls_off``)."""
        return "falls_off" in data


@dataclass(frozen=True, slots=True)
class SourceFigures:
    """The schedule on the shape it was tuned for, measured in the same run: the GFLOP/s rule's base."""

    latency_ms: float | None
    gflops: float | None
    status: str
    error: str | None
    reference_gflops: float | None  # `gflops`, or the stored timing's when it fails there now

    def to_json(self) -> dict[str, Any]:
        return {
            "latency_ms": self.latency_ms,
            "gflops": self.gflops,
            "status": self.status,
            "error": self.error,
            "reference_gflops": self.reference_gflops,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SourceFigures:
        return cls(
            latency_ms=data.get("latency_ms"),
            gflops=data.get("gflops"),
            status=data.get("status", "ok"),
            error=data.get("error"),
            reference_gflops=data.get("reference_gflops"),
        )


@dataclass(frozen=True, slots=True)
class AcrossShapes:
    """A session's tuned schedule (trial ``trial_id``) carried over to other shapes of its workload."""

    session_id: int
    trial_id: int
    workload: str
    dtype: str
    target_kind: str
    source_shape: dict[str, int]
    source_config: Any
    source: SourceFigures
    rule: FallsOffRule | None  # None in a document older than the rule's
    rows: tuple[ShapeRow, ...]
    falls_off: tuple[str, ...]  # the shape texts of the rows that fall off
    summary: str

    def to_json(self, *, rows: bool = True) -> dict[str, Any]:
        """The document; without ``rows`` as a stored validation keeps it (its rows are its ``shapes``)."""
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "trial_id": self.trial_id,
            "workload": self.workload,
            "dtype": self.dtype,
            "target_kind": self.target_kind,
            "source_shape": dict(self.source_shape),
            "source_config": self.source_config,
            "source": self.source.to_json(),
            "rule": self.rule.to_json() if self.rule is not None else None,
            "rows": [r.to_json() for r in self.rows],
            "falls_off": list(self.falls_off),
            "summary": self.summary,
        }
        if not rows:
            del data["rows"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], rows: Any = None) -> AcrossShapes:
        """From the document, its rows from ``rows`` where given (a stored validation's ``shapes``)."""
        rule = data.get("rule")
        return cls(
            session_id=data.get("session_id", 0),
            trial_id=data.get("trial_id", 0),
            workload=data.get("workload", ""),
            dtype=data.get("dtype", ""),
            target_kind=data.get("target_kind", ""),
            source_shape=dict(data.get("source_shape") or {}),
            source_config=data.get("source_config"),
            source=SourceFigures.from_json(data.get("source") or {}),
            rule=FallsOffRule.from_json(rule) if rule else None,
            rows=tuple(ShapeRow.from_json(r) for r in (data.get("rows") if rows is None else rows) or ()),
            falls_off=tuple(data.get("falls_off") or ()),
            summary=str(data.get("summary", "")),
        )

"""The shape check's results (:func:`tunelab.core.trust.shapes.across_shapes`) as frozen records.

Each record has one JSON mapping (``to_json`` / ``from_json``): the document ``across_shapes`` has always
given, which a stored validation keeps (its ``shapes`` rows and ``across_shapes``), by their fields
(:mod:`tunelab.core.records_json`). ``from_json`` reads
documents of older versions too: a missing key takes its default. TVM-free, so the CLI and the app can
read a stored check without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunelab.core.records_json import JsonRecord, fields_from_json, fields_to_json


def read_status(data: Mapping[str, Any]) -> str:
    """A figure's status: "ok" where a document older than it has none."""
    return data.get("status", "ok")  # as stored: these rows have always read it so


@dataclass(frozen=True, slots=True)
class FallsOffRule(JsonRecord):
    """The limits a shape is judged by (:func:`tunelab.core.trust.shapes.judge`)."""

    max_ratio_to_tuned: float  # slower than the shape's own tuned schedule by more than this: falls off
    min_gflops_fraction: float  # below this fraction of the tuned shape's GFLOP/s: falls off

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FallsOffRule:
        # strict, unlike the other records: a rule is whole or absent (AcrossShapes.rule is None then)
        return cls(float(data["max_ratio_to_tuned"]), float(data["min_gflops_fraction"]))


@dataclass(frozen=True, slots=True)
class ShapeRow(JsonRecord):
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

    json_readers = {"status": read_status}

    @staticmethod
    def is_row_json(data: Mapping[str, Any]) -> bool:
        """Whether a stored validation's ``shapes`` row is one of these (a validation's own-shape row
        has no ``falls_off``)."""
        return "falls_off" in data


@dataclass(frozen=True, slots=True)
class SourceFigures(JsonRecord):
    """The schedule on the shape it was tuned for, measured in the same run: the GFLOP/s rule's base."""

    latency_ms: float | None
    gflops: float | None
    status: str
    error: str | None
    reference_gflops: float | None  # `gflops`, or the stored timing's when it fails there now

    json_readers = {"status": read_status}


@dataclass(frozen=True, slots=True)
class AcrossShapes(JsonRecord):
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
        data = fields_to_json(self)
        if not rows:
            del data["rows"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], rows: Any = None) -> AcrossShapes:
        """From the document, its rows from ``rows`` where given (a stored validation's ``shapes``)."""
        return fields_from_json(cls, data if rows is None else {**data, "rows": rows})

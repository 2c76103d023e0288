"""The validation report's records and their one JSON mapping (tunelab.core.trust.remeasure.report): a
stored report from a real validation reads back into records that write it out unchanged, key order
included; a report an older tunelab stored (keys missing) still reads, with defaults."""

from __future__ import annotations

import json

import pytest
from stores import copy_database

from tunelab.core.store import Store
from tunelab.core.trust.confirmed import Confirmation
from tunelab.core.trust.remeasure.report import (
    OwnShapeRow,
    ValidationReport,
    format_report,
)
from tunelab.core.trust.shape_report import AcrossShapes, ShapeRow
from tunelab.core.usecases.validation import validate_and_store

# What tunelab stored before reports had shapes, placement, machine drift, quiet runs, a task or the
# telemetry status: a blob of such a database, cut down to the keys it had.
OLD_BLOB = {
    "source": {"kind": "session", "session_id": 1, "name": "gemm-old", "top_k": 1},
    "workload": "gemm",
    "shape": {"M": 32, "N": 32, "K": 32},
    "dtype": "float32",
    "target": {"kind": "llvm"},
    "verdict": "stable",
    "cause": None,
    "summary": "the figures hold: trial 3 re-measured 12.0 us vs 12.1 us recorded over 2 fresh-process runs",
    "recorded_ms": 0.0121,
    "remeasured_ms": 0.012,
    "cv": 0.01,
    "runs": 2,
    "throttled": False,
    "recorded_order": ["trial 3"],
    "remeasured_order": ["trial 3"],
    "ranking_holds": None,
    "options": {"number": 1, "repeat": 2, "runs": 2},
    "schedules": [
        {
            "label": "trial 3",
            "trial_id": 3,
            "config": {"tile_i": [8]},
            "recorded_ms": 0.0121,
            "remeasured_ms": 0.012,
            "cv": 0.01,
            "runs": 2,
            "samples_ms": [0.0119, 0.012, 0.0121, 0.012],
            "measurements": [
                {"run": 0, "position": 0, "pid": 11, "ok": True, "samples_ms": [0.0119, 0.012]},
                {"run": 1, "position": 0, "pid": 12, "ok": False, "error": "run error: boom"},
            ],
            "verdict": "stable",
            "cause": None,
        }
    ],
    "started_at": 1.0,
    "finished_at": 3.5,
    "hostname": "old-host",
}


@pytest.mark.slow
def test_a_stored_report_reads_back_and_writes_out_unchanged(finished_session, tmp_path):
    """A real validation (two schedules, two fresh processes, the best carried over to another shape),
    stored: from_json then to_json gives the stored document back, key for key and in the same order."""
    src, sid = finished_session
    store = Store(copy_database(src, tmp_path / "copy.sqlite"))
    try:
        outcome = validate_and_store(store, sid, top_k=2, runs=2, shapes="M=16")
        assert outcome.stored and not outcome.cancelled
        report = outcome.report
        stored = store.validation(report.id)
        again = ValidationReport.from_json(stored)
        assert again.to_json() == stored
        assert json.dumps(again.to_json()) == json.dumps(stored)  # the same keys in the same order
        assert json.dumps(report.to_json()) == json.dumps(stored)  # what was returned is what was stored
        # its parts are records, read by field
        assert [s.label for s in again.schedules] == [s.label for s in report.schedules]
        assert all(len(s.measurements) == 2 for s in again.schedules)
        assert isinstance(again.across_shapes, AcrossShapes) and again.across_shapes.rows == again.shapes
        assert [r.shape["M"] for r in again.shapes] == [16]
        assert all(isinstance(r, ShapeRow) and r.falls_off is not None for r in again.shapes)
        assert again.across_shapes.rule is not None and again.across_shapes.rule.max_ratio_to_tuned == 1.25
        assert format_report(again) == format_report(report)
        # without other shapes the report holds the validated shape's own row
        plain = validate_and_store(store, sid, top_k=1, runs=1).report
        stored = store.validation(plain.id)
        assert json.dumps(ValidationReport.from_json(stored).to_json()) == json.dumps(stored)
        (own,) = ValidationReport.from_json(stored).shapes
        assert isinstance(own, OwnShapeRow) and own.shape_text == "M=32,N=32,K=32"
        assert "across_shapes" not in stored and ValidationReport.from_json(stored).across_shapes is None
    finally:
        store.close()


def test_an_old_stored_report_reads_with_defaults():
    report = ValidationReport.from_json(OLD_BLOB)
    assert report.source.kind == "session" and report.source.task == 0 and report.source.purpose is None
    assert report.verdict == "stable" and report.ranking.holds is None and report.ranking.kendall_tau is None
    assert report.placement_ratio is None and report.machine_drift is None and report.shapes == ()
    assert report.options.number == 1 and report.options.repeat == 2 and report.runs_asked == 2
    assert report.across_shapes is None and report.id is None and report.telemetry_status == ""
    (s,) = report.schedules
    assert s.recorded_kind == "session" and not s.confirmed and s.quiet_runs is None
    assert s.runs_tried == 2  # unknown then: the runs that gave a timing
    assert s.layout_ms == {} and s.placement_note() is None and s.drift_note() is None
    ok, failed = s.measurements
    assert ok.samples_ms == (0.0119, 0.012) and ok.telemetry is None and ok.cold_ms is None
    assert not failed.ok and failed.error == "run error: boom" and failed.samples_ms is None
    assert format_report(report).startswith("stable: the figures hold")
    # written out again it has every key of today's reports, and reads back to the same records
    data = report.to_json()
    assert {"shapes", "placement_ratio", "machine_drift", "kendall_tau", "telemetry_status"} <= set(data)
    assert data["source"]["task"] == 0 and data["options"]["runs"] == 2
    assert ValidationReport.from_json(data).to_json() == data


def test_an_old_confirmation_reads_with_defaults():
    c = Confirmation.from_json({"median_ms": 0.5, "validation_id": 7})
    assert c.samples_ms == () and c.runs == 0 and c.reference_ms is None and c.validation_id == 7
    assert Confirmation.from_json(c.to_json()) == c

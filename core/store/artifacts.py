"""What the trust tools keep in the store: validation runs, vendor baselines and machine profiles.

Validation reports are kept as the JSON-ready dicts ``tunelab.core.trust.remeasure`` returns, with a
row per schedule; baselines and profiles as their records' JSON, keyed by machine and problem.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from tunelab.core.errors import StoreError
from tunelab.core.records import MachineProfile, VendorBaseline
from tunelab.core.store.connection import StoreConnection, _reader
from tunelab.core.store.json_text import _dumps, _json_decode, inserted_id


def _shape_key(shape: dict[str, int]) -> str:
    """A shape as the text baselines are keyed by (sorted keys: the same problem, the same key)."""
    return json.dumps({k: int(v) for k, v in shape.items()}, sort_keys=True, separators=(",", ":"))


class ArtifactStore(StoreConnection):
    """The Store's validations, vendor_baselines and machine_profile methods."""

    def add_validation(self, report: dict[str, Any]) -> int:
        """Store one validation run (``tunelab.core.trust.remeasure``'s report), a row per schedule; its id."""
        schedules = report.get("schedules") or []
        source = report.get("source") or {}
        with self._write() as conn:
            session_id = source.get("session_id") if source.get("kind") == "session" else None
            if session_id is not None:
                self._require_session(session_id)
            cur = conn.execute(
                """INSERT INTO validations (session_id, schedule_file, created_at, hostname, runs, verdict,
                    cause, summary, report) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    session_id,
                    source.get("path"),
                    float(report.get("finished_at") or time.time()),
                    report.get("hostname") or self._hostname,
                    int(report.get("runs") or 0),
                    str(report.get("verdict")),
                    report.get("cause"),
                    str(report.get("summary") or ""),
                    _dumps(report),
                ),
            )
            validation_id = inserted_id(cur)
            conn.executemany(
                """INSERT INTO validation_results (validation_id, idx, trial_id, label, recorded_ms,
                    remeasured_ms, cv, runs, throttled, verdict, cause, detail)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [
                    (
                        validation_id,
                        i,
                        s.get("trial_id"),
                        str(s.get("label")),
                        s.get("recorded_ms"),
                        s.get("remeasured_ms"),
                        s.get("cv"),
                        int(s.get("runs") or 0),
                        int(bool(s.get("throttled"))),
                        str(s.get("verdict")),
                        s.get("cause"),
                        _dumps(s),
                    )
                    for i, s in enumerate(schedules)
                ],
            )
        return validation_id

    @_reader
    def validations(self, session_id: int | None = None) -> list[dict[str, Any]]:
        """Stored validation runs, newest first (all, or one session's), each with its per-schedule
        ``results`` (the columns, ``detail`` parsed). A fresh dict on every call."""
        with self._read():
            if session_id is not None:
                self._require_session(session_id)
            sql = (
                "SELECT id, session_id, schedule_file, created_at, hostname, runs, verdict, cause, summary "
                "FROM validations"
            )
            params: tuple[Any, ...] = ()
            if session_id is not None:
                sql += " WHERE session_id = ?"
                params = (session_id,)
            runs = [dict(r) for r in self._rows(sql + " ORDER BY id DESC", params)]
            results: dict[int, list[dict[str, Any]]] = {}
            if runs:
                ids = [r["id"] for r in runs]
                rows = self._rows(
                    "SELECT validation_id, idx, trial_id, label, recorded_ms, remeasured_ms, cv, runs, throttled, "
                    "verdict, cause, detail FROM validation_results "
                    f"WHERE validation_id IN ({', '.join('?' * len(ids))}) "
                    "ORDER BY validation_id, idx",
                    ids,
                )
                for row in rows:
                    item = dict(row)
                    item["throttled"] = bool(item["throttled"])
                    item["detail"] = _json_decode(item["detail"])
                    results.setdefault(item.pop("validation_id"), []).append(item)
        for r in runs:
            r["results"] = results.get(r["id"], [])
        return runs

    @_reader
    def validation_stamps(self) -> dict[int, int]:
        """The id of each session's latest stored validation, by session id (sessions without any are
        absent): one indexed read that says whose confirmed figures may have changed."""
        rows = self._conn.execute(
            "SELECT session_id, max(id) FROM validations WHERE session_id IS NOT NULL GROUP BY session_id"
        ).fetchall()
        return {int(sid): int(vid) for sid, vid in rows}

    @_reader
    def validation(self, validation_id: int) -> dict[str, Any]:
        """The full report of one validation run (as ``tunelab.core.trust.remeasure`` returned it, plus ``id``)."""
        row = self._conn.execute("SELECT report FROM validations WHERE id = ?", (validation_id,)).fetchone()
        if row is None:
            raise StoreError(f"validation {validation_id} does not exist in {self.path}")
        report = _json_decode(row[0])
        report["id"] = validation_id
        return report

    # ----------------------------------------------------------------------------------- baselines

    @_reader
    def baseline(
        self, workload: str, shape: dict[str, int], dtype: str, target_kind: str, hostname: str | None = None
    ) -> VendorBaseline | None:
        """The stored vendor baseline of one problem on this (or ``hostname``'s) machine; None if none."""
        row = self._conn.execute(
            """SELECT detail FROM vendor_baselines WHERE hostname = ? AND workload = ? AND shape = ? AND dtype = ?
            AND target_kind = ?""",
            (hostname or self._hostname, workload, _shape_key(shape), dtype, target_kind),
        ).fetchone()
        return None if row is None else VendorBaseline.from_json(_json_decode(row[0]))

    def fastest_baseline(
        self, dtype: str, target_kind: str, hostname: str | None = None
    ) -> VendorBaseline | None:
        """The stored vendor baseline in ``dtype`` with the highest GFLOP/s on this (or ``hostname``'s)
        machine, whatever its workload; None if none (the roofline's floor under its compute peak)."""
        row = self._conn.execute(
            """SELECT detail FROM vendor_baselines WHERE hostname = ? AND dtype = ? AND target_kind = ?
            AND gflops IS NOT NULL ORDER BY gflops DESC LIMIT 1""",
            (hostname or self._hostname, dtype, target_kind),
        ).fetchone()
        return None if row is None else VendorBaseline.from_json(_json_decode(row[0]))

    def put_baseline(self, entry: VendorBaseline) -> None:
        """Store (or replace) a baseline (its hostname defaults to this machine). The whole entry is
        kept as JSON (:meth:`VendorBaseline.to_json`)."""
        data = entry.to_json()
        data.setdefault("hostname", self._hostname)
        with self._write() as conn:
            conn.execute(
                """INSERT INTO vendor_baselines (hostname, workload, shape, dtype, target_kind, library, median_ms,
                    gflops, measured_at, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (hostname, workload, shape, dtype, target_kind) DO UPDATE SET
                    library = excluded.library, median_ms = excluded.median_ms, gflops = excluded.gflops,
                    measured_at = excluded.measured_at, detail = excluded.detail""",
                (
                    data["hostname"],
                    entry.workload,
                    _shape_key(entry.shape),
                    entry.dtype,
                    entry.target_kind,
                    entry.library,
                    float(entry.median_ms),
                    entry.gflops,
                    float(entry.measured_at),
                    _dumps(data),
                ),
            )

    # ----------------------------------------------------------------------------------- machine profile

    @_reader
    def machine_profile(self, target_kind: str, hostname: str | None = None) -> MachineProfile | None:
        """This (or ``hostname``'s) machine's measured roofline for a target kind; None if never measured."""
        row = self._conn.execute(
            "SELECT detail FROM machine_profile WHERE hostname = ? AND target_kind = ?",
            (hostname or self._hostname, target_kind),
        ).fetchone()
        return None if row is None else MachineProfile.from_json(_json_decode(row[0]))

    def put_machine_profile(self, profile: MachineProfile) -> None:
        """Store (or replace) a profile, kept as JSON (:meth:`MachineProfile.to_json`, without ``cached``:
        that is said by each look-up)."""
        data = replace(profile, cached=None).to_json()
        with self._write() as conn:
            conn.execute(
                """INSERT OR REPLACE INTO machine_profile (hostname, target_kind, measured_at, peak_gflops,
                    bandwidth_gbs, detail) VALUES (?, ?, ?, ?, ?, ?)""",
                (
                    profile.hostname,
                    profile.target_kind,
                    float(profile.measured_at),
                    _dumps(profile.peak_gflops),
                    float(profile.bandwidth_gbs),
                    _dumps(data),
                ),
            )

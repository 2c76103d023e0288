"""Telemetry in the store: a session's hardware samples, and what the hardware did during each trial.

Samples arrive in batches from the telemetry sampler's own Store (``tunelab.core.store.telemetry_sink``);
a trial's stamp is ``tunelab.core.telemetry.summarize``'s summary, with what a table sorts on as columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunelab.core.errors import StoreError
from tunelab.core.store.connection import StoreConnection, _reader
from tunelab.core.store.json_text import _dumps, _json_decode
from tunelab.core.telemetry.readings import TelemetrySample

_TELEMETRY_COLUMNS = (
    "session_id, t, gpu_temp_c, gpu_power_w, gpu_power_limit_w, gpu_sm_clock_mhz, gpu_mem_clock_mhz, "
    "gpu_util_pct, gpu_mem_util_pct, gpu_mem_used_mib, throttle_reasons, other_gpu_procs, other_gpu_pids, "
    "cpu_load_per_core, cpu_load_mean, cpu_freq_mhz, cpu_temp_c, other_busy_procs, other_busy_pids"
)


def _split_ints(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(",")) if text else ()


def _telemetry_sample(row: Sequence[Any]) -> TelemetrySample:
    return TelemetrySample(
        t=row[1],
        gpu_temp_c=row[2],
        gpu_power_w=row[3],
        gpu_power_limit_w=row[4],
        gpu_sm_clock_mhz=row[5],
        gpu_mem_clock_mhz=row[6],
        gpu_util_pct=row[7],
        gpu_mem_util_pct=row[8],
        gpu_mem_used_mib=row[9],
        throttle_reasons=tuple(row[10].split(",")) if row[10] else (),
        other_gpu_procs=row[11],
        other_gpu_pids=_split_ints(row[12]),
        cpu_load_per_core=tuple(_json_decode(row[13])),
        cpu_load_mean=row[14],
        cpu_freq_mhz=row[15],
        cpu_temp_c=row[16],
        other_busy_procs=row[17],
        other_busy_pids=_split_ints(row[18]),
    )


class TelemetryStore(StoreConnection):
    """The Store's telemetry methods: the telemetry and trial_telemetry tables."""

    def add_telemetry(self, session_id: int, samples: Sequence[TelemetrySample]) -> None:
        """Append telemetry samples to a session, all in one transaction.

        Call it from the thread that opened this Store: the telemetry sampler's thread opens its own
        (``TelemetrySampler.to_store``) rather than sharing the session's.
        """
        if not samples:
            return
        rows = [
            (
                session_id,
                s.t,
                s.gpu_temp_c,
                s.gpu_power_w,
                s.gpu_power_limit_w,
                s.gpu_sm_clock_mhz,
                s.gpu_mem_clock_mhz,
                s.gpu_util_pct,
                s.gpu_mem_util_pct,
                s.gpu_mem_used_mib,
                ",".join(s.throttle_reasons),
                s.other_gpu_procs,
                ",".join(map(str, s.other_gpu_pids)),
                _dumps(list(s.cpu_load_per_core)),
                s.cpu_load_mean,
                s.cpu_freq_mhz,
                s.cpu_temp_c,
                s.other_busy_procs,
                ",".join(map(str, s.other_busy_pids)),
            )
            for s in samples
        ]
        with self._write() as conn:
            self._require_session(session_id)
            conn.executemany(
                f"INSERT INTO telemetry ({_TELEMETRY_COLUMNS}) VALUES ({', '.join('?' * 19)})", rows
            )

    @_reader
    def telemetry(
        self, session_id: int, since_t: float = 0.0, until_t: float | None = None
    ) -> list[TelemetrySample]:
        """The session's telemetry samples with ``since_t < t`` (and ``t <= until_t``), oldest first.

        To follow a running session, pass the ``t`` of the last sample already seen.
        """
        with self._read() as conn:
            self._require_session(session_id)
            sql = f"SELECT {_TELEMETRY_COLUMNS} FROM telemetry WHERE session_id = ? AND t > ?"
            params: list[Any] = [session_id, since_t]
            if until_t is not None:
                sql += " AND t <= ?"
                params.append(until_t)
            rows = conn.execute(sql + " ORDER BY t", params).fetchall()
        return [_telemetry_sample(r) for r in rows]

    def stamp_trial(self, trial_id: int, summary: dict[str, Any]) -> None:
        """Record what the hardware did while a trial ran (``telemetry.summarize``); replaces an
        earlier stamp of the same trial."""

        def stat(field: str, key: str) -> Any:
            value = summary.get(field)
            return value.get(key) if isinstance(value, dict) else None

        procs = [summary.get("other_gpu_procs_max"), summary.get("other_busy_procs_max")]
        known = [p for p in procs if p is not None]
        text = _dumps(summary)
        with self._write() as conn:
            row = conn.execute("SELECT session_id FROM trials WHERE id = ?", (trial_id,)).fetchone()
            if row is None:
                raise StoreError(f"trial {trial_id} does not exist in {self.path}")
            conn.execute(
                """INSERT OR REPLACE INTO trial_telemetry (trial_id, session_id, n, throttled, gpu_temp_max,
                    gpu_power_max, gpu_sm_clock_min, cpu_load_mean, other_procs_max, summary)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    trial_id,
                    row[0],
                    int(summary.get("n", 0)),
                    int(bool(summary.get("throttled"))),
                    stat("gpu_temp_c", "max"),
                    stat("gpu_power_w", "max"),
                    stat("gpu_sm_clock_mhz", "min"),
                    stat("cpu_load_mean", "mean"),
                    sum(known) if known else None,
                    text,
                ),
            )

    @_reader
    def trial_telemetry(self, session_id: int) -> dict[int, dict[str, Any]]:
        """Each stamped trial's summary (as given to :meth:`stamp_trial`), by trial id."""
        with self._read() as conn:
            self._require_session(session_id)
            rows = conn.execute(
                "SELECT trial_id, summary FROM trial_telemetry WHERE session_id = ? ORDER BY trial_id",
                (session_id,),
            ).fetchall()
        return {trial_id: _json_decode(text) for trial_id, text in rows}

"""Fresh sessions on TVM RPC servers for a validation of a session measured through a tracker.

The remote counterpart of :mod:`tunelab.core.trust.remeasure.pool`. Each run is a session the
tracker hands out under the session's key; TVM's ``rpc_server`` serves every session in a process
forked for it, so a run is a fresh process on a server, as a local run is a fresh worker process
here. In it every schedule's library (built here for the session's target as a ``.tar`` of objects,
which the server links, as MetaSchedule's builder ships candidates: cross-compiled targets need no
toolchain here) is uploaded and loaded, run once on the workload's inputs, warmed up, checked
against the NumPy reference and timed with ``time_evaluator`` using the session's measurement
options, then timed again with its buffers placed each other way (on a CPU, as a local worker places
them: :mod:`tunelab.core.measure.remote_placement`); the starting schedule rotates from run to run,
as locally. Every measurement names the
server ("HOST:PORT") that took it.

No telemetry: this machine's readings say nothing of a server, so no window is recorded, and whether
a server was busy or throttled is unknown (:data:`NO_TELEMETRY`); only the runs' own scatter tells a
settled confirmation from an unsettled one. Nor does a server run the reference BLAS kernel a local
worker times (it has no NumPy to call), so a remote report has no machine drift.

A server lost mid-run (it left the tracker) costs no run: the run is measured again, from its first
schedule, on the next server the tracker hands out (:data:`RELAUNCHES` times at most), and
:attr:`ServerRuns.lost` names it. A schedule that fails on a server still registered failed by
itself, and its error names the server.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.core.measure.placement import DEFAULT_LAYOUT
from tunelab.core.measure.remote import (
    RemoteError,
    TrackerAddress,
    TrackerSummary,
    require_servers,
    rpc_error_line,
    server_session,
    servers_lost,
)
from tunelab.core.measure.remote_placement import PlacementError, RemotePlacer
from tunelab.core.records import MeasureOptions
from tunelab.core.trust.remeasure.pool import CancelFn, ProgressFn, as_measurement, check_cancelled
from tunelab.core.trust.remeasure.report import Measurement
from tunelab.core.trust.remeasure.worker import checked_warm_calls, job_timer, timed_result

RELAUNCHES = 3  # how often a run whose server was lost is measured again on another server
NO_TELEMETRY = (
    "not available: the runs were measured on RPC servers, and this machine's readings say nothing of "
    "them, so whether a server was busy or throttled is unknown"
)


class _ServerLost(Exception):
    """The server of a run left the tracker while the run was measured."""


@dataclass(frozen=True)
class ServerRuns:
    """What the servers measured: one list per run with a measurement per schedule (index order)."""

    tracker: str
    key: str
    measurements: list[list[Measurement]]
    lost: tuple[str, ...]  # servers lost mid-run, whose runs were measured again elsewhere

    @property
    def servers(self) -> tuple[str, ...]:
        """The servers that measured the runs, as "HOST:PORT"."""
        return tuple(sorted({m.device for run in self.measurements for m in run if m.device}))

    @property
    def where(self) -> str:
        """Where the runs were measured, for a report's ``hostname``."""
        return f"RPC servers {', '.join(self.servers) or '(none)'} (tracker {self.tracker}, key {self.key})"

    def sentence(self) -> str:
        """The report's words on where it was measured and what it cannot know."""
        runs = len(self.measurements)
        text = (
            f"measured in {runs} fresh session(s) on the servers of tracker {self.tracker} (key {self.key}): "
            f"{', '.join(self.servers) or 'none'}; busy or throttle evidence is not available there"
        )
        if self.lost:
            text += f"; server(s) {', '.join(self.lost)} lost mid-run, their runs measured again on another"
        return text


def run_on_servers(
    job: dict[str, Any],
    n_items: int,
    runs: int,
    options: MeasureOptions,
    on_progress: ProgressFn | None,
    *,
    is_cancelled: CancelFn | None = None,
) -> ServerRuns:
    """``runs`` fresh sessions on the servers under ``options.rpc_key``, each measuring every schedule of
    ``job`` (:func:`tunelab.core.trust.remeasure.job.prepare_job`'s, with ``.tar`` libraries) once, in a
    rotated order, one session at a time. A tracker that does not answer, or a key with no server (also
    once every server left mid-confirmation), raises :class:`RemoteError`, one sentence. Raises
    :class:`~tunelab.core.trust.remeasure.pool.ValidationCancelled` once ``is_cancelled()`` is true."""
    tracker = TrackerAddress.parse(options.rpc_tracker)
    key = options.rpc_key
    inputs = [np.load(p) for p in job["inputs"]]
    expected = np.load(job["expected"])
    # the server ends a session after this long; a free server is waited for as long
    timeout = 60.0 + options.timeout_s * n_items
    out: list[list[Measurement]] = []
    lost: list[str] = []
    for r in range(runs):
        check_cancelled(is_cancelled)
        order = [(r + j) % n_items for j in range(n_items)]
        results, address = _run_somewhere(
            tracker, key, job, order, inputs, expected, timeout, lost, is_cancelled
        )
        out.append([as_measurement(results[i], r, order.index(i), None) for i in range(n_items)])
        if on_progress is not None:
            on_progress(r + 1, runs, f"run {r + 1}/{runs} (server {address})")
    return ServerRuns(str(tracker), key, out, tuple(lost))


def _run_somewhere(
    tracker: TrackerAddress,
    key: str,
    job: dict[str, Any],
    order: list[int],
    inputs: list[np.ndarray],
    expected: np.ndarray,
    timeout: float,
    lost: list[str],
    is_cancelled: CancelFn | None,
) -> tuple[dict[int, dict[str, Any]], str]:
    """One run on a server the tracker hands out, measured again on another while servers are lost
    (noted in ``lost``); returns (index -> result, the server that measured it)."""
    for _ in range(RELAUNCHES + 1):
        summary = _summary_with_servers(tracker, key, lost)
        serving = {s.address for s in summary.servers_for(key)}
        try:
            session, address = server_session(tracker, key, timeout, wait_s=timeout)
        except RemoteError:
            gone = servers_lost(tracker, serving, None)
            if not gone:
                raise
            lost.extend(a for a in gone if a not in lost)
            continue
        try:
            return _measure_in(session, address, tracker, job, order, inputs, expected, is_cancelled), address
        except _ServerLost:
            if address not in lost:
                lost.append(address)
        finally:
            del session  # the connection closes with it, and the server's process for it exits
    why = f"no server under key {key!r} kept running it: lost {', '.join(lost)}"
    return {i: {"ok": False, "error": why} for i in order}, "none"


def _summary_with_servers(tracker: TrackerAddress, key: str, lost: list[str]) -> TrackerSummary:
    """The tracker's summary while it holds a server under ``key``; once none is left, one RemoteError
    that names those lost during the confirmation."""
    try:
        return require_servers(tracker, key)
    except RemoteError as exc:
        if not lost:
            raise
        raise RemoteError(
            f"every server under key {key!r} left the tracker at {tracker} mid-confirmation "
            f"(lost {', '.join(lost)}); nothing was stored"
        ) from exc


def _measure_in(
    session: Any,
    address: str,
    tracker: TrackerAddress,
    job: dict[str, Any],
    order: list[int],
    inputs: list[np.ndarray],
    expected: np.ndarray,
    is_cancelled: CancelFn | None,
) -> dict[int, dict[str, Any]]:
    """Every schedule of ``order`` measured in one server session; raises :class:`_ServerLost` when a
    failure is the server leaving the tracker."""
    device = session.device(job["device"], 0)
    try:
        placer = RemotePlacer(session, device)
    except PlacementError as exc:  # a server that left while linking the helper costs no run
        if servers_lost(tracker, {address}, address):
            raise _ServerLost(address) from None
        return {i: {"ok": False, "error": f"on {address}: {exc}", "device": address} for i in order}
    results: dict[int, dict[str, Any]] = {}
    for i in order:
        check_cancelled(is_cancelled)
        try:
            result = _measure_one(session, placer, job, i, inputs, expected)
        except Exception as exc:  # noqa: BLE001 - a kernel that breaks its session is a result, unless the server left
            if servers_lost(tracker, {address}, address):
                raise _ServerLost(address) from None
            result = {"ok": False, "error": f"run error: {rpc_error_line(exc)}"}
        if result.get("error"):
            result["error"] = f"on {address}: {result['error']}"
        results[i] = {**result, "device": address}
    return results


def _measure_one(
    session: Any,
    placer: RemotePlacer,
    job: dict[str, Any],
    index: int,
    inputs: list[np.ndarray],
    expected: np.ndarray,
) -> dict[str, Any]:
    """One schedule in a server session: upload, load (the server links the objects), the cold call,
    warm-up, the correctness check, ``time_evaluator``'s samples, and the same again for each other
    buffer layout of the job (as a local worker measures it)."""
    device = placer.device
    item = job["items"][index]
    lib_path = Path(item["lib"])
    if not lib_path.exists():  # it did not build: the build error is the schedule's result
        return {"ok": False, "error": "not built"}
    t = time.perf_counter()
    remote_name = f"schedule{index}{lib_path.suffix}"
    session.upload(str(lib_path), remote_name)
    lib = session.load_module(remote_name)
    entry = getattr(lib, "entry_name", None) or "main"
    func = lib[entry]
    load_ms = (time.perf_counter() - t) * 1e3
    arrays = [*inputs, *(np.zeros(shape, dtype=dtype) for shape, dtype in item["outputs"])]
    layouts = job.get("layouts") or [DEFAULT_LAYOUT]
    args = placer.placed(arrays, layouts[0])
    cold_ms, wrong = checked_warm_calls(func, device, args, expected, job)
    if wrong is not None:
        return {"ok": False, "error": wrong, "load_ms": load_ms, "cold_ms": cold_ms}
    timer = job_timer(lib, device, job, entry)
    t0 = time.time()
    samples_s = timer(*args)
    t1 = time.time()
    layout_ms = {layouts[0]: float(statistics.median(samples_s)) * 1e3}
    for layout in layouts[1:]:  # the same kernel with its buffers placed otherwise: placement sensitivity
        other = placer.placed(arrays, layout)
        func(*other)
        device.sync()
        layout_ms[layout] = float(statistics.median(timer(*other))) * 1e3
    return timed_result(samples_s, layout_ms, load_ms, cold_ms, t0, t1)

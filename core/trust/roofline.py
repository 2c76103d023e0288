"""The roofline of this machine, and where each session's best kernel sits under it.

Two micro-benchmarks, measured once per (machine, target kind) and kept in the store
(``machine_profile``), together under :data:`BUDGET_S` seconds:

* peak FLOP/s per dtype (float32 and float64): the larger of two independent probes, the best of many
  large ``np.matmul`` calls (BLAS threads = cores, several interleaved passes; the BLAS and its kernel
  are reported, threadpoolctl) and a TVM kernel of independent FMA chains kept in registers
  (:func:`fma_peak_gflops`; the BLAS alone where TVM cannot build it, said in the detail);
* memory bandwidth: the best of a multi-threaded copy (``b = a``, 2 streams) and add (``c = a + b``,
  3 streams) over arrays far larger than the caches, in GB/s (10^9 bytes).

On a GPU target the same two probes run through PyTorch or CuPy where installed (``torch.matmul``,
``Tensor.copy_``).

A workload's arithmetic intensity is ``flops / bytes_moved`` (every input read once, the output
written once: the least traffic any schedule needs), and its roofline bound is
``min(peak, intensity * bandwidth)``. :func:`roofline_for` sets a session's best GFLOP/s against it;
the peak it uses is never below a vendor GFLOP/s stored for this machine (a rate the machine reached).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.records import MachineProfile, SessionRecord
from tunelab.core.trust.roofline_probes import (
    BUDGET_S,
    FMA_CALL_S,
    FMA_CHAINS,
    PEAK_N,
    PEAK_PASSES,
    STREAM_BYTES,
    BandwidthProbe,
    FmaProbe,
    PeakProbe,
    cpu_bandwidth_gbs,
    cpu_peak_gflops,
    fma_peak_gflops,
)
from tunelab.core.trust.roofline_profile import (
    DTYPES,
    PROFILE_VERSION,
    machine_profile,
    measure_machine_profile,
)
from tunelab.core.workloads.dtypes import split_dtype

if TYPE_CHECKING:
    from tunelab.core.store import Store

__all__ = [
    "DTYPES",
    "BUDGET_S",
    "PEAK_N",
    "PEAK_PASSES",
    "FMA_CHAINS",
    "FMA_CALL_S",
    "STREAM_BYTES",
    "PROFILE_VERSION",
    "PeakProbe",
    "BandwidthProbe",
    "FmaProbe",
    "RooflineReport",
    "cpu_peak_gflops",
    "fma_peak_gflops",
    "cpu_bandwidth_gbs",
    "measure_machine_profile",
    "machine_profile",
    "compute_dtype",
    "roofline_for",
]


@dataclass(frozen=True)
class RooflineReport:
    """Where a session's best kernel (of one shape, ``task``) sits under this machine's roofline.

    The machine's figures (``peak_gflops`` ... ``measured_at``) are None where it could not be profiled
    (a GPU without PyTorch/CuPy); ``achieved_gflops`` and ``fraction`` are None while the session has
    no result; ``note`` says why, or that a figure is suspect.
    """

    session_id: int
    task: int
    workload: str
    shape: dict[str, int]
    dtype: str
    target_kind: str
    flops: float
    bytes_moved: float
    intensity: float | None  # FLOP/byte: flops / bytes_moved
    peak_gflops: float | None  # of peak_dtype
    bandwidth_gbs: float | None
    ridge_intensity: float | None  # where the roof turns: peak / bandwidth
    bound_gflops: float | None  # min(peak, intensity * bandwidth)
    bound_by: str | None  # "compute" | "memory"
    achieved_gflops: float | None  # the session's best on this shape
    fraction: float | None  # achieved / bound
    peak_dtype: str | None  # the dtype whose peak stands: the session's, else float32
    kernel: str | None  # the BLAS or library the peak was measured with
    note: str | None
    cached: bool | None  # the machine profile came from the store
    measured_at: float | None  # when the machine profile was measured
    # The best schedule itself under the roofline cost model (tunelab.core.search.roofline_model): its
    # FLOPs, vector and parallel use and memory traffic read off its IR, against the same peak and
    # bandwidth. What bounds it, what it could reach, and which of its choices the model says limit it.
    schedule_bound_by: str | None = None  # "compute" | "memory"
    schedule_bound_ms: float | None = None  # the model's time for this schedule
    schedule_fraction: float | None = None  # schedule_bound_ms / the measured best
    schedule_limits: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["shape"] = dict(self.shape)
        data["schedule_limits"] = list(self.schedule_limits)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RooflineReport:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["shape"] = dict(values["shape"])
        values["schedule_limits"] = tuple(values.get("schedule_limits") or ())
        return cls(**values)

    def schedule_sentence(self) -> str | None:
        """'its schedule: compute-bound; the model puts it at 62 % of what it could reach; limited by ...'"""
        if self.schedule_bound_by is None:
            return None
        text = f"its schedule: {self.schedule_bound_by}-bound"
        if self.schedule_fraction is not None:
            text += f", at {self.schedule_fraction:.0%} of the time the roofline model gives it"
        if self.schedule_limits:
            text += "; limited by " + ", ".join(self.schedule_limits)
        return text


def compute_dtype(dtype: str, target_kind: str) -> str:
    """The arithmetic's dtype, whose peak a roofline uses: a mixed dtype (float16:float32) runs float16
    on a GPU's tensor cores and float32 on a CPU (which widens the inputs)."""
    inputs_dtype, acc_dtype = split_dtype(dtype)
    return inputs_dtype if target_kind == "cuda" else acc_dtype


def roofline_for(
    store: Store, record: SessionRecord, *, remeasure: bool = False, task: int = 0
) -> RooflineReport:
    """Where the session's best kernel (of shape ``task``; 0 is the primary one) sits under this
    machine's roofline (measured and stored the first time, see :func:`machine_profile`)."""
    from tunelab.core.trust.baselines import task_figures
    from tunelab.core.workloads.catalog import get_workload

    wl = get_workload(record.workload, record.custom_source)
    shape, _, best_ms = task_figures(store, record, task)
    flops = float(wl.flops(shape))
    moved = float(wl.bytes_moved(shape, record.dtype))
    intensity = flops / moved if moved else None
    achieved = flops / (best_ms * 1e-3) / 1e9 if best_ms else None
    report = _unmeasured(record, task, shape, flops, moved, intensity, achieved)
    arithmetic = compute_dtype(record.dtype, record.target_kind)
    profile = machine_profile(
        store,
        record.target_kind,
        dtypes=(arithmetic,),
        remeasure=remeasure,
        hostname=record.hostname,  # the machine the session ran on: its roof, not this one's
    )
    if profile is None and record.hostname is not None and record.hostname != store.hostname:
        return replace(
            report, note=f"the {record.target_kind} roofline of {record.hostname} was never measured"
        )
    if profile is None:
        return replace(
            report,
            note=f"no way to profile a {record.target_kind} machine here (needs PyTorch or CuPy and a GPU)",
        )
    peak, peak_dtype, note = _peak(store, record, shape, profile, arithmetic)
    bandwidth = profile.bandwidth_gbs
    bound = bound_by = ridge = fraction = None
    if peak and bandwidth and intensity:
        memory_bound = intensity * bandwidth
        bound = min(peak, memory_bound)
        bound_by = "memory" if memory_bound < peak else "compute"
        ridge = peak / bandwidth
        if achieved:
            fraction = achieved / bound
            if fraction > 1.0:
                above = (
                    "the session beats the measured roofline: the probes probably ran on a busy machine "
                    "(or the kernel runs from cache); measure again with remeasure=True "
                    "(tunelab roofline --remeasure)"
                )
                note = f"{note}; {above}" if note else above
    report = replace(
        report,
        peak_gflops=peak,
        bandwidth_gbs=bandwidth,
        ridge_intensity=ridge,
        bound_gflops=bound,
        bound_by=bound_by,
        fraction=fraction,
        peak_dtype=peak_dtype,
        kernel=profile.kernel,
        note=note,
        cached=profile.cached,
        measured_at=profile.measured_at,
    )
    return _with_schedule(store, record, task, report, best_ms)


def _with_schedule(
    store: Store, record: SessionRecord, task: int, report: RooflineReport, best_ms: float | None
) -> RooflineReport:
    """The report with the best schedule under the roofline cost model, at the report's peak and
    bandwidth; unchanged where the session has no best or its space cannot be rebuilt here."""
    if not best_ms or not report.peak_gflops or not report.bandwidth_gbs:
        return report
    from tunelab.core.errors import StoreError
    from tunelab.core.search.roofline_model import RooflineMachine, estimate
    from tunelab.core.search.space.factory import space_for_task

    try:
        tasks, trials = store.tasks(record.id), store.trials(record.id)
    except StoreError:  # a record that is not (or no longer) in this store: no schedule to read
        return report
    task_id = tasks[task].id if tasks else None
    best = min(
        (t for t in trials if t.ok and t.latency_ms and t.task_id in (task_id, None)),
        key=lambda t: t.latency_ms or 0.0,
        default=None,
    )
    if best is None:
        return report
    try:
        space = space_for_task(record, tasks[task]) if tasks else None
        if space is None:
            from tunelab.core.search.space.factory import space_for_session

            space = space_for_session(record)
        row = space.features([best.config])[0]
    except Exception:  # noqa: BLE001 - a space this machine cannot rebuild: the machine figures stand alone
        return report
    machine = replace(
        RooflineMachine.for_space(space), peak_gflops=report.peak_gflops, bandwidth_gbs=report.bandwidth_gbs
    )
    if len(row) < 328 or not np.any(row[:328]):  # a schedule that no longer builds has no IR features
        return report
    est = estimate(row, machine)
    return replace(
        report,
        schedule_bound_by=est.bound,
        schedule_bound_ms=est.predicted_ms,
        schedule_fraction=est.predicted_ms / best.latency_ms if best.latency_ms else None,
        schedule_limits=est.limits,
    )


def _unmeasured(
    record: SessionRecord,
    task: int,
    shape: dict[str, int],
    flops: float,
    moved: float,
    intensity: float | None,
    achieved: float | None,
) -> RooflineReport:
    """The report before the machine's figures: the workload's own, the machine's None."""
    return RooflineReport(
        session_id=record.id,
        task=task,
        workload=record.workload,
        shape=shape,
        dtype=record.dtype,
        target_kind=record.target_kind,
        flops=flops,
        bytes_moved=moved,
        intensity=intensity,
        peak_gflops=None,
        bandwidth_gbs=None,
        ridge_intensity=None,
        bound_gflops=None,
        bound_by=None,
        achieved_gflops=achieved,
        fraction=None,
        peak_dtype=None,
        kernel=None,
        note=None,
        cached=None,
        measured_at=None,
    )


def _peak(
    store: Store, record: SessionRecord, shape: dict[str, int], profile: MachineProfile, arithmetic: str
) -> tuple[float | None, str, str | None]:
    """The peak a roofline uses (the probe's, raised to a vendor rate stored for this machine), its
    dtype, and a note where either differs from what was asked."""
    peaks = profile.peak_gflops
    peak_dtype = arithmetic if arithmetic in peaks else "float32"
    note = None
    if peak_dtype != arithmetic:
        note = (
            f"no {arithmetic} probe on this target (NumPy has no {arithmetic} BLAS): "
            "the float32 peak stands in"
        )
    peak = peaks.get(peak_dtype)
    # The floor: a vendor rate stored for this machine (the session's own baseline, or the fastest in
    # this dtype) is a rate the machine reached, so the peak is at least that.
    floors = []
    own = store.baseline(record.workload, shape, record.dtype, record.target_kind)
    if own is not None and own.gflops:
        floors.append((own.gflops, "the vendor library's measured"))
    fastest = store.fastest_baseline(peak_dtype, record.target_kind)
    if fastest is not None and fastest.gflops:
        floors.append((fastest.gflops, f"the vendor library's measured (on {fastest.workload})"))
    if peak and floors:
        floor, whose = max(floors)
        if floor > peak:
            raised = f"peak raised from the probe's {peak:.0f} to {whose} {floor:.0f} GFLOP/s"
            note = f"{note}; {raised}" if note else raised
            peak = floor
    return peak, peak_dtype, note

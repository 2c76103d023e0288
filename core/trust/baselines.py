"""Vendor baselines: the same operator through a vendor library, so a session can say "x of vendor".

On the CPU the vendor is NumPy's BLAS (OpenBLAS, MKL, Accelerate: whatever NumPy links; threadpoolctl
names it and its kernel):

* ``gemm``, ``batch_matmul``: ``np.matmul(A, B, out=C)``;
* ``dense_bias``: ``np.matmul(A, B.T, out=C)``, then the bias add and the ReLU in place;
* ``conv2d_nchw`` / ``conv2d_nhwc``: im2col (pad, gather the receptive fields into a matrix) plus one
  ``np.matmul`` with the weight matrix. NumPy has no convolution, so this im2col + GEMM path stands in
  for a vendor convolution on the CPU; the gather is timed with it, as a library would pay for it;
* ``conv2d_nchwc``: the input unblocked to NCHW, the NCHW path, the result blocked again (all timed);
* ``depthwise_conv2d``: im2col plus a batched ``np.matmul`` per channel (tiny matrices: a weak baseline).

Where PyTorch is installed (the optional ``baselines`` extra) the convolutions go through its CPU
``conv2d`` instead (oneDNN where PyTorch was built with it): a real vendor convolution, which the im2col +
GEMM path only stands in for. ``conv2d_nchwc`` (float32) runs on mkldnn tensors in oneDNN's own blocked
layouts, as a network kept in mkldnn tensors runs, so neither side pays a reorder. Without
PyTorch the NumPy path stays; :func:`cpu_vendor_kernel` says which.

On a GPU (target kind ``cuda``) the vendor is cuBLAS / cuDNN through PyTorch (``torch.matmul``,
``torch.nn.functional.conv2d``) or, for the matrix products only, CuPy; each path runs only where the
package is installed and sees a GPU. A custom workload has no vendor counterpart.

Timing follows ``time_evaluator`` (:func:`tunelab.core.measure.timing.time_callable`): ``warmup``
untimed calls, then ``repeat`` samples, each the mean of ``number`` calls, ``number`` grown until one
sample takes ``min_repeat_ms``; the figure is the median.
The output is checked against the workload's NumPy reference. Baselines are stored per (machine,
workload, shape, dtype, target kind) and measured once: :func:`baseline_for`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.core.measure.timing import SPIN_SETTLE_S, time_callable
from tunelab.core.records import MeasureOptions, SessionRecord, VendorBaseline
from tunelab.core.stats import median
from tunelab.core.telemetry.neighbours import BUSY_SHARE, NeighbourWatch
from tunelab.core.trust.baselines_cpu import blas_description, blas_info, cpu_vendor_call, cpu_vendor_kernel
from tunelab.core.trust.baselines_gpu import gpu_vendor_call

if TYPE_CHECKING:
    from tunelab.core.store import Store

__all__ = [
    "CPU_WORKLOADS",
    "PLAUSIBLE_X",
    "VendorComparison",
    "blas_info",
    "blas_description",
    "cpu_vendor_kernel",
    "measure_baseline",
    "task_figures",
    "baseline_for",
]

CPU_WORKLOADS = (
    "gemm",
    "batch_matmul",
    "dense_bias",
    "conv2d_nchw",
    "conv2d_nhwc",
    "conv2d_nchwc",
    "depthwise_conv2d",
)


# A tuned kernel against a vendor library on the same problem: beyond these, a figure was disturbed
# (986.91x vendor was NumPy timed among busy neighbours), not a kernel 1000 times faster.
PLAUSIBLE_X = (0.02, 50.0)


@dataclass(frozen=True)
class VendorComparison:
    """A session's best kernel (of one shape, ``task``) against the vendor library on the same problem."""

    baseline: VendorBaseline
    cached: bool  # the baseline came from the store
    session_id: int
    task: int
    session_best_ms: float | None
    session_gflops: float | None
    # vendor time / session best time: 0.5 means the tuned kernel runs at half the vendor's speed,
    # 1.2 that it is 20 % faster; None while the session has no result.
    x_of_vendor: float | None

    def to_json(self) -> dict[str, Any]:
        """The baseline's JSON with the session's side after it."""
        return {
            **self.baseline.to_json(),
            "cached": self.cached,
            "session_id": self.session_id,
            "task": self.task,
            "session_best_ms": self.session_best_ms,
            "session_gflops": self.session_gflops,
            "x_of_vendor": self.x_of_vendor,
            "doubt": self.doubt,
        }

    @property
    def doubt(self) -> str | None:
        """Why this ratio should not be believed as it stands (None: nothing against it): the vendor
        was timed while other processes used the cores, or the ratio is outside what a tuned kernel
        and a vendor library plausibly differ by (:data:`PLAUSIBLE_X`). Either way: measure it again."""
        reasons = []
        neighbours = self.baseline.measure.get("neighbours") or {}
        if (neighbours.get("share") or 0.0) >= BUSY_SHARE:
            pids = ", ".join(f"pid {p}" for p in (neighbours.get("busy_pids") or [])[:3])
            reasons.append(
                f"the vendor was timed while other processes took {neighbours['share']:.0%} of the cores"
                + (f" ({pids})" if pids else "")
            )
        x = self.x_of_vendor
        if x is not None and not PLAUSIBLE_X[0] <= x <= PLAUSIBLE_X[1]:
            reasons.append(
                f"{x:.2f}x is outside {PLAUSIBLE_X[0]:g}-{PLAUSIBLE_X[1]:g}x, what a tuned kernel and a "
                f"vendor library plausibly differ by: one of the two figures was likely disturbed"
            )
        return "; ".join(reasons) or None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VendorComparison:
        return cls(
            baseline=VendorBaseline.from_json(data),
            cached=data["cached"],
            session_id=data["session_id"],
            task=data["task"],
            session_best_ms=data["session_best_ms"],
            session_gflops=data["session_gflops"],
            x_of_vendor=data["x_of_vendor"],
        )


# ------------------------------------------------------------------------------------------ measuring


def measure_baseline(
    workload: str,
    shape: dict[str, int],
    dtype: str,
    target_kind: str = "llvm",
    options: MeasureOptions | None = None,
    *,
    seed: int = 0,
) -> VendorBaseline | None:
    """Measure one problem through the vendor library for ``target_kind``; None where there is none."""
    from tunelab.core.workloads.catalog import get_workload

    wl = get_workload(workload)
    shape = wl.parse_shape(shape)
    dtype = wl.check_dtype(dtype)
    opts = options or MeasureOptions()
    inputs = wl.make_inputs(shape, dtype, seed)
    out_shape = tuple(wl.output_shape(shape))
    made = (gpu_vendor_call if target_kind == "cuda" else cpu_vendor_call)(
        wl, shape, dtype, inputs, out_shape
    )
    if made is None:
        return None
    run, fetch, sync, method, library, info, judged_dtype = made
    rtol, atol = wl.tolerance(judged_dtype, shape)
    run()
    if sync is not None:
        sync()
    got = np.asarray(fetch())
    expected = wl.reference(inputs, shape, dtype)
    err = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))) if got.size else 0.0
    correct = got.shape == expected.shape and bool(np.allclose(got, expected, rtol=rtol, atol=atol))
    time.sleep(
        SPIN_SETTLE_S
    )  # the reference's BLAS threads spin on: timed among them, the vendor ran 2.2x slower
    with NeighbourWatch() as watch:  # a vendor figure timed among busy neighbours is not this machine's
        samples = time_callable(
            run,
            number=opts.number,
            repeat=opts.repeat,
            min_repeat_ms=opts.min_repeat_ms,
            warmup=opts.warmup,
            sync=sync,
        )
    median_ms = median(samples) or 0.0  # time_callable takes at least one sample: never None
    flops = float(wl.flops(shape))
    return VendorBaseline(
        workload=wl.name,
        shape=shape,
        dtype=dtype,
        target_kind=target_kind,
        library=library,
        method=method,
        median_ms=median_ms,
        samples_ms=tuple(samples),
        gflops=flops / (median_ms * 1e-3) / 1e9 if median_ms > 0 else None,
        correct=correct,
        max_abs_err=err,
        measure={
            "number": opts.number,
            "repeat": opts.repeat,
            "min_repeat_ms": opts.min_repeat_ms,
            "warmup": opts.warmup,
            "settle_s": SPIN_SETTLE_S,
            "neighbours": watch.load.to_json() if watch.load is not None else None,
        },
        measured_at=time.time(),
        blas=info or None,
    )


def task_figures(
    store: Store, record: SessionRecord, task: int = 0
) -> tuple[dict[str, int], float, float | None]:
    """(shape, FLOP per call, best ms) of one shape (task) of a session; task 0 is its primary shape.

    A session that tunes several shapes keeps a best per shape; the session's own ``best_ms`` is the
    fastest over all of them, which is not comparable with one shape's baseline.
    """
    from tunelab.core.errors import StoreError, TunelabError

    try:
        tasks = store.tasks(record.id)
    except StoreError:  # a record that is not (or no longer) in this store: its own figures
        tasks = []
    if not tasks:
        return dict(record.shape), float(record.flops), record.best_ms
    if not 0 <= task < len(tasks):
        raise TunelabError(
            f"session {record.id} tunes {len(tasks)} shape(s); the task must be 0..{len(tasks) - 1}"
        )
    t = tasks[task]
    return dict(t.shape), float(t.flops), t.best_ms


def baseline_for(
    store: Store, record: SessionRecord, *, remeasure: bool = False, task: int = 0
) -> VendorComparison | None:
    """The session's problem through the vendor library, measured once per machine and kept in the store,
    against the session's best; ``task`` picks one shape of a session that tunes several (0: the
    primary one).

    None where no vendor path exists (a custom workload, or no PyTorch/CuPy for a GPU target).
    """
    if record.custom_source is not None or record.workload not in CPU_WORKLOADS:
        return None
    shape, flops, best_ms = task_figures(store, record, task)
    if record.hostname is not None and record.hostname != store.hostname:
        # A store tuned on another machine: its vendor figure is that machine's; timing the vendor here
        # would compare other hardware.
        kept = store.baseline(record.workload, shape, record.dtype, record.target_kind, record.hostname)
        if kept is None:
            raise TunelabError(
                f"session {record.id} ran on {record.hostname}, where its vendor was never measured "
                "(timing it on this machine would compare other hardware)"
            )
        return _comparison(record, task, kept, True, flops, best_ms)
    entry = None if remeasure else store.baseline(record.workload, shape, record.dtype, record.target_kind)
    if entry is not None and "settle_s" not in entry.measure:
        entry = None  # timed right after the NumPy reference, among its spinning threads: measured again
    cached = entry is not None
    if entry is None:
        options = MeasureOptions.from_json(
            {k: v for k, v in record.measure.items() if k in ("number", "repeat", "min_repeat_ms", "warmup")}
        )
        entry = measure_baseline(
            record.workload, shape, record.dtype, record.target_kind, options, seed=record.seed
        )
        if entry is None:
            return None
        store.put_baseline(entry)
    return _comparison(record, task, entry, cached, flops, best_ms)


def _comparison(
    record: SessionRecord, task: int, entry: VendorBaseline, cached: bool, flops: float, best_ms: float | None
) -> VendorComparison:
    return VendorComparison(
        baseline=entry,
        cached=cached,
        session_id=record.id,
        task=task,
        session_best_ms=best_ms,
        session_gflops=flops / (best_ms * 1e-3) / 1e9 if best_ms else None,
        x_of_vendor=entry.median_ms / best_ms if best_ms else None,
    )

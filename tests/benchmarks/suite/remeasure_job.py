"""The final figures: every kernel of a case and the vendor, re-measured side by side in one fresh process.

``python remeasure_job.py JOB.json OUT.json``. Absolute times on a shared virtual machine move 10-15 %
between processes and minutes, so figures from different runs cannot be compared; here each round times
every kernel once (in a rotating order, so none always goes first), with the same timing options, and a
kernel's figure is the median over all its samples. Each library's output is checked against the
workload's NumPy reference first.

Run it with ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` unset, so that NumPy's OpenBLAS picks its own
kernel for this CPU (a machine's default that forces an older kernel would make the vendor look slow).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def main(argv: list[str]) -> int:
    import tvm

    from tunelab.core.measure.timing import SPIN_SETTLE_S, kernel_timer, time_callable
    from tunelab.core.trust.baselines import blas_info, cpu_vendor_kernel
    from tunelab.core.workloads.catalog import get_workload

    job = json.loads(Path(argv[1]).read_text())
    workload = get_workload(job["workload"])
    shape = workload.parse_shape(job["shape"] or None, complete=True)
    m = job["measure"]
    inputs = workload.make_inputs(shape, "float32", 0)
    expected = workload.reference(inputs, shape)
    rtol, atol = workload.tolerance("float32", shape)
    flops = float(workload.flops(shape))
    dev = tvm.cpu(0)
    out_shape = tuple(workload.output_shape(shape))

    timers: dict[str, Any] = {}  # label -> a function returning samples in ms
    checks: dict[str, dict[str, Any]] = {}
    for kernel in job["kernels"]:
        lib = tvm.runtime.load_module(kernel["library"])
        args = [tvm.runtime.tensor(x, dev) for x in inputs] + [
            tvm.runtime.tensor(np.zeros(out_shape, "float32"), dev)
        ]
        lib["main"](*args)
        got = args[-1].numpy()
        checks[kernel["label"]] = {
            "correct": bool(np.allclose(got, expected, rtol=rtol, atol=atol)),
            "max_abs_err": float(np.max(np.abs(got.astype(np.float64) - expected))),
        }
        timer = kernel_timer(
            lib, dev, number=m["number"], repeat=m["repeat"], min_repeat_ms=m["min_repeat_ms"], entry="main"
        )
        timers[kernel["label"]] = lambda timer=timer, args=args: [1e3 * s for s in timer(*args)]

    out = np.zeros(out_shape, "float32")
    vendor = cpu_vendor_kernel(workload.name, shape, inputs, out)
    library = method = None
    if vendor is not None:
        run, method, library = vendor
        run()
        checks["vendor"] = {
            "correct": bool(np.allclose(out, expected, rtol=rtol, atol=atol)),
            "max_abs_err": float(np.max(np.abs(out.astype(np.float64) - expected))),
        }
        timers["vendor"] = lambda run=run: time_callable(
            run, number=m["number"], repeat=m["repeat"], min_repeat_ms=m["min_repeat_ms"], warmup=1
        )

    labels = list(timers)
    samples: dict[str, list[float]] = {label: [] for label in labels}
    round_medians: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(job["rounds"]):
        shift = r % len(labels)
        for label in labels[shift:] + labels[:shift]:
            # The threads of whatever ran last go idle first: OpenBLAS's (and OpenMP's) workers busy-wait
            # for a while after each call, and a TVM kernel timed while one of them spins runs on one core
            # of two (measured: the GEMM 512x512x2048 64-trial kernel at 7.6-8.3 ms right after NumPy's matmul,
            # 3.8-4.0 ms after a 0.3 s pause). TVM's pool spins far less (TVM_THREAD_POOL_SPIN_COUNT).
            time.sleep(SPIN_SETTLE_S)
            got_ms = timers[label]()
            samples[label].extend(got_ms)
            round_medians[label].append(statistics.median(got_ms))
    figures = {}
    for label in labels:
        median_ms = statistics.median(samples[label])
        figures[label] = {
            "median_ms": median_ms,
            "gflops": flops / (median_ms * 1e-3) / 1e9,
            "round_medians_ms": round_medians[label],
            "n_samples": len(samples[label]),
            **checks[label],
        }
    result = {
        "figures": figures,
        "vendor": {"library": library, "method": method, "blas": blas_info()},
        "flops": flops,
        "rounds": job["rounds"],
        "measure": m,
    }
    Path(argv[2]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

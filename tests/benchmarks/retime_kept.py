"""Re-time the kept winners of several suite runs side by side, on one shared set of buffers.

    python tests/benchmarks/retime_kept.py --rounds 12 e1=/tmp/tunelab-suite-quick-XXXX e2=...

Each ``TAG=FOLDER`` is a scratch folder a ``run_suite.py --keep`` run left behind; every
``<case>_<tool>_s<seed>/*_<budget>.so`` in it is loaded into this one process, checked against NumPy,
and timed round by round in a rotating order, all on the same input and output buffers (so no kernel
gains or loses by where its buffers happened to land). A suite run's own re-measurement compares only
the kernels of that run; this compares runs made minutes apart, which is how the seeds of an
experiment split over several commands are put side by side. Prints each kernel's median and
interquartile range, then per seed each tool's figure (the median over the folders that ran it).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from suite.cases import TIERS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from tunelab.core.measure.threads import use_every_core

    use_every_core()  # before TVM's pool starts
    import tvm

    from tunelab.core.measure.timing import kernel_timer
    from tunelab.core.workloads.catalog import get_workload

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="+", metavar="TAG=FOLDER")
    parser.add_argument("--case", default="gemm_skinny", help="the suite case the folders ran")
    parser.add_argument("--budget", type=int, default=64, help="the checkpoint whose kernels are timed")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args(argv)
    case = next(c for cases in TIERS.values() for c in cases if c.name == args.case)
    workload = get_workload(case.workload)
    shape = workload.parse_shape(case.shape, complete=True)
    inputs = workload.make_inputs(shape, "float32", 0)
    expected = workload.reference(inputs, shape)
    rtol, atol = workload.tolerance("float32", shape)
    dev = tvm.cpu(0)
    out = np.zeros(tuple(workload.output_shape(shape)), "float32")
    buffers = [tvm.runtime.tensor(x, dev) for x in [*inputs, out]]
    timers = {}
    for spec in args.folders:
        tag, _, folder = spec.partition("=")
        for lib_path in sorted(Path(folder).glob(f"{args.case}_*/*_{args.budget}.so")):
            label = f"{tag}:{lib_path.parent.name.removeprefix(args.case + '_')}"
            lib = tvm.runtime.load_module(str(lib_path))
            lib["main"](*buffers)
            if not np.allclose(buffers[-1].numpy(), expected, rtol=rtol, atol=atol):
                raise SystemExit(f"{label}: wrong result")
            timers[label] = kernel_timer(lib, dev, number=3, repeat=3, min_repeat_ms=20, entry="main")
    labels = sorted(timers)
    if not labels:
        raise SystemExit("no kept kernels in those folders")
    samples: dict[str, list[float]] = {k: [] for k in labels}
    for r in range(args.rounds):
        shift = (r * 7) % len(labels)
        for label in labels[shift:] + labels[:shift]:
            samples[label].append(statistics.median(1e3 * s for s in timers[label](*buffers)))
    per_tool: dict[tuple[str, int], list[float]] = {}
    for label in labels:
        q1, med, q3 = np.percentile(samples[label], [25, 50, 75])
        print(f"{label:32s} median {med:.3f} ms  IQR {q1:.3f}-{q3:.3f}")
        tool, seed = re.fullmatch(r"[^:]*:(.*)_s(\d+)", label).groups()  # type: ignore[union-attr]
        per_tool.setdefault((tool, int(seed)), []).append(float(med))
    tools = sorted({t for t, _ in per_tool})
    seeds = sorted({s for _, s in per_tool})
    print("seed " + " ".join(f"{t:>18s}" for t in tools))
    figure = {key: statistics.median(v) for key, v in per_tool.items()}
    for seed in seeds:
        print(f"{seed:4d} " + " ".join(f"{figure.get((t, seed), float('nan')):18.3f}" for t in tools))
    for tool in tools:
        got = [figure[(tool, s)] for s in seeds if (tool, s) in figure]
        print(f"{tool}: median over {len(got)} seeds {statistics.median(got):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""This machine's profile (peak FLOP/s and bandwidth per target kind): measured once, kept in the store."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tunelab.core.records import MachineProfile
from tunelab.core.trust.roofline_probes import BUDGET_S, _cpu_probes, _gpu_probes

if TYPE_CHECKING:
    from tunelab.core.store import Store


DTYPES = ("float32", "float64")


# 2: the peak is max(BLAS probe over 4 passes, FMA probe); profiles of version 1 are measured again.
PROFILE_VERSION = 2


def measure_machine_profile(
    target_kind: str = "llvm", dtypes: Sequence[str] = DTYPES, budget_s: float = BUDGET_S
) -> MachineProfile | None:
    """Run the probes now; None for a GPU target without PyTorch or CuPy (or without a GPU).

    On the CPU, float16 is not probed (NumPy has no float16 BLAS): its roofline uses the float32 peak.
    The detail holds the BLAS (``blas``, ``kernel``) and the probes (``peak_probe``: dtype ->
    :class:`PeakProbe`, ``fma_probe``: dtype -> :class:`FmaProbe`, ``peak_source``: dtype -> "blas" or
    "fma", the probe whose figure stands, ``bandwidth_probe``: :class:`BandwidthProbe`, as JSON;
    ``fma_error`` where the FMA kernel could not be built or run, the BLAS alone then); on a GPU the
    library. The TVM import (once per process) is not counted in the budget.
    """
    import socket

    started = time.perf_counter()
    if target_kind == "cuda":
        probed = _gpu_probes(list(dtypes), budget_s * 0.9)
        if probed is None:
            return None
        peaks, bandwidth, detail = probed
    else:
        started, peaks, bandwidth, detail = _cpu_probes([d for d in dtypes if d != "float16"], budget_s)
    return MachineProfile(
        target_kind=target_kind,
        hostname=socket.gethostname(),
        peak_gflops=peaks,
        bandwidth_gbs=bandwidth,
        detail=detail,
        version=PROFILE_VERSION,
        elapsed_s=round(time.perf_counter() - started, 3),
        measured_at=time.time(),
    )


def machine_profile(
    store: Store,
    target_kind: str = "llvm",
    *,
    dtypes: Sequence[str] = DTYPES,
    remeasure: bool = False,
    hostname: str | None = None,
) -> MachineProfile | None:
    """This machine's profile for ``target_kind`` from the store (``cached``), measured (and stored) the
    first time, or again for ``remeasure`` or a dtype not yet probed. None where it cannot be measured.
    ``hostname``: another machine's (a store tuned there, opened here): only what the store holds, since
    measuring here would describe other hardware."""
    if hostname is not None and hostname != store.hostname:
        stored = store.machine_profile(target_kind, hostname)
        return replace(stored, cached=True) if stored is not None else None
    profile = None if remeasure else store.machine_profile(target_kind)
    wanted = [d for d in dtypes if not (target_kind != "cuda" and d == "float16")]
    if profile is not None and all(d in profile.peak_gflops for d in wanted):
        return replace(profile, cached=True)
    fresh = measure_machine_profile(target_kind, sorted(set(wanted) | set(DTYPES)))
    if fresh is None:
        return None
    store.put_machine_profile(fresh)
    return replace(fresh, cached=False)

"""A session's yardsticks: its best kernel against the vendor library and against this machine's roofline.

`session_figures` is what the app's session header asks for (the command line has `tunelab baseline`
and `tunelab roofline` for each alone); each figure is measured the first time and kept in the store.
Importing this module does not import TVM or the measuring code: that happens when a figure is measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunelab.core.errors import TunelabError
from tunelab.core.records import SessionRecord

if TYPE_CHECKING:
    from tunelab.core.records import MachineProfile
    from tunelab.core.store import Store
    from tunelab.core.trust.baselines import VendorComparison
    from tunelab.core.trust.roofline import RooflineReport


@dataclass(frozen=True)
class Figures:
    """Both yardsticks of one session (``session_id`` None: asking for them failed as a whole); a figure
    that could not be had is None, with its reason in ``errors``."""

    session_id: int | None
    vendor: VendorComparison | None = None
    roofline: RooflineReport | None = None
    errors: tuple[str, ...] = ()


def session_figures(store: Store, session_id: int, *, remeasure_vendor: bool = False) -> Figures:
    """The vendor comparison and the roofline of a session, measured and stored the first time
    (``remeasure_vendor``: the vendor timed again, replacing the stored figure)."""
    from tunelab.core.trust.baselines import baseline_for
    from tunelab.core.trust.roofline import roofline_for

    record = store.session(session_id)
    vendor = roofline = None
    errors = []
    try:
        vendor = baseline_for(store, record, remeasure=remeasure_vendor)
    except TunelabError as exc:
        errors.append(f"vendor: {exc}")
    try:
        roofline = roofline_for(store, record)
    except TunelabError as exc:
        errors.append(f"roofline: {exc}")
    return Figures(session_id, vendor, roofline, tuple(errors))


def figures_stored(store: Store, record: SessionRecord) -> bool:
    """Both figures are in the store already, so asking for them measures nothing."""
    from tunelab.core.trust.baselines import CPU_WORKLOADS
    from tunelab.core.trust.roofline import compute_dtype

    try:
        vendor = (
            record.custom_source is not None
            or record.workload not in CPU_WORKLOADS
            or store.baseline(
                record.workload, record.shape, record.dtype, record.target_kind, record.hostname
            )
            is not None
        )
        profile = store.machine_profile(record.target_kind, record.hostname)  # the session's machine
    except TunelabError:
        return False
    dtype = compute_dtype(record.dtype, record.target_kind)  # the peak roofline_for reads
    return vendor and profile is not None and dtype in profile.peak_gflops


def vendor_figure(store: Store, session_id: int, *, remeasure: bool = False) -> VendorComparison | None:
    """`tunelab baseline`: the session's best against the vendor library (None: no vendor for it here)."""
    from tunelab.core.trust.baselines import baseline_for

    return baseline_for(store, store.session(session_id), remeasure=remeasure)


def roofline_figure(store: Store, session_id: int, *, remeasure: bool = False) -> RooflineReport:
    """`tunelab roofline SESSION`: the session's best under this machine's roofline."""
    from tunelab.core.trust.roofline import roofline_for

    return roofline_for(store, store.session(session_id), remeasure=remeasure)


def machine_figure(store: Store, target_kind: str, *, remeasure: bool = False) -> MachineProfile | None:
    """`tunelab roofline`: this machine's peak FLOP/s and bandwidth for ``target_kind`` (llvm or cuda;
    None: it cannot be profiled here), measured once and stored."""
    from tunelab.core.trust.roofline import machine_profile

    return machine_profile(store, target_kind, remeasure=remeasure)

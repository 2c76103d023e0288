"""What there is to choose from: the catalog's workloads, the registered tuners, an RPC tracker's devices.

The command line lists them (`tunelab workloads`, `tuners`, `devices`); the New-session dialog offers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tunelab.core.records_json import JsonRecord
from tunelab.core.search.models import COST_MODEL_WORDS, cost_model_names
from tunelab.core.search.tuners.registry import (
    ON_TARGET,
    get_tuner_class,
    recommend_tuner,
    recommendation_words,
    tuner_description,
    tuner_names,
    tuner_space_kinds,
    tuner_unavailable,
)

if TYPE_CHECKING:
    from tunelab.core.measure.remote import TrackerSummary
    from tunelab.core.workloads.base import Workload

__all__ = [
    "ON_TARGET",
    "COST_MODEL_WORDS",
    "TunerEntry",
    "cost_model_names",
    "get_tuner_class",
    "list_workloads",
    "load_custom_workload",
    "recommend_tuner",
    "recommendation_words",
    "tracker_devices",
    "tuner_description",
    "tuner_entries",
    "tuner_names",
    "tuner_space_kinds",
]

# Importing this module imports no TVM (`tunelab tuners` answers at once): the catalog and the tracker
# client import it when asked.


@dataclass(frozen=True)
class TunerEntry(JsonRecord):
    """A registered tuner: its one line, the space kinds it drives, and why it does not load here (None:
    it loads)."""

    name: str
    description: str
    spaces: tuple[str, ...]
    unavailable: str | None  # None: it loads here


def tuner_entries() -> list[TunerEntry]:
    """Every registered tuner, in the registry's order."""
    return [
        TunerEntry(name, tuner_description(name), tuple(tuner_space_kinds(name)), tuner_unavailable(name))
        for name in tuner_names()
    ]


def list_workloads() -> list[Workload]:
    """The catalog's built-in operators in registry order, with their parameters and dtypes."""
    from tunelab.core.workloads.catalog import list_workloads as catalog_workloads

    return catalog_workloads()


def load_custom_workload(source: str) -> Workload:
    """The workload a custom workload file's text defines, loaded and checked in a child process first.
    Imports TVM: call it off the GUI thread."""
    from tunelab.core.workloads.catalog import load_custom_workload as load

    return load(source)


def tracker_devices(rpc: str | None) -> TrackerSummary:
    """What the tracker at ``rpc`` (HOST:PORT; None: TVM_TRACKER_HOST/PORT) holds: keys, servers, queues."""
    from tunelab.core.measure.remote import RemoteError, TrackerAddress, tracker_summary

    tracker = TrackerAddress.parse(rpc) if rpc else TrackerAddress.from_env()
    if tracker is None:
        raise RemoteError("devices needs --rpc HOST:PORT (or TVM_TRACKER_HOST and TVM_TRACKER_PORT)")
    return tracker_summary(tracker)

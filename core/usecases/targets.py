"""Choosing where kernels run: what a target means on this machine, this CPU's features and LLVM names, the
self-check kernel, and a TVM RPC tracker's servers (the New-session dialog's target and remote options)."""

from __future__ import annotations

from tunelab.core.measure.remote import (
    RemoteError,
    TrackerAddress,
    TrackerSummary,
    remote_target,
    tracker_summary,
)
from tunelab.core.target.host_cpu import HostCPU, host_cpu, is_known_feature, llvm_cpu_names
from tunelab.core.target.info import REMOTE_TARGET, TargetInfo, describe_target_json, resolve_target
from tunelab.core.target.selfcheck import self_check

# Importing this module imports no TVM: each check imports it when it runs (in a worker thread or a child).
__all__ = [
    "REMOTE_TARGET",
    "HostCPU",
    "RemoteError",
    "TargetInfo",
    "TrackerAddress",
    "TrackerSummary",
    "describe_target_json",
    "host_cpu",
    "is_known_feature",
    "llvm_cpu_names",
    "remote_target",
    "resolve_target",
    "self_check",
    "tracker_summary",
]

"""The hardware monitor's sources: GPU readings through NVML, and the process tree whose CPU use a reading
counts as the session's own (not a neighbour's)."""

from __future__ import annotations

from tunelab.core.telemetry.cpu import ROOT_PID_ENV
from tunelab.core.telemetry.nvml import default_gpu_source
from tunelab.core.telemetry.readings import TelemetrySample

__all__ = ["ROOT_PID_ENV", "TelemetrySample", "default_gpu_source"]

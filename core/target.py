"""What `--target auto|llvm|cuda|<json>` means on this machine.

`auto` picks CUDA when a GPU is usable, else the CPU. A CPU target always carries `mcpu` from
LLVM's host detection and the real core count: without `mcpu` TVM emits generic x86-64 code,
about 3x slower (TVM_NOTES.md section 0).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from core.errors import TargetError

# Limits VerifyGPUCode checks; used when no GPU is present to read them from (compile-only).
_DEFAULT_CUDA = {
    "kind": "cuda",
    "arch": "sm_90",
    "max_num_threads": 1024,
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 49152,
    "thread_warp_size": 32,
    "registers_per_block": 65536,
}


@dataclass(frozen=True)
class TargetInfo:
    kind: str  # "llvm" | "cuda"
    json: dict[str, Any]  # the TVM target as a JSON dict
    device_type: str  # "cpu" | "cuda" (MetaSchedule RunnerInput.device_type)
    description: str  # for people: "CPU znver4, 2 cores" / "CUDA NVIDIA H200 (sm_90)"
    can_run: bool  # False: kernels can be built (and compiled with nvcc) but not run here

    def tvm_target(self) -> Any:
        import tvm

        return tvm.target.Target(self.json)


def cpu_core_count() -> int:
    """Cores this process may use (physical cores where known: SMT siblings share FPUs)."""
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except Exception:  # psutil missing or unsupported platform
        physical = None
    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:
        allowed = os.cpu_count() or 1
    return max(1, min(allowed, physical or allowed))


def cuda_available() -> bool:
    import tvm

    try:
        return bool(tvm.runtime.enabled("cuda") and tvm.cuda(0).exist)
    except Exception:  # a broken driver counts as no GPU
        return False


def llvm_target() -> TargetInfo:
    from tvm.target import codegen

    cpu = codegen.llvm_get_system_cpu()
    cores = cpu_core_count()
    target = {"kind": "llvm", "num-cores": cores, "mcpu": cpu}
    return TargetInfo("llvm", target, "cpu", f"CPU {cpu}, {cores} cores", True)


def cuda_target(arch: str | None = None) -> TargetInfo:
    target = dict(_DEFAULT_CUDA)
    can_run = cuda_available()
    name = "no GPU here: compile only"
    if can_run:
        import tvm

        dev = tvm.cuda(0)
        major, minor = str(dev.compute_version).split(".")
        target["arch"] = f"sm_{major}{minor}"
        target["max_shared_memory_per_block"] = int(dev.max_shared_memory_per_block)
        target["max_threads_per_block"] = int(dev.max_threads_per_block)
        target["max_num_threads"] = int(dev.max_threads_per_block)
        target["thread_warp_size"] = int(dev.warp_size)
        name = str(dev.device_name)
    if arch:
        target["arch"] = arch
    return TargetInfo("cuda", target, "cuda", f"CUDA {name} ({target['arch']})", can_run)


def resolve_target(spec: str | dict | None) -> TargetInfo:
    """Turn a user's target choice into a TargetInfo; bad input -> TargetError."""
    if spec is None or spec == "auto":
        return cuda_target() if cuda_available() else llvm_target()
    if isinstance(spec, str):
        text = spec.strip()
        if text in ("llvm", "cpu"):
            return llvm_target()
        if text in ("cuda", "gpu"):
            return cuda_target()
        if not text.startswith("{"):
            raise TargetError(f"unknown target {spec!r}; use auto, llvm, cuda or a JSON target dict")
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TargetError(f"target is not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(spec, dict) or spec.get("kind") not in ("llvm", "cuda"):
        raise TargetError("a JSON target needs \"kind\": \"llvm\" or \"cuda\"")
    base = llvm_target() if spec["kind"] == "llvm" else cuda_target()
    merged = {**base.json, **spec}
    try:
        import tvm

        tvm.target.Target(merged)
    except Exception as exc:
        raise TargetError(f"TVM rejects target {json.dumps(spec)}: {str(exc).splitlines()[0]}") from None
    return TargetInfo(base.kind, merged, base.device_type, base.description, base.can_run)


def target_from_json(data: dict[str, Any]) -> TargetInfo:
    """Rebuild a TargetInfo from a stored target JSON (can_run re-checked on this machine)."""
    if data.get("kind") == "cuda":
        can_run = cuda_available()
        return TargetInfo("cuda", dict(data), "cuda", f"CUDA ({data.get('arch')})", can_run)
    return TargetInfo("llvm", dict(data), "cpu", f"CPU {data.get('mcpu', '?')}, {data.get('num-cores', '?')} cores", True)

"""What `--target auto|llvm|cuda|<json>` means on this machine.

`auto` picks CUDA when a GPU is usable, else the CPU. A CPU target always carries an `mcpu` and
the real core count: without `mcpu` TVM emits generic x86-64 code, about 3x slower. The `mcpu` is
one whose instruction sets this host can execute (tunelab.core.target.host_cpu), not merely the CPU's name: a VM
that masks AVX-512 on a `znver4` would otherwise run kernels that die of SIGILL. An `mcpu` a person
types is checked the same way, and a stored target this host cannot execute is marked so.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any

from tunelab.core.errors import TargetError, first_line, shown

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


# `--target remote` with `--rpc`: the CPU of a server under the key (tunelab.core.measure.remote.remote_target).
REMOTE_TARGET = "remote"
# What tunelab resolves an NVIDIA H200 (sm_90) to there, with the limits VerifyGPUCode checks: the CUDA
# schedules that GPU runs are built and checked against it on machines without one (tests, benchmarks,
# the GPU check's CPU path).
H200_TARGET: dict[str, Any] = {
    "kind": "cuda",
    "arch": "sm_90",
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
    description: str  # for people: "CPU znver2 · AVX2+FMA, 2 cores" / "CUDA NVIDIA H200 (sm_90)"
    can_run: bool  # False: kernels can be built (and compiled with nvcc) but not run here
    why_not: str = ""  # when can_run is False: why, in words
    note: str = ""  # how the target was chosen when it differs from the obvious (host name masked)

    def tvm_target(self) -> Any:
        import tvm

        return tvm.target.Target(self.json)


def cpu_core_count() -> int:
    """Cores this process may use (physical cores where known: SMT siblings share FPUs)."""
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001 - psutil missing or unsupported platform
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
    except Exception:  # noqa: BLE001 - a broken driver counts as no GPU
        return False


def llvm_target() -> TargetInfo:
    """The CPU target for this host: an `mcpu` (and `mattr`) it can execute, and its cores."""
    from tunelab.core.target.host_cpu import choose_cpu, host_cpu

    choice = choose_cpu(host_cpu())
    cores = cpu_core_count()
    target: dict[str, Any] = {"kind": "llvm", "num-cores": cores, "mcpu": choice.mcpu}
    if choice.mattr:
        target["mattr"] = list(choice.mattr)
    return TargetInfo(
        "llvm", target, "cpu", _cpu_description(choice.mcpu, choice.isa, cores), True, note=choice.note
    )


def _cpu_description(mcpu: str, isa: str, cores: Any) -> str:
    return f"CPU {mcpu} · {isa}, {cores} cores"


def _mattr(data: dict[str, Any]) -> tuple[str, ...]:
    mattr = data.get("mattr") or ()
    if isinstance(mattr, str):
        mattr = mattr.split(",")
    return tuple(str(m).strip() for m in mattr if str(m).strip())


def _llvm_runnable(data: dict[str, Any]) -> tuple[str, str]:
    """(why this host cannot run kernels for an llvm target, or ""; its ISA level)."""
    from tunelab.core.target.host_cpu import (
        host_cpu,
        is_known_feature,
        isa_level,
        llvm_features,
        missing_features,
    )

    host = host_cpu()
    triple = str(data.get("mtriple") or "")
    if triple and not triple.split("-")[0].replace("arm64", "aarch64").startswith(host.arch):
        return f"kernels for {triple} cannot run on this {host.arch} host", triple.split("-")[0]
    mcpu = str(data.get("mcpu") or "generic")
    mattr = _mattr(data)
    # LLVM only warns about an entry it does not know and builds without it: a misspelt "+avx2" would
    # tune plain kernels while the session says AVX2.
    unknown = [a for a in mattr if a[:1] in "+-" and not is_known_feature(a[1:], host.arch)]
    if unknown:
        return (
            f"LLVM does not know the mattr feature {', '.join(unknown)} for {host.arch} (it would build without it)",
            "?",
        )
    try:
        missing = missing_features(mcpu, mattr, host)
        isa = isa_level(llvm_features(mcpu, mattr, host.arch), host.arch)
    except Exception as exc:  # noqa: BLE001 - TVM rejected the mcpu or mattr
        return f"LLVM rejects mcpu {shown(mcpu)}: {first_line(exc)}", "?"
    if missing:
        needed = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        # either the mcpu or the mattr may be what implies the features: name both
        built_for = f"{mcpu} with mattr {','.join(mattr)}" if mattr else mcpu
        return f"kernels built for {built_for} need {needed}, which this CPU lacks (/proc/cpuinfo)", isa
    return "", isa


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
    why = "" if can_run else "no usable CUDA GPU on this machine"
    return TargetInfo("cuda", target, "cuda", f"CUDA {name} ({target['arch']})", can_run, why)


def resolve_target(spec: str | dict | None, *, elsewhere: bool = False) -> TargetInfo:
    """Turn a user's target choice into a TargetInfo; bad input -> TargetError.

    ``elsewhere``: the kernels run on another machine (an RPC server) or nowhere (``tunelab compile``),
    so an llvm target is built here for whatever it names: another ``mtriple`` (cross-compiled: LLVM
    emits the objects, the machine that runs them links them), an ``mcpu`` this host cannot execute.
    Its ``can_run`` then says whether kernels could also run here."""
    if spec is None or spec == "auto":
        return cuda_target() if cuda_available() else llvm_target()
    if isinstance(spec, str):
        text = spec.strip()
        if text in ("llvm", "cpu"):
            return llvm_target()
        if text in ("cuda", "gpu"):
            return cuda_target()
        if not text.startswith("{"):
            raise TargetError(f"unknown target {shown(spec)}; use auto, llvm, cuda or a JSON target dict")
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TargetError(f"target is not valid JSON: {exc.msg} at column {exc.colno}") from None
        except RecursionError:
            raise TargetError("target is not valid JSON: it is nested too deeply") from None
    if not isinstance(spec, dict) or spec.get("kind") not in ("llvm", "cuda"):
        raise TargetError('a JSON target needs "kind": "llvm" or "cuda"')
    if spec["kind"] == "llvm":
        base = llvm_target()
    else:  # a typed arch names the GPU the kernels are for: the description says that one, not this host's
        base = cuda_target(spec["arch"] if isinstance(spec.get("arch"), str) else None)
    merged = {**base.json, **spec}
    if base.kind == "llvm" and "mattr" in base.json and "mcpu" in spec and "mattr" not in spec:
        del merged["mattr"]  # the detected mattr belongs to the detected mcpu, not to the one typed
    if base.kind == "llvm" and _foreign_arch(spec):
        merged = dict(spec)  # this host's mcpu, mattr and cores say nothing about another architecture
    try:
        import tvm

        tvm.target.Target(merged)
    except Exception as exc:  # noqa: BLE001 - TVM's target parser raises TVMError, ValueError or TypeError alike
        typed = json.dumps(spec)
        typed = typed if len(typed) <= 120 else typed[:116] + " ..."
        raise TargetError(f"TVM rejects target {typed}: {first_line(exc)}") from None
    if base.kind == "cuda":
        return TargetInfo(base.kind, merged, base.device_type, base.description, base.can_run)
    from tunelab.core.target.host_cpu import host_cpu, is_valid_cpu

    mcpu = str(merged.get("mcpu") or "generic")
    if elsewhere:
        return _foreign_llvm(merged, mcpu)
    if mcpu != "generic" and not is_valid_cpu(mcpu, host_cpu().arch) and not merged.get("mtriple"):
        raise TargetError(
            f"LLVM knows no CPU {shown(mcpu)} for this {host_cpu().arch} host; "
            f"leave mcpu out to use the detected {base.json['mcpu']}"
        )
    why_not, isa = _llvm_runnable(merged)
    if why_not:
        raise TargetError(
            f"{why_not}; leave mcpu out to use the detected {base.json['mcpu']} "
            f"or give an mattr that turns those off"
        )
    return TargetInfo("llvm", merged, "cpu", _cpu_description(mcpu, isa, merged.get("num-cores", "?")), True)


def _foreign_arch(spec: dict[str, Any]) -> bool:
    """Whether an llvm target's mtriple names another architecture than this host's."""
    from tunelab.core.target.host_cpu import host_cpu

    triple = str(spec.get("mtriple") or "")
    return bool(triple) and not triple.split("-")[0].replace("arm64", "aarch64").startswith(host_cpu().arch)


def _foreign_llvm(merged: dict[str, Any], mcpu: str) -> TargetInfo:
    """An llvm target for another machine: checked against LLVM's knowledge of its triple, not this CPU."""
    from tunelab.core.target.host_cpu import host_cpu, is_valid_cpu, isa_level, llvm_features

    triple = str(merged.get("mtriple") or "")
    arch = triple.split("-")[0].replace("arm64", "aarch64") if triple else host_cpu().arch
    if mcpu != "generic" and not is_valid_cpu(mcpu, arch):
        raise TargetError(f"LLVM knows no CPU {shown(mcpu)} for {arch}")
    try:
        isa = isa_level(llvm_features(mcpu, _mattr(merged), arch), arch)
    except Exception:  # noqa: BLE001 - LLVM lists no features for this arch: name the arch
        isa = arch
    why_not, _ = _llvm_runnable(merged)
    cores = merged.get("num-cores")
    description = _cpu_description(mcpu, isa, cores) if cores else f"CPU {mcpu} · {isa}"
    return TargetInfo(
        "llvm",
        merged,
        "cpu",
        description + (f" for {triple}" if triple else ""),
        not why_not,
        why_not,
    )


@functools.lru_cache(maxsize=64)
def _describe(text: str) -> str:
    return target_from_json(json.loads(text)).description


def describe_target_json(data: dict[str, Any]) -> str:
    """A stored target in words, with its ISA level ("CPU znver2 · AVX2+FMA, 2 cores"); cached."""
    try:
        return _describe(json.dumps(data, sort_keys=True))
    except Exception:  # noqa: BLE001 - a target this TVM cannot even parse is still shown by name
        return f"{data.get('kind', '?')} {data.get('mcpu') or data.get('arch') or ''}".strip()


def target_from_json(data: dict[str, Any]) -> TargetInfo:
    """Rebuild a TargetInfo from a stored target JSON (can_run re-checked on this machine)."""
    if data.get("kind") == "cuda":
        can_run = cuda_available()
        why = "" if can_run else "no usable CUDA GPU on this machine"
        return TargetInfo("cuda", dict(data), "cuda", f"CUDA ({data.get('arch')})", can_run, why)
    why_not, isa = _llvm_runnable(data)
    description = _cpu_description(str(data.get("mcpu") or "generic"), isa, data.get("num-cores", "?"))
    return TargetInfo("llvm", dict(data), "cpu", description, not why_not, why_not)

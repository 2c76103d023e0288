"""What this machine's CPU can execute, and the LLVM `mcpu` / `mattr` that emits only that.

LLVM's host detection (`llvm_get_system_cpu`) names the CPU from its CPUID family and model. A
virtual machine may hide features that name implies: an AMD EPYC whose hypervisor masks AVX-512
is still `znver4` to LLVM, and kernels built for `znver4` die of SIGILL there. What the host can
execute is what the OS reports (`/proc/cpuinfo` flags on Linux); archspec, a maintained library,
names the microarchitecture from those flags. A target is chosen so that every instruction-set
feature LLVM implies for it is one the host has, and an `mcpu` a person types is checked the same
way (:func:`missing_features`).
"""

from __future__ import annotations

import functools
import os
import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

LLVM_NAME_ENV = "TUNELAB_LLVM_HOST_CPU"

# LLVM feature -> the Linux /proc/cpuinfo flag for it. Only instruction-set extensions a compiler
# may emit in a kernel are listed: a feature outside this table (tuning hints such as
# "fast-15bytenop", system instructions) never decides whether a kernel runs.
X86_FLAGS = {
    "sse": "sse",
    "sse2": "sse2",
    "sse3": "pni",
    "ssse3": "ssse3",
    "sse4.1": "sse4_1",
    "sse4.2": "sse4_2",
    "sse4a": "sse4a",
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "fma4": "fma4",
    "f16c": "f16c",
    "bmi": "bmi1",
    "bmi2": "bmi2",
    "lzcnt": "abm",
    "popcnt": "popcnt",
    "movbe": "movbe",
    "adx": "adx",
    "aes": "aes",
    "pclmul": "pclmulqdq",
    "sha": "sha_ni",
    "gfni": "gfni",
    "vaes": "vaes",
    "vpclmulqdq": "vpclmulqdq",
    "avxvnni": "avx_vnni",
    "avxifma": "avx_ifma",
    "avxvnniint8": "avx_vnni_int8",
    "avxneconvert": "avx_ne_convert",
    "avx512f": "avx512f",
    "avx512cd": "avx512cd",
    "avx512bw": "avx512bw",
    "avx512dq": "avx512dq",
    "avx512vl": "avx512vl",
    "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi",
    "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect",
    "amx-tile": "amx_tile",
    "amx-int8": "amx_int8",
    "amx-bf16": "amx_bf16",
    "amx-fp16": "amx_fp16",
}
AARCH64_FLAGS = {
    "neon": "asimd",
    "fp-armv8": "fp",
    "fullfp16": "asimdhp",
    "dotprod": "asimddp",
    "fp16fml": "asimdfhm",
    "rdm": "asimdrdm",
    "i8mm": "i8mm",
    "bf16": "bf16",
    "sve": "sve",
    "sve2": "sve2",
    "sme": "sme",
    "lse": "atomics",
    "rcpc": "lrcpc",
    "crc": "crc32",
    "aes": "aes",
    "sha2": "sha2",
    "sha3": "sha3",
    "jsconv": "jscvt",
    "complxnum": "fcma",
}
# archspec's -march extensions (aarch64) -> LLVM mattr features.
_AARCH64_EXTENSIONS = {
    "fp16": ["+fullfp16"],
    "dotprod": ["+dotprod"],
    "sve": ["+sve"],
    "sve2": ["+sve2"],
    "bf16": ["+bf16"],
    "i8mm": ["+i8mm"],
    "rcpc": ["+rcpc"],
    "crypto": ["+aes", "+sha2"],
    "fp16fml": ["+fp16fml"],
    "lse": ["+lse"],
}


@dataclass(frozen=True)
class HostCPU:
    """The CPU as the OS reports it."""

    arch: str  # "x86_64" | "aarch64" | another platform.machine()
    vendor: str  # "AuthenticAMD", "GenuineIntel", "ARM", ...
    model_name: str  # "AMD EPYC 9R14" (people's text, never parsed)
    flags: frozenset[str]  # /proc/cpuinfo "flags" (x86) or "Features" (ARM)
    llvm_name: str  # what LLVM's host detection calls it (from CPUID, not from the flags)

    @property
    def fingerprint(self) -> str:
        """Identifies what this host can execute (for caches keyed by machine)."""
        return f"{self.arch}|{self.llvm_name}|{','.join(sorted(self.flags))}"


@dataclass(frozen=True)
class CPUChoice:
    """The CPU part of an LLVM target for a host, and why."""

    mcpu: str
    mattr: tuple[str, ...]  # extra LLVM features ("+dotprod"); empty on x86
    isa: str  # for people: "AVX2+FMA", "AVX-512", "NEON+dotprod"
    note: str  # "" when LLVM's own host name fits; else why another was chosen


def _parse_cpuinfo(text: str) -> tuple[str, str, frozenset[str]]:
    vendor = model = ""
    flags: frozenset[str] = frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features") and not flags:
            flags = frozenset(value.split())
        elif key == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key == "model name" and not model:
            model = value.strip()
        elif key == "cpu implementer" and not vendor:
            vendor = "ARM"
    return vendor, model, flags


@functools.lru_cache(maxsize=1)
def host_cpu() -> HostCPU:
    """This machine's CPU (read once per process)."""
    from tvm.target import codegen

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            vendor, model, flags = _parse_cpuinfo(fh.read())
    except OSError:
        vendor, model, flags = "", "", frozenset()
    if not flags:  # not Linux: archspec knows the other systems' ways (sysctl on macOS)
        try:
            import archspec.cpu

            flags = frozenset(archspec.cpu.host().features)
        except Exception:  # noqa: BLE001 - an unknown platform: no feature is known, so none is assumed
            flags = frozenset()
    arch = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    # LLVM_NAME_ENV replays what LLVM's host detection said on another machine (a test hook: a VM
    # that reports znver4 while masking AVX-512), with this machine's real feature flags.
    llvm_name = os.environ.get(LLVM_NAME_ENV) or str(codegen.llvm_get_system_cpu())
    return HostCPU(arch, vendor, model or platform.processor(), flags, llvm_name)


def _flag_table(arch: str) -> dict[str, str]:
    return X86_FLAGS if arch == "x86_64" else AARCH64_FLAGS if arch == "aarch64" else {}


def _triple(arch: str) -> str:
    from tvm.target import codegen

    native = str(codegen.llvm_get_system_triple())
    if native.startswith(arch):
        return native
    return f"{arch}-unknown-linux-gnu"


@functools.lru_cache(maxsize=256)
def llvm_features(mcpu: str, mattr: tuple[str, ...] = (), arch: str = "x86_64") -> frozenset[str]:
    """The features LLVM enables for `mcpu` plus `mattr` (what it may emit)."""
    import tvm
    from tvm.target import codegen

    target: dict = {"kind": "llvm", "mcpu": mcpu, "mtriple": _triple(arch)}
    if mattr:
        target["mattr"] = list(mattr)
    tvm_target = tvm.target.Target(target)
    with tvm_target:
        return frozenset(str(f) for f in codegen.llvm_get_cpu_features(tvm_target))


def is_valid_cpu(mcpu: str, arch: str) -> bool:
    from tvm.target import codegen

    return bool(codegen.llvm_is_valid_cpu(mcpu, _triple(arch)))


@functools.lru_cache(maxsize=4)
def llvm_cpu_names(arch: str) -> tuple[str, ...]:
    """Every CPU name LLVM knows for `arch` (the values an `mcpu` may take), sorted."""
    import tvm
    from tvm.target import codegen

    with tvm.target.Target({"kind": "llvm", "mtriple": _triple(arch)}) as target:
        return tuple(sorted(str(name) for name in codegen.llvm_get_cpu_archlist(target)))


def is_known_feature(feature: str, arch: str) -> bool:
    """Whether LLVM knows the instruction-set feature `feature` ("avx2", no sign) for `arch`.

    LLVM ignores an unknown `mattr` entry with only a warning on stderr, so a misspelt "+avx2" would
    silently build plain kernels; a feature it knows is one that turning on actually turns on."""
    return feature in llvm_features("generic", (f"+{feature}",), arch)


def missing_features(mcpu: str, mattr: Iterable[str], host: HostCPU) -> list[str]:
    """The instruction-set features LLVM implies for `mcpu`/`mattr` that `host` cannot execute."""
    table = _flag_table(host.arch)
    if not table or not host.flags:  # nothing known about this platform: nothing can be checked
        return []
    implied = llvm_features(mcpu, tuple(mattr), host.arch)
    return sorted(f for f in implied if f in table and table[f] not in host.flags)


def isa_level(features: Iterable[str], arch: str) -> str:
    """The headline instruction set of a feature set, for people."""
    have = set(features)
    if arch == "x86_64":
        if "avx512f" in have:
            extra = [
                n
                for f, n in (("avx512vnni", "VNNI"), ("avx512bf16", "BF16"), ("amx-tile", "AMX"))
                if f in have
            ]
            return "AVX-512" + "".join(f"+{n}" for n in extra)
        if "avx2" in have:
            return "AVX2+FMA" if "fma" in have else "AVX2"
        if "avx" in have:
            return "AVX"
        return "SSE4.2" if "sse4.2" in have else "SSE2"
    if arch == "aarch64":
        base = (
            "SVE2" if "sve2" in have else "SVE" if "sve" in have else "NEON" if "neon" in have else "scalar"
        )
        extra = [f for f in ("dotprod", "i8mm", "bf16") if f in have]
        return base + "".join(f"+{f}" for f in extra)
    return arch


def _archspec_candidates(host: HostCPU) -> list:
    """archspec's microarchitectures this host can run, most specific first (its own order)."""
    try:
        from archspec.cpu import TARGETS
        from archspec.cpu.detect import COMPATIBILITY_CHECKS, partial_uarch
    except ImportError:
        return []
    check = COMPATIBILITY_CHECKS.get(host.arch)
    if check is None:
        return []
    info = partial_uarch(vendor=host.vendor, features=set(host.flags))
    fits = [t for t in TARGETS.values() if t.family.name == host.arch and check(info, t)]
    return sorted(fits, key=lambda t: (len(t.ancestors), len(t.features)), reverse=True)


def _llvm_spelling(uarch, arch: str) -> tuple[str, tuple[str, ...]] | None:
    """archspec's clang flags for a microarchitecture as (mcpu, mattr), or None."""
    try:
        flags = uarch.optimization_flags("clang", "17.0")
    except Exception:  # noqa: BLE001 - archspec knows no clang spelling for it
        return None
    values = dict(re.findall(r"-m(cpu|arch|tune)=(\S+)", flags))
    if "cpu" in values:
        return values["cpu"], ()
    if arch == "x86_64" and "arch" in values:
        return values["arch"], ()
    march = values.get("arch", "")
    if arch == "aarch64" and march.startswith("armv"):
        base, *extensions = march.split("+")
        mattr = [f"+v{base[4:].replace('-a', '')}a"]
        for ext in extensions:
            mattr += _AARCH64_EXTENSIONS.get(ext, [])
        return "generic", tuple(mattr)
    return None


def choose_cpu(host: HostCPU) -> CPUChoice:
    """The most specific LLVM CPU whose implied instruction sets this host can all execute."""
    tried: list[str] = []
    candidates: list[tuple[str, tuple[str, ...]]] = [(host.llvm_name, ())]
    for uarch in _archspec_candidates(host):
        spelled = _llvm_spelling(uarch, host.arch)
        if spelled and spelled not in candidates:
            candidates.append(spelled)
    candidates.append(("generic", ()))
    first_missing: list[str] = []
    for mcpu, mattr in candidates:
        if mcpu != "generic" and not is_valid_cpu(mcpu, host.arch):
            continue
        missing = missing_features(mcpu, mattr, host)
        if not missing:
            isa = isa_level(llvm_features(mcpu, mattr, host.arch), host.arch)
            note = ""
            if tried:
                chosen = mcpu + (f" ({','.join(mattr)})" if mattr else "")
                more = f" and {len(first_missing) - 4} more" if len(first_missing) > 4 else ""
                note = (
                    f"LLVM names this CPU {host.llvm_name}, but this host lacks its "
                    f"{', '.join(first_missing[:4])}{more}; using {chosen}"
                )
            return CPUChoice(mcpu, mattr, isa, note)
        if not tried:
            first_missing = missing
        tried.append(mcpu)
    return CPUChoice("generic", (), isa_level((), host.arch), "no known CPU model fits this host")


def vector_bits(target_json: dict[str, Any]) -> int:
    """The widest vector register an LLVM target's code may use: 512 (AVX-512), 256 (AVX), else 128."""
    mattr = target_json.get("mattr") or ()
    mattr = tuple(mattr.split(",") if isinstance(mattr, str) else mattr)
    features = llvm_features(str(target_json.get("mcpu") or "generic"), mattr, host_cpu().arch)
    if "avx512f" in features:
        return 512
    return 256 if "avx" in features else 128

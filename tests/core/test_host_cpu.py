"""Targets that run where they are built: host features, the chosen mcpu, the self-check.

The hosts below are recorded /proc/cpuinfo feature sets, so every machine tests the paths a
different CPU takes; the self-check tests run real kernels in real child processes.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cli_runs import run_tunelab, tune_gemm
from host_cpus import an_mcpu_this_host_lacks
from specs import FAST_MEASURE_ARGS

from tunelab.core.errors import TargetError
from tunelab.core.target.host_cpu import (
    HostCPU,
    choose_cpu,
    host_cpu,
    isa_level,
    llvm_features,
    missing_features,
)
from tunelab.core.target.info import llvm_target, resolve_target, target_from_json

# An AMD EPYC VM whose hypervisor masks AVX-512 (and VAES): LLVM names it znver4 from CPUID.
MASKED_ZEN4 = HostCPU(
    "x86_64",
    "AuthenticAMD",
    "AMD EPYC 9R14",
    frozenset(
        "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
        "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl cpuid pni pclmulqdq ssse3 fma "
        "cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy abm "
        "sse4a misalignsse 3dnowprefetch topoext fsgsbase bmi1 avx2 smep bmi2 rdseed adx smap clflushopt clwb "
        "sha_ni xsaveopt xsavec xgetbv1 clzero arat".split()
    ),
    "znver4",
)
# A Sapphire Rapids host that really has AVX-512, AMX and the rest.
SAPPHIRE_RAPIDS = HostCPU(
    "x86_64",
    "GenuineIntel",
    "Intel Xeon Platinum 8488C",
    MASKED_ZEN4.flags
    | frozenset(
        "avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg "
        "avx512_vpopcntdq avx512_bf16 avx512_fp16 avx_vnni amx_tile amx_int8 amx_bf16 gfni vaes vpclmulqdq pku "
        "waitpkg movdiri movdir64b serialize tsxldtrk pconfig cldemote enqcmd uintr wbnoinvd rdpid".split()
    ),
    "sapphirerapids",
)
# An Arm server whose name (neoverse-v1) implies SVE, bf16 and i8mm that this VM does not expose.
MASKED_NEOVERSE = HostCPU(
    "aarch64",
    "ARM",
    "",
    frozenset(
        "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp "
        "ssbs".split()
    ),
    "neoverse-v1",
)


def _runs_on(choice, host) -> bool:
    return not missing_features(choice.mcpu, choice.mattr, host)


def test_masked_avx512_host_gets_a_cpu_it_can_execute():
    choice = choose_cpu(MASKED_ZEN4)
    assert choice.mcpu != "znver4" and _runs_on(choice, MASKED_ZEN4)
    implied = llvm_features(choice.mcpu, choice.mattr)
    assert "avx2" in implied and "fma" in implied  # not a fall back to generic x86-64
    assert not any(f.startswith("avx512") for f in implied)
    assert choice.isa == "AVX2+FMA"
    assert "znver4" in choice.note and "avx512" in choice.note


def test_host_with_avx512_keeps_llvm_name():
    choice = choose_cpu(SAPPHIRE_RAPIDS)
    assert choice.mcpu == "sapphirerapids" and choice.note == "" and choice.isa.startswith("AVX-512")


def test_arm_host_without_sve_gets_neon_and_what_it_has():
    assert "sve" in missing_features("neoverse-v1", (), MASKED_NEOVERSE)
    choice = choose_cpu(MASKED_NEOVERSE)
    assert _runs_on(choice, MASKED_NEOVERSE)
    implied = llvm_features(choice.mcpu, choice.mattr, "aarch64")
    assert "neon" in implied and "dotprod" in implied and "sve" not in implied
    assert choice.isa == "NEON+dotprod"


def test_isa_levels():
    assert isa_level({"avx", "avx2", "fma"}, "x86_64") == "AVX2+FMA"
    assert isa_level({"sse2"}, "x86_64") == "SSE2"
    assert isa_level({"neon", "sve", "i8mm"}, "aarch64") == "SVE+i8mm"


def test_this_hosts_default_target_is_executable_and_described():
    target = llvm_target()
    host = host_cpu()
    assert not missing_features(target.json["mcpu"], tuple(target.json.get("mattr", ())), host)
    isa = isa_level(
        llvm_features(target.json["mcpu"], tuple(target.json.get("mattr", ())), host.arch), host.arch
    )
    assert target.description == f"CPU {target.json['mcpu']} · {isa}, {target.json['num-cores']} cores"
    assert resolve_target("auto").json == target.json or resolve_target("auto").kind == "cuda"


def test_typed_mcpu_the_host_lacks_is_refused_in_one_line():
    mcpu = an_mcpu_this_host_lacks()
    with pytest.raises(TargetError) as info:
        resolve_target(json.dumps({"kind": "llvm", "mcpu": mcpu}))
    message = str(info.value)
    assert "\n" not in message and mcpu in message and "lacks" in message
    assert missing_features(mcpu, (), host_cpu())[0] in message
    with pytest.raises(TargetError, match="knows no CPU"):
        resolve_target('{"kind": "llvm", "mcpu": "pentium-9000"}')


def test_llvm_names_its_cpus_and_knows_its_features():
    from tunelab.core.target.host_cpu import is_known_feature, llvm_cpu_names

    x86 = llvm_cpu_names("x86_64")
    assert {"haswell", "znver4", "sapphirerapids", "generic"} <= set(x86) and list(x86) == sorted(x86)
    assert llvm_target().json["mcpu"] in llvm_cpu_names(host_cpu().arch)
    assert "neoverse-v1" in llvm_cpu_names("aarch64") and "neoverse-v1" not in x86
    assert is_known_feature("avx2", "x86_64") and is_known_feature("avx512f", "x86_64")
    assert not is_known_feature("avx3000", "x86_64") and not is_known_feature("sve", "x86_64")
    assert is_known_feature("sve", "aarch64")


def test_a_typed_mattr_the_host_lacks_is_named_in_the_refusal():
    host = host_cpu()
    if host.arch != "x86_64" or "avx512f" in host.flags:
        pytest.skip("needs an x86 host without AVX-512")
    with pytest.raises(TargetError) as info:
        resolve_target(json.dumps({"kind": "llvm", "mattr": ["+avx512f"]}))
    message = str(info.value)
    assert "with mattr +avx512f need avx512f" in message and "lacks" in message


def test_a_mattr_feature_llvm_does_not_know_is_refused_not_ignored():
    # LLVM itself only warns on stderr and builds without it.
    with pytest.raises(TargetError) as info:
        resolve_target(json.dumps({"kind": "llvm", "mattr": ["+avx2", "+avx3000"]}))
    message = str(info.value)
    assert "+avx3000" in message and "does not know" in message and "+avx2," not in message


def test_a_cuda_target_for_another_gpu_is_described_by_its_arch():
    target = resolve_target(json.dumps({"kind": "cuda", "arch": "sm_75"}))
    assert target.json["arch"] == "sm_75" and target.description.endswith("(sm_75)")


def test_typed_mcpu_with_mattr_turning_off_what_the_host_lacks_is_accepted():
    mcpu = an_mcpu_this_host_lacks()
    lacks = missing_features(mcpu, (), host_cpu())
    target = resolve_target(json.dumps({"kind": "llvm", "mcpu": mcpu, "mattr": [f"-{f}" for f in lacks]}))
    assert target.can_run and target.json["mcpu"] == mcpu


def test_stored_target_the_host_lacks_cannot_run_and_says_why():
    mcpu = an_mcpu_this_host_lacks()
    stored = target_from_json({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})
    assert not stored.can_run and "lacks" in stored.why_not
    foreign = target_from_json({"kind": "llvm", "mcpu": "generic", "mtriple": "riscv64-unknown-linux-gnu"})
    assert not foreign.can_run and "riscv64" in foreign.why_not


# ---- the self-check: real kernels in real child processes -------------------------------------------


def test_self_check_passes_for_the_default_target_and_is_cached(monkeypatch, tmp_path):
    from tunelab.core.target import selfcheck

    monkeypatch.setenv(selfcheck.CACHE_ENV, str(tmp_path))
    target = llvm_target()
    selfcheck.self_check(target)
    assert (tmp_path / "selfcheck.json").exists()
    calls = []
    monkeypatch.setattr(selfcheck.subprocess, "run", lambda *a, **k: calls.append(a))
    selfcheck.self_check(target)  # cached: no child this time
    assert calls == []


def test_self_check_names_a_real_sigill():
    from tunelab.core.target.selfcheck import self_check

    host = host_cpu()
    if host.arch != "x86_64" or "avx512f" in host.flags:
        pytest.skip("needs an x86 host without AVX-512 to execute a real illegal instruction")
    # Bypass the feature check on purpose: this is what an unchecked name-derived target did.
    unchecked = replace(llvm_target(), json={"kind": "llvm", "mcpu": "znver4", "num-cores": 2})
    with pytest.raises(TargetError) as info:
        self_check(unchecked, use_cache=False)
    message = str(info.value)
    assert "znver4" in message and "SIGILL" in message and "avx512" in message
    # engine terms: the advice names a target; the command line adds its flag (TunelabError.option)
    assert "choose the target" in message and info.value.option == "target"


@pytest.mark.parametrize(
    ("fault", "words"), [("sigill", "SIGILL"), ("sigsegv", "SIGSEGV"), ("wrong", "wrong results")]
)
def test_self_check_names_planted_faults(monkeypatch, fault, words):
    from tunelab.core.faults import PLANT_ENV
    from tunelab.core.target.selfcheck import self_check

    monkeypatch.setenv(PLANT_ENV, f"{fault}@selfcheck")
    with pytest.raises(TargetError, match=words):
        self_check(llvm_target())


def test_a_target_that_dies_here_starts_no_session(monkeypatch, store):
    from specs import small_spec

    from tunelab.core.faults import PLANT_ENV
    from tunelab.core.session.loop import create_session

    monkeypatch.setenv(PLANT_ENV, "sigill@selfcheck")
    with pytest.raises(TargetError, match="SIGILL"):
        create_session(store, small_spec())
    assert store.sessions() == []


@pytest.mark.slow
def test_cli_refuses_an_mcpu_the_host_lacks_before_storing(tmp_path):
    mcpu = an_mcpu_this_host_lacks()
    db = tmp_path / "t.sqlite"
    target = json.dumps({"kind": "llvm", "mcpu": mcpu})
    proc = run_tunelab(*tune_gemm("--target", target, "--db", str(db), trials=2), timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and mcpu in lines[0] and "lacks" in lines[0]
    assert not db.exists()


@pytest.mark.slow
def test_a_host_named_for_features_it_lacks_measures_every_trial(tmp_path):
    """The bug as found: LLVM names the CPU znver4, the VM masks AVX-512. Replayed here with this
    machine's real flags, the default session must measure every trial (none dies of SIGILL)."""
    import os

    from tunelab.core.target.host_cpu import LLVM_NAME_ENV

    host = host_cpu()
    if host.arch != "x86_64" or "avx512f" in host.flags:
        pytest.skip("needs an x86 host without AVX-512")
    db = tmp_path / "t.sqlite"
    env = dict(os.environ, **{LLVM_NAME_ENV: "znver4"})
    proc = run_tunelab(
        *tune_gemm(*FAST_MEASURE_ARGS, "--json", "--db", str(db), shape="M=64,N=64,K=512", trials=8, batch=4),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["trials"] == 8 and doc["failed"] == 0, proc.stderr[-2000:]
    assert doc["target"]["mcpu"] != "znver4"
    assert "note: LLVM names this CPU znver4, but this host lacks its avx512" in proc.stderr
    assert f"CPU {doc['target']['mcpu']} · AVX2+FMA" in proc.stderr

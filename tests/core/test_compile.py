"""`tunelab compile`: sampled schedules of a space built for a target, nothing measured (issue 12 part 1).

Real TVM builds and, for CUDA, real nvcc: the PTX is what a GPU would load."""

from __future__ import annotations

import json
import shutil

import pytest

from tunelab.core.cli.main import main
from tunelab.core.errors import TargetError
from tunelab.core.search.space.factory import make_space
from tunelab.core.target.info import resolve_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
SM90 = '{"kind":"cuda","arch":"sm_90"}'
SM75 = '{"kind":"cuda","arch":"sm_75"}'  # tensor cores without cp.async: the wmma rule's


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_llvm_samples_are_built_and_their_ir_and_assembly_written(tmp_path, capsys):
    out = tmp_path / "llvm"
    code, text, _ = run(
        capsys, "compile", "gemm", "--shape", "M=64,N=64,K=64", "--target", "llvm", "--samples", "3",
        "--out", str(out), "--json",
    )  # fmt: skip
    assert code == 0
    report = json.loads(text)
    assert report["built"] == 3 and len(report["samples"]) == 3 and report["not_built"] == []
    assert report == json.loads((out / "compile.json").read_text())
    configs = {json.dumps(s["config"], sort_keys=True) for s in report["samples"]}
    assert len(configs) == 3  # distinct points of the space
    for sample in report["samples"]:
        stem = f"{sample['index']:02d}"
        assert "define" in (out / f"{stem}.ll").read_text()
        assert (out / f"{stem}.s").read_text().strip()
        record = json.loads((out / f"{stem}.json").read_text())
        assert record["ok"] and "sch.split" in record["trace"]


@pytest.mark.parametrize("space", ["template", "auto"])
def test_a_cpu_of_another_architecture_is_cross_compiled(tmp_path, capsys, space):
    """An aarch64 target on this x86 host: LLVM emits aarch64 code (NEON fused multiply-adds), and the
    report says the kernels cannot run here, without refusing to build them."""
    out = tmp_path / "arm"
    target = '{"kind":"llvm","mtriple":"aarch64-linux-gnu","mcpu":"cortex-a72","num-cores":4}'
    code, text, _ = run(
        capsys, "compile", "gemm", "--shape", "M=64,N=64,K=64", "--target", target, "--space", space,
        "--samples", "2", "--out", str(out), "--json",
    )  # fmt: skip
    assert code == 0, text
    report = json.loads(text)
    assert report["built"] == 2 and report["target"]["mtriple"] == "aarch64-linux-gnu"
    assert "mattr" not in report["target"]  # this host's features say nothing about an Arm core
    assert report["target_description"] == "CPU cortex-a72 · NEON, 4 cores for aarch64-linux-gnu"
    for sample in report["samples"]:
        stem = f"{sample['index']:02d}"
        assert 'target triple = "aarch64' in (out / f"{stem}.ll").read_text()
        assembly = (out / f"{stem}.s").read_text()
        assert "fmla" in assembly or "fmadd" in assembly, assembly[:2000]
        assert "vfmadd" not in assembly and "%rsp" not in assembly  # no x86 left in it
    info = resolve_target(target, elsewhere=True)
    assert not info.can_run and "cannot run on this" in info.why_not
    with pytest.raises(TargetError, match="cannot run on this"):
        resolve_target(target)  # to be measured here, it is refused
    with pytest.raises(TargetError, match="LLVM knows no CPU 'znver4' for aarch64"):
        resolve_target('{"kind":"llvm","mtriple":"aarch64-linux-gnu","mcpu":"znver4"}', elsewhere=True)


@needs_nvcc
@pytest.mark.parametrize("space", ["template", "auto"])
def test_cuda_for_a_gpu_this_machine_lacks_gives_source_and_ptx(tmp_path, capsys, space):
    out = tmp_path / space
    code, text, err = run(
        capsys, "compile", "gemm", "--shape", "M=256,N=256,K=256", "--target", SM90, "--space", space,
        "--samples", "4", "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    report = json.loads((out / "compile.json").read_text())
    assert f"built {report['built']} of 4 sampled schedules" in text and "sm_90" in text
    # random points the GPU's limits refuse are drawn again, and said with their reason
    assert report["built"] == 4 and report["draws"] == 4 + sum(r["count"] for r in report["rejected"])
    assert all("VerifyGPUCode" in r["reason"] for r in report["rejected"])
    for sample in report["samples"]:
        stem = f"{sample['index']:02d}"
        assert "__global__" in (out / f"{stem}.cu").read_text()
        ptx = (out / f"{stem}.ptx").read_text()
        assert ".target sm_90" in ptx and ".entry" in ptx


@needs_nvcc
def test_configs_the_gpu_would_refuse_are_reported_with_their_reason(tmp_path, capsys):
    """A space whose only tiles need 4096 threads per block: each sample fails at scheduling, once said."""
    w = get_workload("gemm")
    data = make_space(
        w, {"M": 1024, "N": 1024, "K": 64}, "float32", resolve_target(SM90), "template"
    ).to_json()
    for knob in data["knobs"]:
        if knob["name"] in ("tile_i", "tile_j"):
            knob["candidates"] = [[64, 1]]
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(data))
    out = tmp_path / "out"
    code, text, _ = run(
        capsys, "compile", "gemm", "--shape", "M=1024,N=1024,K=64", "--target", SM90, "--space-file",
        str(space_file), "--samples", "2", "--out", str(out),
    )  # fmt: skip
    assert code == 4  # nothing built: not bad input, but a script sees it
    report = json.loads((out / "compile.json").read_text())
    assert report["built"] == 0 and report["draws"] >= 2
    assert [r["count"] for r in report["rejected"]] == [report["draws"]]
    assert "VerifyGPUCode" in report["rejected"][0]["reason"]
    assert f"{report['draws']} of {report['draws']} configs drawn did not schedule: " in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--samples", "0"], "--samples must be 1..256"),
        (["--target", '{"kind":"rocm"}'], 'a JSON target needs "kind"'),
        (["--shape", "M=64"], "M=64"),
        (["--space", "nonsense"], "nonsense"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "never"
    code, _, err = run(capsys, "compile", "gemm", "--target", "llvm", "--out", str(out), *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_an_occupied_folder_is_refused_and_an_earlier_compile_replaced_with_force(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = ["compile", "gemm", "--shape", "M=32,N=32,K=32", "--target", "llvm", "--samples", "2"]
    code, _, err = run(capsys, *args, "--out", str(out))
    assert code == 2 and "is not empty" in err
    code, _, err = run(capsys, *args, "--out", str(out), "--force")
    assert code == 2 and "not an earlier compile's" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # untouched
    fresh = tmp_path / "fresh"
    assert run(capsys, *args, "--out", str(fresh))[0] == 0
    assert run(capsys, *args, "--samples", "1", "--out", str(fresh), "--force")[0] == 0
    assert sorted(p.name for p in fresh.iterdir()) == ["00.json", "00.ll", "00.s", "compile.json"]
    (tmp_path / "file").write_text("x")
    code, _, err = run(capsys, *args, "--out", str(tmp_path / "file"))
    assert code == 2 and "is a file" in err


@needs_nvcc
@pytest.mark.parametrize("dtype", ["float16:float32", "float16"])
def test_float16_gemm_for_turing_builds_on_wmma_tensor_cores(tmp_path, capsys, dtype):
    """Issue 12 part 2: the auto space's wmma tensor-core rule (on sm_80 and later a GEMM takes the MMA
    rule first: tests/core/test_mma_spaces.py). f16f16f32 needs StorageRewrite off in TVM 0.27
    (tunelab.core.target.build): without it most such kernels fail with tvm_access_ptr's check."""
    out = tmp_path / "tc"
    code, text, err = run(
        capsys, "compile", "gemm", "--shape", "M=256,N=256,K=256", "--dtype", dtype, "--target", SM75,
        "--space", "auto", "--samples", "8", "--out", str(out), "--json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(text)
    assert report["built"] >= 1 and report["tensor_core"] == report["built"], report["not_built"]
    assert not any("tvm_access_ptr" in entry["reason"] for entry in report["not_built"])
    built = [s for s in report["samples"] if s["ok"]]
    ptx = (out / f"{built[0]['index']:02d}.ptx").read_bytes()
    assert b"wmma.mma.sync" in ptx or b"mma.sync" in ptx
    source = (out / f"{built[0]['index']:02d}.cu").read_text()
    accumulator = "float" if dtype == "float16:float32" else "half"
    assert f"wmma::accumulator, 16, 16, 16, {accumulator}>" in source


def test_the_tensor_core_rule_builds_only_for_float16_inputs_on_volta_or_later():
    from tunelab.core.search.space.auto import tensor_core_groups

    assert tensor_core_groups("float32", "sm_90") == []
    assert tensor_core_groups("float16:float32", "sm_61") == []
    groups = tensor_core_groups("float16:float32", "sm_80")
    assert [g["compute"] for g in groups] == [
        "wmma_sync_16x16x16_f16f16f32",
        "wmma_sync_16x16x16_f16f16f32_trans",
    ]


@needs_nvcc
@pytest.mark.parametrize(
    ("workload", "shape"),
    [
        ("batch_matmul", "B=4,M=128,N=128,K=128"),
        ("conv2d_nchw", "N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1"),  # the ResNet layer
    ],
)
def test_batch_matmul_and_the_resnet_conv_build_on_tensor_cores(tmp_path, capsys, workload, shape):
    out = tmp_path / workload
    code, text, err = run(
        capsys, "compile", workload, "--shape", shape, "--dtype", "float16:float32", "--target", SM90,
        "--space", "auto", "--samples", "1", "--out", str(out), "--json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(text)
    assert report["built"] == report["tensor_core"] == 1

"""Issue 29 item 5: the auto space's MMA tensor-core path (``mma.sync`` fed by ``ldmatrix``, operands
staged by a ``cp.async`` pipeline) for float16 and bfloat16 inputs accumulated in float32, built for
an H200 (sm_90) without one: the PTX nvcc makes of the sampled kernels is read for the instructions."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tunelab.core.cli.main import main

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
SM90 = json.dumps(
    {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152,
     "thread_warp_size": 32, "registers_per_block": 65536}
)  # fmt: skip


def compile_json(capsys, out, *argv: str) -> dict:
    code = main(["compile", *argv, "--target", SM90, "--space", "auto", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    return json.loads(captured.out)


@pytest.mark.slow  # builds a GEMM 4096 with nvcc: 45 s
@needs_nvcc
@pytest.mark.parametrize(("dtype", "ptx_type"), [("float16:float32", "f16"), ("bfloat16:float32", "bf16")])
def test_gemm_4096_builds_mma_sync_with_ldmatrix_and_a_cp_async_pipeline(tmp_path, capsys, dtype, ptx_type):
    out = tmp_path / "mma"
    report = compile_json(
        capsys, out, "gemm", "--shape", "M=4096,N=4096,K=4096", "--dtype", dtype, "--samples", "1"
    )
    assert report["built"] == report["tensor_core"] == 1, report["not_built"]
    ptx = (out / "00.ptx").read_text()
    assert f"mma.sync.aligned.m16n8k8.row.col.f32.{ptx_type}.{ptx_type}.f32" in ptx
    assert "ldmatrix.sync.aligned" in ptx
    assert "cp.async" in ptx and "cp.async.wait_group" in ptx  # a multi-stage pipeline, not one copy
    assert "wmma" not in ptx
    # a draw the MMA path cannot build is refused by the space, never handed to the compiler
    assert not any("Permuted SLayout" in entry["reason"] for entry in report["not_built"])


def test_the_mma_rule_builds_for_float16_and_bfloat16_on_ampere_or_later_only():
    from tunelab.core.search.space.mma import mma_groups

    assert mma_groups("float32", "sm_90") == []
    assert mma_groups("float16:float32", "sm_75") == []  # cp.async is Ampere's: the wmma rule takes it
    assert mma_groups("bfloat16:float32", "sm_61") == []
    assert [g["compute"] for g in mma_groups("float16:float32", "sm_80")] == ["mma_sync_m16n8k8_f16f16f32"]
    (bf16,) = mma_groups("bfloat16:float32", "sm_90")
    assert bf16["compute"] == "mma_sync_m16n8k8_bf16bf16f32"
    from tvm.s_tir import TensorIntrin

    for name in bf16.values():  # registered by asking for the group
        assert TensorIntrin.get(name, allow_missing=True) is not None


def test_partitioned_tiles_are_what_sample_partitioned_tile_may_draw():
    from tunelab.core.search.space.auto import partitioned_candidates

    cands = partitioned_candidates(64, 3, 1, 8)
    assert (16, 2, 2) not in cands and (8, 8, 1) in cands and (4, 2, 8) in cands
    assert all(np.prod(c) == 64 and np.prod(c[1:]) % 8 == 0 for c in cands)
    assert len(cands) == len({tuple(c) for c in cands})


def test_a_sketch_samples_the_mma_rules_spatial_tiles_and_refuses_rows_the_layout_cannot_hold():
    """The MMA sketch's spatial tiles are SamplePartitionedTile decisions: the space varies them (they
    were fixed at the sketch's own draw), and a reduction tile whose staged rows are not a multiple of 32
    elements is refused by the space's postprocessor, not by a failed build."""
    from tunelab.core.search.space.auto import AutoSpace
    from tunelab.core.search.space.tvm_context import InvalidSchedule
    from tunelab.core.target.info import resolve_target
    from tunelab.core.workloads.catalog import get_workload

    space = AutoSpace(
        get_workload("gemm"), {"M": 512, "N": 512, "K": 512}, "bfloat16:float32",
        resolve_target(SM90, elsewhere=True),
    )  # fmt: skip
    (sketch,) = space.sketches
    kinds = [i.kind.name for i in sketch.insts]
    assert kinds.count("SamplePartitionedTile") == 2 and kinds.count("SamplePerfectTile") == 1
    spatial = [c for c, k in zip(sketch.candidates, kinds, strict=True) if k == "SamplePartitionedTile"]
    assert all(c is not None and len(c) > 1 for c in spatial)
    reduce_pos = kinds.index("SamplePerfectTile")
    narrow = [c for c in sketch.candidates[reduce_pos] if np.prod(c[1:]) * 8 % 32]
    assert narrow  # 512 / 8 = 64 steps: [16, 2, 2] stages rows of 32, [32, 2, 1] rows of 16
    rng = np.random.default_rng(0)
    legal = None
    for _ in range(2000):  # about 3 % of random draws pass VerifyGPUCode
        config = space.sample(rng)
        try:
            space.schedule(config)
        except InvalidSchedule:
            continue
        legal = config
        break
    assert legal is not None
    assert np.prod(legal["decisions"][reduce_pos][1:]) * 8 % 32 == 0
    # the same schedule with only its reduction tile narrowed: refused by the layout check itself
    for tile in narrow[:4]:
        config = {**legal, "decisions": list(legal["decisions"])}
        config["decisions"][reduce_pos] = list(tile)
        with pytest.raises(InvalidSchedule, match="PermutedLayoutCheck"):
            space.schedule(config)

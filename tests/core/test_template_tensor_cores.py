"""The template space's tensor-core knobs (issue 12): a float16 matrix multiply on WMMA fragments, its
warp and fragment tiles as knobs, built for sm_90 with real TVM and real nvcc (no GPU needed)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tunelab.core.cli.main import main
from tunelab.core.errors import SpaceError
from tunelab.core.search.space.factory import make_space
from tunelab.core.target.info import resolve_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = pytest.mark.slow
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
SM90 = '{"kind":"cuda","arch":"sm_90"}'
SQUARE = {"M": 256, "N": 256, "K": 256}


def space(shape=SQUARE, dtype="float16:float32", target=SM90, workload="gemm", data=None):
    info = resolve_target(target, elsewhere=True)
    return make_space(get_workload(workload), shape, dtype, info, "template", data)


def test_the_knobs_exist_only_where_the_tensor_core_kernel_fits():
    names = [k["name"] for k in space().knobs]
    assert names[-4:] == ["tensor_core", "wmma_i", "wmma_j", "wmma_k"]
    by_name = {k["name"]: k for k in space().knobs}
    # [warps, fragments] of 16 along i: their product divides the 16 fragments of M = 256
    assert [1, 1] in by_name["wmma_i"]["candidates"] and [4, 4] in by_name["wmma_i"]["candidates"]
    assert all(16 % (w * f) == 0 and w <= 8 and f <= 8 for w, f in by_name["wmma_i"]["candidates"])
    assert by_name["wmma_k"]["candidates"] == [[1], [2], [4], [8]]
    for no in (
        space(dtype="float32"),  # no float32 tensor-core intrinsic in the WMMA group
        space(target='{"kind":"cuda","arch":"sm_61"}'),  # Pascal: no tensor cores
        space(shape={"M": 250, "N": 256, "K": 256}),  # not a multiple of 16
        space(target="llvm"),
    ):
        assert "tensor_core" not in [k["name"] for k in no.knobs]
    batch = space(workload="batch_matmul", shape={"B": 2, "M": 64, "N": 64, "K": 64})
    assert "tensor_core" in [k["name"] for k in batch.knobs]


def test_configs_of_one_kernel_share_a_key_and_bad_knobs_are_refused():
    s = space()
    rng = np.random.default_rng(1)
    base = {**s.sample(rng), "tensor_core": True}
    other_tiles = {**base, "tile_i": s._by_name["tile_i"]["candidates"][-1], "order": "ro,si,ri"}
    assert s.key(base) == s.key(other_tiles)  # the plain kernel's knobs are not used with tensor cores
    assert s.key(base) != s.key({**base, "wmma_k": [8] if base["wmma_k"] != [8] else [1]})
    plain = {**base, "tensor_core": False}
    assert s.key(plain) == s.key({**plain, "wmma_i": [1, 1] if plain["wmma_i"] != [1, 1] else [2, 2]})
    assert s.key(plain) != s.key(base)
    data = s.to_json()
    wrong = [dict(k) for k in data["knobs"]]
    next(k for k in wrong if k["name"] == "wmma_i")["candidates"] = [[3, 1]]
    with pytest.raises(SpaceError, match="do not divide the 16 fragments of 16 along axis i"):
        space(data={**data, "knobs": wrong})
    with pytest.raises(SpaceError, match="tensor-core knobs .* need a float16 matrix multiply"):
        space(dtype="float32", data=data)


def test_a_tensor_core_config_schedules_on_wmma_fragments():
    s = space()
    config = {**s.sample(np.random.default_rng(0)), "tensor_core": True, "wmma_i": [2, 2], "wmma_j": [2, 2]}
    config["wmma_k"] = [2]
    text = s.schedule(config).mod.script()
    for scope in ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator", '"shared"'):
        assert scope in text, scope
    assert "tvm_mma_sync" in text and "tvm_load_matrix_sync" in text and "tvm_store_matrix_sync" in text
    assert '"threadIdx.y"' in text


def test_the_evolutionary_search_has_a_tensor_core_sketch_it_decodes():
    from tvm.s_tir import Schedule

    s = space()
    combos = s.static_combos()
    # one tensor-core sketch: the plain kernel's order, shared and local do not multiply it
    assert [c for c in combos if c["tensor_core"]] == [
        {"order": "ro,ri,si", "shared": True, "local": True, "tensor_core": True}
    ]
    assert sum(1 for c in combos if not c["tensor_core"]) == 8
    tensor = []
    for seed in range(5):  # each sketch's tiles are sampled afresh (seeded: the same draws every run)
        sketches = s.sketch_fn()(Schedule(s.prim_func, seed=seed + 1))
        assert len(sketches) == len(combos)
        decoded = [s.decode(sketch.trace) for sketch in sketches]
        tensor += [c for c in decoded if c is not None and c["tensor_core"]]
    # a draw whose warps fall outside wmma_i's or wmma_j's candidates left the space (as a plain sketch's
    # threads can): decode drops it; the others come back as configs of the space
    assert tensor
    for config in tensor:
        s.check_config(config)
        assert config["tile_i"] == s._by_name["tile_i"]["candidates"][0]  # the unused tiles: canonical


@needs_nvcc
def test_tunelab_compile_builds_tensor_core_templates_to_mma_ptx(tmp_path, capsys):
    out = tmp_path / "tc"
    code = main(
        ["compile", "gemm", "--shape", "M=512,N=512,K=512", "--dtype", "float16:float32", "--target", SM90,
         "--space", "template", "--samples", "8", "--out", str(out), "--json"]
    )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["built"] == 8, report["not_built"]
    on = [s for s in report["samples"] if s["config"]["tensor_core"]]
    assert on, "no sample drew the tensor-core kernel"
    for sample in report["samples"]:
        ptx = (out / f"{sample['index']:02d}.ptx").read_text()
        assert ("wmma.mma.sync" in ptx) == bool(sample["config"]["tensor_core"]), sample["config"]
        assert sample["tensor_core"] == bool(sample["config"]["tensor_core"])

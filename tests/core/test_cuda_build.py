"""CUDA schedules from both spaces build, and nvcc accepts the generated code, without a GPU.

TVM's build keeps CUDA *source* in the module and compiles it only when loaded on a GPU, so a
successful build proves nothing about nvcc: each kernel is compiled explicitly (TVM_NOTES 8).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tunelab.core.search.space.factory import make_space
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.target.info import cuda_available, resolve_target
from tunelab.core.workloads.catalog import get_workload

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed"),
]


def valid_configs(space, count, seed=0, tries=400):
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(tries):
        config = space.sample(rng)
        try:
            found.append((config, space.schedule(config)))
        except InvalidSchedule:
            continue
        if len(found) == count:
            break
    return found


def nvcc_ptx(sch, target):
    import tvm
    from tvm.support import nvcc

    ex = tvm.compile(sch.mod, target.tvm_target())
    [device_module] = [m for m in ex.mod.imports if m.kind == "cuda"]
    source = device_module.inspect_source("cuda")
    assert "__global__" in source
    with target.tvm_target():  # nvcc mode needs the target's arch in scope
        ptx = nvcc.compile_cuda(source, target_format="ptx", arch=target.json["arch"], compiler="nvcc")
    return source, bytes(ptx)


@pytest.mark.parametrize(
    "workload,shape",
    [
        ("gemm", "M=128,N=128,K=128"),
        ("dense_bias", "M=64,N=64,K=64"),
        ("conv2d_nchw", "N=1,C=16,H=14,W=14,K=16,R=3,S=3,stride=1,pad=1"),
    ],
)
@pytest.mark.parametrize("kind", ["template", "auto"])
def test_cuda_schedules_compile_with_nvcc(workload, shape, kind):
    target = resolve_target("cuda")
    w = get_workload(workload)
    space = make_space(w, w.parse_shape(shape), "float32", target, kind)
    configs = valid_configs(space, 2)
    assert configs, "no valid CUDA schedule found"
    for _config, sch in configs:
        source, ptx = nvcc_ptx(sch, target)
        assert b".entry" in ptx or b".visible .entry" in ptx
        if kind == "template" and _config.get("shared"):
            assert "__shared__" in source


def test_template_rejects_too_many_threads():
    target = resolve_target("cuda")
    w = get_workload("gemm")
    space = make_space(w, {"M": 1024, "N": 1024, "K": 64}, "float32", target, "template")
    config = space.sample(np.random.default_rng(0))
    config.update({"tile_i": [64, 1], "tile_j": [64, 1]})  # 4096 threads per block
    with pytest.raises(InvalidSchedule, match="VerifyGPUCode"):
        space.schedule(config)


@pytest.mark.skipif(cuda_available(), reason="a GPU is present: CUDA sessions can run here")
def test_cuda_session_without_gpu_is_refused_before_storing(tmp_path):
    from tunelab.core.errors import TargetError
    from tunelab.core.records import SessionSpec
    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store

    with Store(tmp_path / "db.sqlite") as store:
        with pytest.raises(TargetError, match="built here but not measured"):
            create_session(
                store, SessionSpec(workload="gemm", shape={"M": 64, "N": 64, "K": 64}, target="cuda")
            )
        assert store.sessions() == []

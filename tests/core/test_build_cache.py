"""Libraries built once for a confirmation measured again (tunelab.core.trust.remeasure.build_cache)."""

from __future__ import annotations

import pytest

from tunelab.core.measure.runner import fast_build
from tunelab.core.trust.remeasure.build_cache import BuildCache
from tunelab.core.workloads.catalog import get_workload


def _mod(n: int):
    import tvm

    return tvm.IRModule({"main": get_workload("gemm").prim_func({"M": n, "N": n, "K": n}, "float32")})


def test_a_schedule_is_built_once_per_target(tmp_path):
    import tvm

    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    builds_made = []

    def build(mod):
        def run():
            builds_made.append(mod)
            return fast_build(mod, target, None)

        return run

    a, b = _mod(16), _mod(32)
    with BuildCache() as cache:
        cache.export(a, target, tmp_path / "a1.so", build(a))
        cache.export(_mod(16), target, tmp_path / "a2.so", build(a))  # equal structure: a copy
        cache.export(b, target, tmp_path / "b.so", build(b))
        assert len(builds_made) == 2 and cache.hits == 1
        assert (tmp_path / "a1.so").read_bytes() == (tmp_path / "a2.so").read_bytes()
        lib = tvm.runtime.load_module(str(tmp_path / "a2.so"))  # the copy is a library that loads
        assert lib["main"] is not None

        def broken():
            raise RuntimeError("does not build")

        with pytest.raises(RuntimeError):
            cache.export(_mod(8), target, tmp_path / "c.so", broken)
        assert not (tmp_path / "c.so").exists()
        with pytest.raises(RuntimeError):  # nothing was cached for it: the next attempt builds again
            cache.export(_mod(8), target, tmp_path / "c.so", broken)
        folder = cache._folder
    assert not folder.exists()

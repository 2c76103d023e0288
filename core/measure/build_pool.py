"""Build candidates on a pool of worker processes kept across batches, and remove their build folders."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from typing import Any

from tunelab.core.target.info import cpu_core_count

BUILD_POOL_BATCHES = 25


def fast_build(mod: Any, target: Any, _params: Any) -> Any:
    """MetaSchedule's default build without importing tensor intrinsics (none are used here)."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    from tunelab.core.target.build import build_scope

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    with build_scope(mod, target):  # tensor-core kernels need a pass turned off in 0.27
        return tvm.tirx.build(mod, target=target)  # must be a runtime.Module (export_library)


def remove_builds(built: Iterable[Any]) -> None:
    """Remove the build folder of each of ``built`` (MetaSchedule's BuilderResults) that has one."""
    for b in built:
        if b.artifact_path is not None:
            shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)


class BuildPool:
    """LocalBuilder's work on a worker pool kept across batches.

    LocalBuilder starts a fresh pool for every batch (its workers leak memory over many uses),
    which costs each batch a TVM import per worker (~2 s on 2 cores). A pool recycled every
    BUILD_POOL_BATCHES batches keeps the leak bounded and the time on building."""

    def __init__(self, tvm_target: Any, timeout_s: float) -> None:
        self.tvm_target = tvm_target
        self.timeout_s = timeout_s
        self._pool: Any = None
        self._uses = 0

    def build(self, mods: list[Any]) -> list[Any]:
        """One BuilderResult per module: its library's path, or the build's error."""
        from tvm.s_tir.meta_schedule.builder import BuilderResult
        from tvm.s_tir.meta_schedule.builder.local_builder import _worker_func
        from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

        from tunelab.core.faults import stop_on_sigint_like_sigterm

        if self._pool is None or self._uses >= BUILD_POOL_BATCHES:
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = PopenPoolExecutor(
                max_workers=cpu_core_count(),
                timeout=self.timeout_s,
                initializer=stop_on_sigint_like_sigterm,
            )
            self._uses = 0
        self._uses += 1
        results = []
        jobs = [(fast_build, None, mod, self.tvm_target, None) for mod in mods]
        for item in self._pool.map_with_error_catching(lambda x: _worker_func(*x), jobs):
            if item.status == StatusKind.COMPLETE:
                results.append(BuilderResult(item.value, None))
            elif item.status == StatusKind.TIMEOUT:
                results.append(BuilderResult(None, f"build timeout: killed after {self.timeout_s} s"))
            else:
                results.append(BuilderResult(None, f"build error: {item.value}"))
        return results

    def shutdown(self) -> None:
        """End the pool's workers (a later build starts a fresh pool)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

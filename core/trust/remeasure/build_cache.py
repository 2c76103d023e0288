"""Libraries built once for a confirmation measured again.

A confirmation that is not yet evidence (the machine busy, its processes disagreeing) is measured again
(tunelab.core.trust.confirm): the schedules are the same, only the machine differs, so their libraries
are built on the first attempt and copied for the next ones instead of compiled again (at GEMM 1024^3
a build takes seconds per schedule on 2 cores).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


class BuildCache:
    """Built libraries keyed by (the schedule's structural hash, the target, the file's suffix: a shared
    library ``.so`` to load here, or a ``.tar`` of objects that an RPC server links), in a folder of its
    own that lives until :meth:`close` (use it as a context manager)."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="tunelab-builds-"))
        self._libs: dict[tuple[int, str, str], Path] = {}
        self.hits = 0

    def export(self, mod: Any, target: Any, out: Path, build: Callable[[], Any]) -> None:
        """Write the library of ``mod`` for ``target`` to ``out``: built with ``build()`` (a
        ``runtime.Module``) the first time, copied from the cache after. A build error propagates and
        nothing is cached for it."""
        import tvm_ffi  # TVM 0.27 moved structural_hash out of tvm.ir, into its FFI package

        key = (int(tvm_ffi.structural_hash(mod)), str(target), out.suffix)
        cached = self._libs.get(key)
        if cached is None:
            # export_library chooses by the name: a ".tar" is an archive of objects, else a shared library
            cached = self._folder / f"lib{len(self._libs)}{out.suffix or '.so'}"
            build().export_library(str(cached))
            self._libs[key] = cached
        else:
            self.hits += 1
        shutil.copyfile(cached, out)

    def close(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)
        self._libs.clear()

    def __enter__(self) -> BuildCache:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

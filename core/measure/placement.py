"""Where a kernel's buffers sit in memory, chosen on purpose.

The same CPU kernel can run 10-15 % slower depending only on where its input and output buffers
start within a 4 KiB page. Found here with a 256^3 GEMM: measured in a process that had imported
all of TVM, glibc served the three 256 KiB buffers from the heap (page offsets 0x600, 0x680,
0x700) and it ran in 0.32 ms; in a fresh process with TVM's runtime library only, the same
buffers were fresh ``mmap`` regions that all start at page offset 0x040 and it ran in 0.37 ms.
Buffers at the same page offset compete for the same L1 sets (and alias in the load/store
unit's 4 KiB address check), so which figure a session records depended on its process's heap
history. That made a tuned figure irreproducible in a fresh process, and it is one way a kernel
"jitters in production": there, the buffers land wherever the application's allocator puts them.

So every CPU measurement (the session's runner, validation and confirmation workers) places its
buffers itself: ``staggered`` (the figure tunelab records) starts buffer *i* at page offset
``64 + 1088 * i`` (mod 4096): 17 cache lines apart, so no two share an L1 set at their starts.
``aligned`` starts every buffer at the same offset, the worst case that large ``malloc`` /
``mmap`` allocations produce; validation measures it too and reports how placement-sensitive a
kernel is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PAGE = 4096
ALIGN = 64  # TVM's kernels (and its DLPack import) require 64-byte aligned data
LAYOUTS = ("staggered", "aligned")
DEFAULT_LAYOUT = "staggered"


def page_offset(layout: str, index: int) -> int:
    """Where buffer ``index`` starts within its page under ``layout``."""
    if layout == "staggered":
        return (ALIGN + 1088 * index) % PAGE
    if layout == "aligned":
        return ALIGN
    raise ValueError(f"unknown buffer layout {layout!r}; layouts are {list(LAYOUTS)}")


def placed_copy(x: np.ndarray, offset: int) -> np.ndarray:
    """A C-contiguous copy of ``x`` whose data starts ``offset`` bytes into a page (offset % 64 == 0)."""
    if offset % ALIGN or not 0 <= offset < PAGE:
        raise ValueError(f"a buffer offset must be a multiple of {ALIGN} in [0, {PAGE}), not {offset}")
    raw = np.empty(max(x.nbytes, 1) + 2 * PAGE, dtype=np.uint8)
    start = (offset - raw.ctypes.data) % PAGE
    view = raw[start : start + x.nbytes].view(x.dtype).reshape(x.shape)
    view[...] = x
    return view  # keeps `raw` alive through .base


def placed_tensors(arrays: list[np.ndarray], device: Any, layout: str = DEFAULT_LAYOUT) -> list[Any]:
    """TVM tensors holding ``arrays`` on ``device``, placed per ``layout`` on a CPU (zero-copy through
    DLPack: the tensors keep their NumPy buffers alive). On other devices the driver decides
    (e.g. cudaMalloc's 256-byte alignment) and ``layout`` is ignored."""
    import tvm

    if device.dlpack_device_type() != tvm.cpu(0).dlpack_device_type():
        return [tvm.runtime.tensor(x, device) for x in arrays]
    return [
        tvm.runtime.from_dlpack(placed_copy(np.ascontiguousarray(x), page_offset(layout, i)))
        for i, x in enumerate(arrays)
    ]

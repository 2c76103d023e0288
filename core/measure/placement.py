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
kernel is. ``plain`` does not place anything: ``tvm.runtime.tensor(x, device)``, the allocation a
person's own application gets from plain TVM, wherever TVM's allocator and that process's heap
history put it. Its figure is what an exported kernel will show in someone else's process, so
validation and confirmation measure it too and an export states it beside the recorded one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PAGE = 4096
ALIGN = 64  # TVM's kernels (and its DLPack import) require 64-byte aligned data
LAYOUTS = ("staggered", "aligned", "plain")
DEFAULT_LAYOUT = "staggered"
PLACED_LAYOUTS = ("staggered", "aligned")  # the layouts that choose where each buffer starts
PLACEMENT_TOL = 0.05  # slower than this with its buffers placed otherwise: a placement-sensitive kernel
LAYOUT_WORDS = {
    "staggered": "with tunelab's staggered buffers (each at another page offset)",
    "aligned": "with every buffer at the same page offset, as large allocations often are (cache-set conflicts)",
    "plain": "with plain TVM's allocation (tvm.runtime.tensor), as a person's application gets it",
}


def worst_layout(layout_ms: dict[str, float]) -> str | None:
    """The layout a kernel ran slowest with (None without figures)."""
    timed = {k: v for k, v in layout_ms.items() if v}
    return max(timed, key=lambda k: timed[k]) if timed else None


def placement_ratio(layout_ms: dict[str, float]) -> float | None:
    """The slowest layout's figure over the recorded layout's (:data:`DEFAULT_LAYOUT`): 1.12 means the
    kernel runs 12 % slower with its buffers placed the worst way measured. None with one layout."""
    recorded = layout_ms.get(DEFAULT_LAYOUT)
    others = [v for k, v in layout_ms.items() if k != DEFAULT_LAYOUT and v]
    return max(others) / recorded if recorded and others else None


def is_placement_sensitive(layout_ms: dict[str, float]) -> bool:
    ratio = placement_ratio(layout_ms)
    return ratio is not None and ratio > 1 + PLACEMENT_TOL


def page_offset(layout: str, index: int) -> int:
    """Where buffer ``index`` starts within its page under ``layout`` (one of :data:`PLACED_LAYOUTS`)."""
    if layout == "staggered":
        return (ALIGN + 1088 * index) % PAGE
    if layout == "aligned":
        return ALIGN
    if layout == "plain":
        raise ValueError("the plain layout places nothing: TVM's allocator decides where its buffers start")
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
    DLPack: the tensors keep their NumPy buffers alive); ``plain`` copies them into tensors TVM
    allocates itself, as a person's application does. On other devices the driver decides
    (e.g. cudaMalloc's 256-byte alignment) and ``layout`` is ignored."""
    import tvm

    if layout not in LAYOUTS:
        raise ValueError(f"unknown buffer layout {layout!r}; layouts are {list(LAYOUTS)}")
    if layout == "plain" or device.dlpack_device_type() != tvm.cpu(0).dlpack_device_type():
        return [tvm.runtime.tensor(x, device) for x in arrays]
    return [
        tvm.runtime.from_dlpack(placed_copy(np.ascontiguousarray(x), page_offset(layout, i)))
        for i, x in enumerate(arrays)
    ]

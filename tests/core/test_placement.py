"""tunelab.core.measure.placement: buffers start where asked, hold the data, a real kernel runs on them unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.core.measure.placement import (
    LAYOUTS,
    PAGE,
    PLACED_LAYOUTS,
    page_offset,
    placed_copy,
    placed_tensors,
)


def test_offsets_and_copies():
    x = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    for offset in (0, 64, 1088, 4032):
        y = placed_copy(x, offset)
        assert y.ctypes.data % PAGE == offset and y.flags.c_contiguous
        assert np.array_equal(x, y) and y.dtype == x.dtype and y.shape == x.shape
    staggered = {page_offset("staggered", i) for i in range(4)}
    assert len(staggered) == 4 and all(o % 64 == 0 for o in staggered)
    assert {page_offset("aligned", i) for i in range(4)} == {64}
    for bad in (3, -64, PAGE):
        with pytest.raises(ValueError, match="multiple of 64"):
            placed_copy(x, bad)
    with pytest.raises(ValueError, match="unknown buffer layout"):
        page_offset("random", 0)
    with pytest.raises(ValueError, match="places nothing"):
        page_offset("plain", 0)


def test_a_real_kernel_on_placed_buffers():
    import tvm

    from tunelab.core.measure.runner import fast_build
    from tunelab.core.target.info import resolve_target
    from tunelab.core.workloads.catalog import get_workload

    gemm = get_workload("gemm")
    shape = {"M": 64, "N": 48, "K": 32}
    target = resolve_target("llvm")
    lib = fast_build(gemm.ir_module(shape, "float32"), target.tvm_target(), None)
    inputs = gemm.make_inputs(shape, "float32", 0)
    dev = tvm.cpu(0)
    for layout in LAYOUTS:
        arrays = [*inputs, np.zeros(gemm.output_shape(shape), dtype="float32")]
        args = placed_tensors(arrays, dev, layout)
        for i, a in enumerate(args):
            start = np.from_dlpack(a).ctypes.data
            if layout in PLACED_LAYOUTS:
                assert start % PAGE == page_offset(layout, i)  # zero-copy: where we put it
            else:  # plain: TVM's own allocation, not the NumPy array's (a copy), 64-byte aligned
                assert start != arrays[i].ctypes.data and start % 64 == 0
        lib["main"](*args)
        np.testing.assert_allclose(args[-1].numpy(), gemm.reference(inputs, shape), rtol=1e-4, atol=1e-4)

"""Workload registry: shapes, TE definitions built with real TVM (LLVM), NumPy references, counts, custom files."""

import json

import numpy as np
import pytest
import tvm
from tvm.s_tir import Schedule

from tunelab.core.errors import WorkloadError
from tunelab.core.workloads.base import Param, Workload
from tunelab.core.workloads.catalog import WORKLOADS, get_workload, list_workloads, load_custom_workload
from tunelab.core.workloads.custom import EXAMPLE_SOURCE

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})

# Small shapes that still exercise strides, padding, dilation and the multiplier.
SMALL = {
    "gemm": "M=33,N=17,K=64",
    "dense_bias": "M=16,N=24,K=40",
    "batch_matmul": "B=3,M=9,N=10,K=11",
    "conv2d_nchw": "N=2,C=3,H=9,W=8,K=4,R=3,S=3,stride=2,pad=1,dilation=2",
    "conv2d_nhwc": "N=2,C=3,H=9,W=8,K=4,R=3,S=2,stride=2,pad=1,dilation=1",
    "conv2d_nchwc": "N=2,C=6,H=9,W=8,K=8,R=3,S=2,stride=2,pad=1,dilation=2,ic=3,oc=4",
    "depthwise_conv2d": "N=2,C=3,H=9,W=8,R=3,S=3,stride=2,pad=1,multiplier=2",
}

# The custom-file tests edit the example a person is shown (row-wise sum of squares, M x N float32).
EXAMPLE = EXAMPLE_SOURCE


def example_edited(old: str, new: str) -> str:
    """The example with ``old`` replaced by ``new``; ``old`` must be in it (else the test would test nothing)."""
    assert old in EXAMPLE
    return EXAMPLE.replace(old, new)


def example_line(text: str) -> int:
    """The 1-based number of the example's line ``text``, for the errors that must name it."""
    return EXAMPLE.splitlines().index(text) + 1


def run_tvm(
    wl: Workload, shape, dtype: str, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Build the unscheduled PrimFunc, run it on inputs from make_inputs; return (tvm result, reference, inputs)."""
    pf = wl.prim_func(shape, dtype)
    ex = tvm.compile(tvm.IRModule({"main": pf}), TARGET)
    dev = tvm.cpu(0)
    inputs = wl.make_inputs(shape, dtype, seed=seed)
    out = tvm.runtime.tensor(np.zeros(wl.output_shape(shape), dtype), dev)
    ex["main"](*[tvm.runtime.tensor(a, dev) for a in inputs], out)
    return out.numpy(), wl.reference(inputs, shape), inputs


def assert_matches(wl: Workload, shape, dtype: str) -> None:
    got, ref, _ = run_tvm(wl, shape, dtype)
    assert got.shape == ref.shape == wl.output_shape(shape)
    assert ref.dtype == np.dtype(dtype)
    rtol, atol = wl.tolerance(dtype, shape)
    np.testing.assert_allclose(got.astype("float64"), ref.astype("float64"), rtol=rtol, atol=atol)


# ---- registry ---------------------------------------------------------------------------------------------
def test_registry_names_and_main_blocks():
    assert list(WORKLOADS) == [
        "gemm",
        "dense_bias",
        "batch_matmul",
        "conv2d_nchw",
        "conv2d_nhwc",
        "conv2d_nchwc",
        "depthwise_conv2d",
    ]
    assert [w.name for w in list_workloads()] == list(WORKLOADS)
    blocks = {name: wl.main_block for name, wl in WORKLOADS.items()}
    assert blocks == {
        "gemm": "C",
        "dense_bias": "C",
        "batch_matmul": "C",
        "conv2d_nchw": "conv",
        "conv2d_nhwc": "conv",
        "conv2d_nchwc": "conv",
        "depthwise_conv2d": "conv",
    }
    for wl in list_workloads():
        assert wl.dtypes[0] == "float32"
        assert all(isinstance(p, Param) for p in wl.params)
        for preset in wl.presets.values():
            assert wl.parse_shape(preset) == preset  # presets are complete and valid


def test_get_workload_unknown_lists_names():
    with pytest.raises(WorkloadError) as err:
        get_workload("gemmm")
    msg = str(err.value)
    assert "gemmm" in msg
    for name in [*WORKLOADS, "custom"]:
        assert name in msg


def test_get_workload_custom_needs_file():
    with pytest.raises(WorkloadError, match="file"):
        get_workload("custom")


def test_to_json_is_plain_json():
    for wl in list_workloads():
        data = json.loads(json.dumps(wl.to_json()))
        assert data["name"] == wl.name
        assert {"title", "description", "params", "dtypes", "presets"} <= set(data)
        assert [p["name"] for p in data["params"]] == list(wl.param_names)
        assert set(data["params"][0]) == {"name", "default", "minimum", "doc"}


# ---- TVM vs NumPy ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_builds_and_matches_reference(name, dtype):
    wl = get_workload(name)
    assert_matches(wl, wl.parse_shape(SMALL[name]), dtype)


@pytest.mark.parametrize(
    "name, spec",
    [
        ("dense_bias", "M=8,N=8,K=8,relu=0"),
        ("conv2d_nchw", "N=1,C=2,H=6,W=5,K=3,R=1,S=1,stride=1,pad=0"),
        ("conv2d_nhwc", "N=1,C=2,H=6,W=7,K=3,R=3,S=3,stride=1,pad=0,dilation=2"),
        ("depthwise_conv2d", "N=1,C=4,H=7,W=7,R=3,S=3,stride=1,pad=0,multiplier=1"),
    ],
)
def test_variants_match_reference(name, spec):
    wl = get_workload(name)
    assert_matches(wl, wl.parse_shape(spec), "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gemm_long_reduction_within_tolerance(dtype):
    wl = get_workload("gemm")
    assert_matches(wl, {"M": 32, "N": 48, "K": 512}, dtype)


def test_tolerance_catches_a_wrong_result():
    wl = get_workload("gemm")
    shape = {"M": 16, "N": 16, "K": 512}
    got, ref, inputs = run_tvm(wl, shape, "float32")
    rtol, atol = wl.tolerance("float32", shape)
    # Dropping the last 1/8 of the reduction must fail the comparison.
    partial = (inputs[0][:, :448].astype("float64") @ inputs[1][:448].astype("float64")).astype("float32")
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(partial, ref, rtol=rtol, atol=atol)
    assert wl.tolerance("float32", {"K": 4096})[1] > wl.tolerance("float32", {"K": 64})[1]
    assert wl.tolerance("float16")[1] > wl.tolerance("float32")[1] > wl.tolerance("float64")[1]


LOOPS = {
    "gemm": "for i, j, k in T.grid",
    "dense_bias": "for i, j, k in T.grid",
    "batch_matmul": "for b, i, j, k in T.grid",
    "conv2d_nchw": "for n, f, y, x, rc, ry, rx in T.grid",
    "conv2d_nhwc": "for n, y, x, f, ry, rx, rc in T.grid",
    "conv2d_nchwc": "for n, fo, y, x, fi, rco, ry, rx, rci in T.grid",
    "depthwise_conv2d": "for n, f, y, x, ry, rx in T.grid",
}


def test_block_names_and_iteration_variables():
    for name, wl in WORKLOADS.items():
        pf = wl.prim_func(SMALL[name], "float32")
        sch = Schedule(tvm.IRModule({"main": pf}))
        sch.get_sblock(wl.main_block)  # raises if missing
        if wl.main_block == "conv":
            sch.get_sblock("pad")
        assert LOOPS[name] in pf.script(), name
    dense = WORKLOADS["dense_bias"]
    sch = Schedule(tvm.IRModule({"main": dense.prim_func("M=4,N=4,K=4", "float32")}))
    sch.get_sblock("bias_add")
    sch.get_sblock("relu")
    pf = dense.prim_func("M=4,N=4,K=4,relu=0", "float32")
    assert 'T.sblock("relu")' not in pf.script()


def test_tensor_names_and_shapes():
    wl = get_workload("conv2d_nhwc")
    s = wl.parse_shape(SMALL["conv2d_nhwc"])
    ts = wl.tensors(s, "float32")
    assert [t.op.name for t in ts] == ["A", "B", "conv"]
    assert (
        [tuple(int(x) for x in t.shape) for t in ts[:-1]]
        == wl.input_shapes(s)
        == [(2, 9, 8, 3), (3, 2, 3, 4)]
    )
    assert wl.output_shape(s) == (2, 5, 5, 4)
    assert [t.op.name for t in get_workload("dense_bias").tensors(None, "float32")] == [
        "A",
        "B",
        "bias",
        "relu",
    ]
    assert get_workload("depthwise_conv2d").output_shape(SMALL["depthwise_conv2d"]) == (2, 6, 5, 4)


def test_the_blocked_convolution_is_the_nchw_one_in_another_layout():
    """conv2d_nchwc's kernel (built by TVM from its own indexing) gives, once unblocked, what conv2d_nchw's
    reference gives for the same numbers in NCHW: the layouts are a relabelling, not another operator."""
    from tunelab.core.workloads.catalog import block_output, unblock_input, unblock_weight

    blocked, plain = get_workload("conv2d_nchwc"), get_workload("conv2d_nchw")
    shape = blocked.parse_shape(SMALL["conv2d_nchwc"])
    got, _, (a, w) = run_tvm(blocked, shape, "float64")
    plain_shape = {k: v for k, v in shape.items() if k not in ("ic", "oc")}
    want = plain.reference([unblock_input(a), unblock_weight(w)], plain_shape)
    np.testing.assert_allclose(got, block_output(want, shape["oc"]), rtol=1e-12, atol=1e-12)
    # channel c of NCHW is block c // ic, lane c % ic
    assert unblock_input(a)[1, 4, 2, 3] == a[1, 4 // 3, 2, 3, 4 % 3]
    assert unblock_weight(w)[5, 4, 1, 0] == w[5 // 4, 4 // 3, 1, 0, 4 % 3, 5 % 4]
    assert blocked.flops(shape) == plain.flops(plain_shape)
    assert blocked.input_shapes(shape) == [(2, 2, 9, 8, 3), (2, 2, 3, 2, 3, 4)]


def test_the_blocked_convolution_refuses_blocks_that_do_not_divide():
    wl = get_workload("conv2d_nchwc")
    with pytest.raises(WorkloadError, match="ic=5 does not divide C=64"):
        wl.parse_shape("ic=5")
    with pytest.raises(WorkloadError, match="oc=16 does not divide K=24"):
        wl.parse_shape("K=24")
    # every convolution preset but the RGB stem (C=3), with one AVX-512 register of channels per block
    assert set(wl.presets) == set(get_workload("conv2d_nchw").presets) - {"resnet-stem-7x7"}
    assert all(p["ic"] == p["oc"] == 16 for p in wl.presets.values())


# ---- counts ------------------------------------------------------------------------------------------------
def test_flops_and_bytes():
    gemm = get_workload("gemm")
    assert gemm.flops({"M": 512, "N": 256, "K": 128}) == 2.0 * 512 * 256 * 128
    assert gemm.flops(None) == 2.0 * 512**3
    assert gemm.bytes_moved("M=4,N=8,K=2", "float32") == 4 * (4 * 2 + 2 * 8 + 4 * 8)
    assert gemm.bytes_moved("M=4,N=8,K=2", "float16") == 2 * (4 * 2 + 2 * 8 + 4 * 8)
    conv = get_workload("conv2d_nchw")
    s = conv.parse_shape("resnet-3x3-56")
    assert conv.flops(s) == 2.0 * 1 * 64 * 56 * 56 * 64 * 3 * 3
    assert get_workload("conv2d_nhwc").flops(s) == conv.flops(s)
    stem = conv.parse_shape("resnet-stem-7x7")
    assert conv.output_shape(stem) == (1, 64, 112, 112)
    assert conv.flops(stem) == 2.0 * 64 * 112 * 112 * 3 * 7 * 7
    dw = get_workload("depthwise_conv2d")
    assert dw.flops("N=1,C=8,H=10,W=10,R=3,S=3,stride=1,pad=1,multiplier=2") == 2.0 * 16 * 10 * 10 * 9
    assert get_workload("batch_matmul").flops("B=2,M=3,N=4,K=5") == 2.0 * 2 * 3 * 4 * 5
    assert get_workload("dense_bias").flops("M=2,N=3,K=4,relu=1") == 2.0 * 24 + 2 * 6


def test_make_inputs_deterministic():
    wl = get_workload("conv2d_nchw")
    a = wl.make_inputs(SMALL["conv2d_nchw"], "float32", seed=3)
    b = wl.make_inputs(SMALL["conv2d_nchw"], "float32", seed=3)
    c = wl.make_inputs(SMALL["conv2d_nchw"], "float32", seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    for x in a:
        assert x.dtype == np.float32 and x.flags.c_contiguous
        assert x.min() >= -1.0 and x.max() < 1.0
    assert wl.make_inputs(SMALL["conv2d_nchw"], "float16")[0].dtype == np.float16


# ---- parse_shape / check_dtype -----------------------------------------------------------------------------
def test_parse_shape_forms():
    wl = get_workload("gemm")
    assert wl.parse_shape(None) == {"M": 512, "N": 512, "K": 512}
    assert wl.parse_shape("") == {"M": 512, "N": 512, "K": 512}
    assert wl.parse_shape(" M = 64 , K=8") == {"M": 64, "N": 512, "K": 8}
    assert wl.parse_shape({"N": 7, "K": "9"}) == {"M": 512, "N": 7, "K": 9}
    assert wl.parse_shape("square-128") == {"M": 128, "N": 128, "K": 128}


@pytest.mark.parametrize(
    "name, spec, words",
    [
        ("gemm", "Q=4", ["'Q'", "unknown", "M, N, K"]),
        ("gemm", {"Q": 4}, ["'Q'", "M, N, K"]),
        ("gemm", "M=abc", ["'M'", "integer", "abc"]),
        ("gemm", "M=1.5", ["'M'", "integer"]),
        ("gemm", {"M": True}, ["'M'", "integer"]),
        ("gemm", "M=0", ["'M'", "at least 1", "0"]),
        ("gemm", "K=-3", ["'K'", "at least 1"]),
        ("gemm", "M512", ["M512", "NAME=VALUE"]),
        ("gemm", "M=1,M=2", ["'M'", "twice"]),
        ("conv2d_nchw", "pad=-1", ["'pad'", "at least 0"]),
        ("conv2d_nchw", "H=3,W=3,R=7,S=7,pad=1", ["kernel", "padded input", "empty"]),
        ("conv2d_nhwc", "H=5,W=5,R=3,S=3,pad=0,dilation=3", ["kernel", "dilation 3"]),
        ("depthwise_conv2d", "multiplier=0", ["'multiplier'", "at least 1"]),
        ("depthwise_conv2d", "H=2,R=5,pad=1", ["kernel", "padded input"]),
        ("dense_bias", "relu=2", ["'relu'", "0 or 1"]),
    ],
)
def test_parse_shape_errors(name, spec, words):
    with pytest.raises(WorkloadError) as err:
        get_workload(name).parse_shape(spec)
    msg = str(err.value)
    assert msg.startswith(name + ":")
    assert "\n" not in msg
    for w in words:
        assert w in msg


def test_check_dtype():
    wl = get_workload("gemm")
    assert wl.check_dtype("float64") == "float64"
    assert wl.check_dtype(None) == "float32"
    with pytest.raises(WorkloadError, match=r"'int4'.*float32, float64, float16"):
        wl.check_dtype("int4")
    with pytest.raises(WorkloadError, match="dtype"):
        wl.tensors(None, "bfloat17")


# ---- custom workloads --------------------------------------------------------------------------------------
def test_custom_example_builds_and_matches():
    wl = load_custom_workload(EXAMPLE)
    assert wl.name == "custom" and wl.main_block == "B"
    assert wl.param_names == ("M", "N") and wl.dtypes == ("float32",)
    s = wl.parse_shape("M=24,N=40")
    got, ref, inputs = run_tvm(wl, s, "float32")
    np.testing.assert_allclose(ref, (inputs[0].astype("float64") ** 2).sum(axis=1), rtol=1e-6)
    rtol, atol = wl.tolerance("float32", s)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)
    assert wl.flops(s) == 2.0 * 24 * 40
    assert wl.input_shapes(s) == [(24, 40)] and wl.output_shape(s) == (24,)
    assert get_workload("custom", EXAMPLE).to_json()["params"][0] == {
        "name": "M",
        "default": 256,
        "minimum": 1,
        "doc": "",
    }
    with pytest.raises(WorkloadError, match="'X'.*M, N"):
        wl.parse_shape("X=3")


def test_custom_flops_estimate_without_flops_function():
    src = example_edited("def flops(M, N):\n    return 2.0 * M * N\n", "")
    wl = load_custom_workload(src, name="rowsq")
    assert wl.name == "rowsq"
    assert wl.flops("M=10,N=7") == 2.0 * 10 * 7
    no_reduce = src.replace("te.sum(A[i, k] * A[i, k], axis=k)", "A[i, 0] * 2").replace(
        '    k = te.reduce_axis((0, N), name="k")\n', ""
    )
    assert load_custom_workload(no_reduce).flops(None) == 0.0


def test_custom_syntax_error_names_line():
    bad = example_edited("def reference(A, **shape):", "def reference(A, **shape)")
    with pytest.raises(WorkloadError, match=f"line {example_line('def reference(A, **shape):')}") as err:
        load_custom_workload(bad)
    assert "syntax" in str(err.value)


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda s: s.replace("def compute(", "def compute_it("), ["compute()"]),
        (lambda s: s.replace("def reference(", "def ref("), ["reference()"]),
        (lambda s: s.replace('PARAMS = {"M": 256, "N": 256}', ""), ["PARAMS"]),
        (lambda s: s.replace('"N": 256}', '"N": 0}'), ["PARAMS['N']", "positive"]),
        (lambda s: s.replace('DTYPES = ["float32"]', 'DTYPES = ["float8"]'), ["float8"]),
        (
            lambda s: s.replace("    return [A, B]", "    return [A, B, C_missing]"),
            ["compute()", "NameError", f"line {example_line('    return [A, B]')}"],
        ),
        (lambda s: s.replace("    return [A, B]", "    return B"), ["list"]),
        (lambda s: s.replace("    return [A, B]", "    return [B, A]"), ["'B'"]),
        (lambda s: s.replace("def compute(M, N, dtype):", "def compute(M, dtype):"), ["M, N, dtype"]),
        (lambda s: s + "\nraise RuntimeError('boom')\n", ["boom", "RuntimeError"]),
    ],
)
def test_custom_errors(edit, words):
    edited = edit(EXAMPLE)
    assert edited != EXAMPLE
    with pytest.raises(WorkloadError) as err:
        load_custom_workload(edited)
    msg = str(err.value)
    assert msg.startswith("custom:")
    for w in words:
        assert w in msg


def test_custom_reference_errors_are_workload_errors():
    wl = load_custom_workload(example_edited("return (A * A).sum(axis=1)", "return A"))
    with pytest.raises(WorkloadError, match="shape"):
        wl.reference(wl.make_inputs("M=4,N=3"), "M=4,N=3")
    wl = load_custom_workload(example_edited("return (A * A).sum(axis=1)", "return 1 / 0"))
    with pytest.raises(WorkloadError, match="ZeroDivisionError"):
        wl.reference(wl.make_inputs("M=4,N=3"), "M=4,N=3")


# ---- mixed precision (tensor cores' float16 inputs, float32 accumulator) --------------------------------------
@pytest.mark.parametrize("name", ["gemm", "batch_matmul", "conv2d_nchw", "conv2d_nhwc", "conv2d_nchwc"])
def test_mixed_float16_float32_sums_in_float32(name):
    wl = get_workload(name)
    shape = wl.parse_shape(SMALL[name])
    dtype = "float16:float32"
    pf = wl.prim_func(shape, dtype)
    ex = tvm.compile(tvm.IRModule({"main": pf}), TARGET)
    inputs = wl.make_inputs(shape, dtype)
    assert all(x.dtype == np.float16 for x in inputs)
    out = tvm.runtime.tensor(wl.make_output(shape, dtype), tvm.cpu(0))
    assert out.dtype == "float32"
    ex["main"](*[tvm.runtime.tensor(a, tvm.cpu(0)) for a in inputs], out)
    ref = wl.reference(inputs, shape, dtype)
    assert ref.dtype == np.float32
    rtol, atol = wl.tolerance(dtype, shape)
    assert (rtol, atol) == wl.tolerance("float32", shape)  # the inputs are exact: only the sum rounds
    np.testing.assert_allclose(out.numpy(), ref, rtol=rtol, atol=atol)
    # float16 inputs, a float32 output: 2 + 4 bytes per element
    n_in = sum(int(np.prod(s)) for s in wl.input_shapes(shape))
    assert wl.bytes_moved(shape, dtype) == 2 * n_in + 4 * int(np.prod(wl.output_shape(shape)))


def test_the_mixed_dtype_is_only_where_the_reduction_is_a_matmul():
    assert "float16:float32" in get_workload("gemm").dtypes
    with pytest.raises(WorkloadError, match="float16:float32"):
        get_workload("depthwise_conv2d").check_dtype("float16:float32")
    # a plain dtype's TIR stays what it was (imported MetaSchedule runs are recognised by it)
    assert "cast" not in get_workload("gemm").prim_func("M=8,N=8,K=8", "float16").script().lower()

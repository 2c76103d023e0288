"""The operators tunelab can tune: TE definitions, shapes, NumPy references, FLOP and byte counts.

Each operator is a :class:`Workload` instance in the :data:`WORKLOADS` registry, keyed by its CLI name:

==================  ==========================================  =======================  ============
name                what it computes                            parameters               main block
==================  ==========================================  =======================  ============
gemm                ``C[i,j] = sum_k A[i,k] * B[k,j]``            M, N, K                  ``C``
dense_bias          ``max(A @ B^T + bias, 0)`` (B is (N, K))      M, N, K, relu (0/1)      ``C``
batch_matmul        ``C[b,i,j] = sum_k A[b,i,k] * B[b,k,j]``      B, M, N, K               ``C``
conv2d_nchw         NCHW input, KCRS weight, NKPQ output          N C H W K R S stride     ``conv``
                                                                  pad dilation
conv2d_nhwc         NHWC input, RSCK weight, NPQK output          (same as conv2d_nchw)    ``conv``
conv2d_nchwc        channel-blocked: NCHW[ic]c input,             (same as conv2d_nchw)    ``conv``
                    OIHW[ic]i[oc]o weight, NKPQ[oc]k output       ic oc
depthwise_conv2d    NCHW input, (C, multiplier, R, S) weight,     N C H W R S stride pad   ``conv``
                    output channels C * multiplier                multiplier
==================  ==========================================  =======================  ============

A workload called ``custom`` is built from a person's own file; see :mod:`tunelab.core.workloads.custom` for its format
(``get_workload("custom", source)`` or ``load_custom_workload(source)``).

Conventions shared by every workload:

* ``tensors(shape, dtype)`` returns ``[inputs..., output]``; inputs are placeholders named ``A``, ``B`` (then
  ``bias`` for dense_bias). The main reduction is a ``te.compute`` whose name (the TIR block name, also
  ``Workload.main_block``) is listed above; the convolutions pad in a separate block named ``pad`` (always
  present, a plain copy when pad=0), dense_bias adds the bias in a block ``bias_add`` and, when relu=1, clamps in a
  block ``relu``.
* Reductions accumulate in the input dtype, except for the mixed dtype ``float16:float32`` of GEMM, batch matmul
  and the convolutions (float16 inputs summed in float32 into a float32 output, as tensor cores compute).
  ``reference`` computes in float64 and casts to the workload's output dtype, so it is the "true" answer;
  ``tolerance(dtype, shape)`` allows for the rounding of a reduction of that length.
* A *shape* is a ``dict[str, int]`` holding every parameter; ``parse_shape`` turns ``"M=512,N=256"``, a dict, a
  preset name or ``None`` into one, filling defaults and checking it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm import te

from tunelab.core.errors import WorkloadError, shown
from tunelab.core.workloads.base import MATMUL_DTYPES, Param, Workload, mul_acc, split_dtype
from tunelab.core.workloads.tir import TIR_NAME

__all__ = ["WORKLOADS", "get_workload", "list_workloads", "load_custom_workload"]


class Gemm(Workload):
    name = "gemm"
    title = "GEMM  C = A @ B"
    description = "Matrix multiply C[i, j] = sum_k A[i, k] * B[k, j]; A is M x K, B is K x N, C is M x N."
    params = (
        Param("M", 512, 1, "rows of A and C"),
        Param("N", 512, 1, "columns of B and C"),
        Param("K", 512, 1, "reduction length (columns of A, rows of B)"),
    )
    presets = {
        "square-128": {"M": 128, "N": 128, "K": 128},
        "square-256": {"M": 256, "N": 256, "K": 256},
        "square-512": {"M": 512, "N": 512, "K": 512},
        "square-1024": {"M": 1024, "N": 1024, "K": 1024},
        "square-2048": {"M": 2048, "N": 2048, "K": 2048},
        "bert-base-qkv": {"M": 512, "N": 2304, "K": 768},
        "tall-skinny": {"M": 4096, "N": 64, "K": 1024},
    }
    dtypes = MATMUL_DTYPES
    main_block = "C"

    def _tensors(self, s, dtype):
        M, N, K = s["M"], s["N"], s["K"]
        A = te.placeholder((M, K), split_dtype(dtype)[0], name="A")
        B = te.placeholder((K, N), split_dtype(dtype)[0], name="B")
        k = te.reduce_axis((0, K), name="k")
        C = te.compute((M, N), lambda i, j: te.sum(mul_acc(A[i, k], B[k, j], dtype), axis=k), name="C")
        return [A, B, C]

    def _input_shapes(self, s):
        return [(s["M"], s["K"]), (s["K"], s["N"])]

    def _output_shape(self, s):
        return (s["M"], s["N"])

    def _flops(self, s):
        return 2.0 * s["M"] * s["N"] * s["K"]

    def _reduction_length(self, s):
        return s["K"]

    def _reference(self, inputs, s):
        a, b = inputs
        return a @ b


class DenseBias(Workload):
    name = "dense_bias"
    title = "Dense + bias (+ ReLU)  out = relu(A @ B^T + bias)"
    description = (
        "Fully connected layer: C = A @ B^T (A is M x K data, B is N x K weight), then bias[N] added to every row, "
        "then max(., 0) when relu=1. The matmul is block 'C'; the epilogue is the injective blocks 'bias_add' "
        "and 'relu'."
    )
    params = (
        Param("M", 512, 1, "rows (batch x tokens)"),
        Param("N", 512, 1, "output features"),
        Param("K", 512, 1, "input features (reduction length)"),
        Param("relu", 1, 0, "1: apply ReLU after the bias, 0: no activation"),
    )
    presets = {
        "square-512": {"M": 512, "N": 512, "K": 512, "relu": 1},
        "bert-base-ffn1": {"M": 512, "N": 3072, "K": 768, "relu": 1},
        "bert-base-ffn2": {"M": 512, "N": 768, "K": 3072, "relu": 0},
        "mlp-batch-64": {"M": 64, "N": 1024, "K": 1024, "relu": 1},
    }
    main_block = "C"

    def _check_shape(self, s):
        if s["relu"] not in (0, 1):
            raise WorkloadError(f"{self.name}: shape parameter 'relu' must be 0 or 1, got {s['relu']}")

    def _tensors(self, s, dtype):
        M, N, K = s["M"], s["N"], s["K"]
        A = te.placeholder((M, K), dtype, name="A")
        B = te.placeholder((N, K), dtype, name="B")
        bias = te.placeholder((N,), dtype, name="bias")
        k = te.reduce_axis((0, K), name="k")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
        out = te.compute((M, N), lambda i, j: C[i, j] + bias[j], name="bias_add")
        if s["relu"]:
            out = te.compute((M, N), lambda i, j: te.max(out[i, j], tvm.tirx.const(0, dtype)), name="relu")
        return [A, B, bias, out]

    def _input_shapes(self, s):
        return [(s["M"], s["K"]), (s["N"], s["K"]), (s["N"],)]

    def _output_shape(self, s):
        return (s["M"], s["N"])

    def _flops(self, s):
        mn = s["M"] * s["N"]
        return 2.0 * mn * s["K"] + mn * (1 + s["relu"])

    def _reduction_length(self, s):
        return s["K"] + 1

    def _reference(self, inputs, s):
        a, w, bias = inputs
        out = a @ w.T + bias[None, :]
        return np.maximum(out, 0.0) if s["relu"] else out


class BatchMatmul(Workload):
    name = "batch_matmul"
    title = "Batch matmul  C[b] = A[b] @ B[b]"
    description = (
        "Batched matrix multiply C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]; A is B x M x K, B is B x K x N."
    )
    params = (
        Param("B", 12, 1, "batch size"),
        Param("M", 128, 1, "rows of each A and C"),
        Param("N", 128, 1, "columns of each B and C"),
        Param("K", 64, 1, "reduction length"),
    )
    presets = {
        "bert-base-attn-qk": {"B": 12, "M": 128, "N": 128, "K": 64},
        "bert-base-attn-v": {"B": 12, "M": 128, "N": 64, "K": 128},
        "batch-16-256": {"B": 16, "M": 256, "N": 256, "K": 256},
    }
    dtypes = MATMUL_DTYPES
    main_block = "C"

    def _tensors(self, s, dtype):
        Bn, M, N, K = s["B"], s["M"], s["N"], s["K"]
        A = te.placeholder((Bn, M, K), split_dtype(dtype)[0], name="A")
        B = te.placeholder((Bn, K, N), split_dtype(dtype)[0], name="B")
        k = te.reduce_axis((0, K), name="k")
        C = te.compute(
            (Bn, M, N), lambda b, i, j: te.sum(mul_acc(A[b, i, k], B[b, k, j], dtype), axis=k), name="C"
        )
        return [A, B, C]

    def _input_shapes(self, s):
        return [(s["B"], s["M"], s["K"]), (s["B"], s["K"], s["N"])]

    def _output_shape(self, s):
        return (s["B"], s["M"], s["N"])

    def _flops(self, s):
        return 2.0 * s["B"] * s["M"] * s["N"] * s["K"]

    def _reduction_length(self, s):
        return s["K"]

    def _reference(self, inputs, s):
        a, b = inputs
        return np.matmul(a, b)


def _conv_out(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _windows_nchw(
    x: np.ndarray, R: int, S: int, stride: int, pad: int, dilation: int, P: int, Q: int
) -> np.ndarray:
    """(N, C, H, W) -> view (N, C, P, Q, R, S) of the padded input's receptive fields."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    eh, ew = dilation * (R - 1) + 1, dilation * (S - 1) + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    win = win[:, :, :, :, ::dilation, ::dilation]
    return win[:, :, : (P - 1) * stride + 1 : stride, : (Q - 1) * stride + 1 : stride]


def _pad_block(A: te.Tensor, pad: int, layout: str) -> te.Tensor:
    """The block "pad": A zero-padded by ``pad`` on both sides of H and W (a plain copy when pad=0)."""
    if layout == "NCHWc":
        return _pad_block_blocked(A, pad)
    N, D1, D2, D3 = (int(x) for x in A.shape)
    # One signature for both layouts' index functions (their axes differ in order, not in number).
    at: Callable[..., Any]
    body: Callable[..., Any]
    if layout == "NCHW":
        H, W = D2, D3
        shape = (N, D1, H + 2 * pad, W + 2 * pad)

        def at(n, c, yy, xx):
            return A[n, c, yy - pad, xx - pad]

        def body(n, c, yy, xx):
            inside = tvm.tirx.all(yy >= pad, yy < H + pad, xx >= pad, xx < W + pad)
            return tvm.tirx.if_then_else(inside, at(n, c, yy, xx), tvm.tirx.const(0, A.dtype))
    else:  # NHWC
        H, W = D1, D2
        shape = (N, H + 2 * pad, W + 2 * pad, D3)

        def at(n, yy, xx, c):
            return A[n, yy - pad, xx - pad, c]

        def body(n, yy, xx, c):
            inside = tvm.tirx.all(yy >= pad, yy < H + pad, xx >= pad, xx < W + pad)
            return tvm.tirx.if_then_else(inside, at(n, yy, xx, c), tvm.tirx.const(0, A.dtype))

    return te.compute(shape, body if pad else at, name="pad")


def _pad_block_blocked(A: te.Tensor, pad: int) -> te.Tensor:
    """The block "pad" of a channel-blocked (N, C/ic, H, W, ic) input: zero-padded on H and W."""
    N, CB, H, W, IC = (int(x) for x in A.shape)

    def at(n, cb, yy, xx, ci):
        return A[n, cb, yy - pad, xx - pad, ci]

    def body(n, cb, yy, xx, ci):
        inside = tvm.tirx.all(yy >= pad, yy < H + pad, xx >= pad, xx < W + pad)
        return tvm.tirx.if_then_else(inside, at(n, cb, yy, xx, ci), tvm.tirx.const(0, A.dtype))

    return te.compute((N, CB, H + 2 * pad, W + 2 * pad, IC), body if pad else at, name="pad")


_CONV_PARAMS = (
    Param("N", 1, 1, "batch size"),
    Param("C", 64, 1, "input channels"),
    Param("H", 56, 1, "input height"),
    Param("W", 56, 1, "input width"),
    Param("K", 64, 1, "output channels (filters)"),
    Param("R", 3, 1, "kernel height"),
    Param("S", 3, 1, "kernel width"),
    Param("stride", 1, 1, "stride (both directions)"),
    Param("pad", 1, 0, "zero padding on each side (both directions)"),
    Param("dilation", 1, 1, "kernel dilation (both directions)"),
)

_CONV_PRESETS = {
    "resnet-stem-7x7": {
        "N": 1,
        "C": 3,
        "H": 224,
        "W": 224,
        "K": 64,
        "R": 7,
        "S": 7,
        "stride": 2,
        "pad": 3,
        "dilation": 1,
    },
    "resnet-3x3-56": {
        "N": 1,
        "C": 64,
        "H": 56,
        "W": 56,
        "K": 64,
        "R": 3,
        "S": 3,
        "stride": 1,
        "pad": 1,
        "dilation": 1,
    },
    "resnet-3x3-28": {
        "N": 1,
        "C": 128,
        "H": 28,
        "W": 28,
        "K": 128,
        "R": 3,
        "S": 3,
        "stride": 1,
        "pad": 1,
        "dilation": 1,
    },
    "resnet-3x3-14": {
        "N": 1,
        "C": 256,
        "H": 14,
        "W": 14,
        "K": 256,
        "R": 3,
        "S": 3,
        "stride": 1,
        "pad": 1,
        "dilation": 1,
    },
    "resnet-3x3-7": {
        "N": 1,
        "C": 512,
        "H": 7,
        "W": 7,
        "K": 512,
        "R": 3,
        "S": 3,
        "stride": 1,
        "pad": 1,
        "dilation": 1,
    },
    "resnet-1x1-56": {
        "N": 1,
        "C": 64,
        "H": 56,
        "W": 56,
        "K": 256,
        "R": 1,
        "S": 1,
        "stride": 1,
        "pad": 0,
        "dilation": 1,
    },
    "resnet-3x3-56-s2": {
        "N": 1,
        "C": 128,
        "H": 56,
        "W": 56,
        "K": 128,
        "R": 3,
        "S": 3,
        "stride": 2,
        "pad": 1,
        "dilation": 1,
    },
}


class _Conv2dBase(Workload):
    params: tuple[Param, ...] = _CONV_PARAMS
    presets = _CONV_PRESETS
    dtypes = MATMUL_DTYPES
    main_block = "conv"

    def _check_shape(self, s):
        _check_conv_window(self.name, s)

    def _pq(self, s) -> tuple[int, int]:
        return (
            _conv_out(s["H"], s["R"], s["stride"], s["pad"], s["dilation"]),
            _conv_out(s["W"], s["S"], s["stride"], s["pad"], s["dilation"]),
        )

    def _flops(self, s):
        P, Q = self._pq(s)
        return 2.0 * s["N"] * s["K"] * P * Q * s["C"] * s["R"] * s["S"]

    def _reduction_length(self, s):
        return s["C"] * s["R"] * s["S"]


def _check_conv_window(name: str, s: dict[str, int]) -> None:
    d = s.get("dilation", 1)
    for size_key, kernel_key in (("H", "R"), ("W", "S")):
        size, kernel = s[size_key], s[kernel_key]
        span = d * (kernel - 1) + 1
        if size + 2 * s["pad"] < span:
            raise WorkloadError(
                f"{name}: the kernel ({kernel_key}={kernel}, dilation {d}, spanning {span}) is larger than the "
                f"padded input ({size_key}={size} + 2*pad={2 * s['pad']}), so the output would be empty; "
                f"use a smaller kernel or more padding"
            )


class Conv2dNCHW(_Conv2dBase):
    name = "conv2d_nchw"
    title = "Conv2D NCHW  out[n,f,y,x] = sum A_pad * B"
    description = (
        "2-D convolution: input A is N x C x H x W, weight B is K x C x R x S, output is N x K x P x Q. "
        "Zero padding is the separate block 'pad'; the reduction over (rc, ry, rx) is block 'conv'."
    )

    def _tensors(self, s, dtype):
        N, C, H, W, K, R, S = (s[x] for x in "NCHWKRS")
        stride, pad, dil = s["stride"], s["pad"], s["dilation"]
        P, Q = self._pq(s)
        A = te.placeholder((N, C, H, W), split_dtype(dtype)[0], name="A")
        B = te.placeholder((K, C, R, S), split_dtype(dtype)[0], name="B")
        A_pad = _pad_block(A, pad, "NCHW")
        rc = te.reduce_axis((0, C), name="rc")
        ry = te.reduce_axis((0, R), name="ry")
        rx = te.reduce_axis((0, S), name="rx")
        out = te.compute(
            (N, K, P, Q),
            lambda n, f, y, x: te.sum(
                mul_acc(A_pad[n, rc, y * stride + ry * dil, x * stride + rx * dil], B[f, rc, ry, rx], dtype),
                axis=[rc, ry, rx],
            ),
            name="conv",
        )
        return [A, B, out]

    def _input_shapes(self, s):
        return [(s["N"], s["C"], s["H"], s["W"]), (s["K"], s["C"], s["R"], s["S"])]

    def _output_shape(self, s):
        P, Q = self._pq(s)
        return (s["N"], s["K"], P, Q)

    def _reference(self, inputs, s):
        a, w = inputs
        P, Q = self._pq(s)
        win = _windows_nchw(a, s["R"], s["S"], s["stride"], s["pad"], s["dilation"], P, Q)  # N C P Q R S
        return np.einsum("ncpqrs,kcrs->nkpq", win, w, optimize=True)


class Conv2dNHWC(_Conv2dBase):
    name = "conv2d_nhwc"
    title = "Conv2D NHWC  out[n,y,x,f] = sum A_pad * B"
    description = (
        "2-D convolution: input A is N x H x W x C, weight B is R x S x C x K, output is N x P x Q x K. "
        "Zero padding is the separate block 'pad'; the reduction over (ry, rx, rc) is block 'conv'."
    )

    def _tensors(self, s, dtype):
        N, C, H, W, K, R, S = (s[x] for x in "NCHWKRS")
        stride, pad, dil = s["stride"], s["pad"], s["dilation"]
        P, Q = self._pq(s)
        A = te.placeholder((N, H, W, C), split_dtype(dtype)[0], name="A")
        B = te.placeholder((R, S, C, K), split_dtype(dtype)[0], name="B")
        A_pad = _pad_block(A, pad, "NHWC")
        ry = te.reduce_axis((0, R), name="ry")
        rx = te.reduce_axis((0, S), name="rx")
        rc = te.reduce_axis((0, C), name="rc")
        out = te.compute(
            (N, P, Q, K),
            lambda n, y, x, f: te.sum(
                mul_acc(A_pad[n, y * stride + ry * dil, x * stride + rx * dil, rc], B[ry, rx, rc, f], dtype),
                axis=[ry, rx, rc],
            ),
            name="conv",
        )
        return [A, B, out]

    def _input_shapes(self, s):
        return [(s["N"], s["H"], s["W"], s["C"]), (s["R"], s["S"], s["C"], s["K"])]

    def _output_shape(self, s):
        P, Q = self._pq(s)
        return (s["N"], P, Q, s["K"])

    def _reference(self, inputs, s):
        a, w = inputs
        P, Q = self._pq(s)
        win = _windows_nchw(
            a.transpose(0, 3, 1, 2), s["R"], s["S"], s["stride"], s["pad"], s["dilation"], P, Q
        )
        return np.einsum("ncpqrs,rsck->npqk", win, w, optimize=True)


class Conv2dNCHWc(_Conv2dBase):
    """The layout x86 convolutions run fastest in (TVM's ``conv2d_NCHWc``, oneDNN's ``nChw16c``): channels
    split into blocks of ``ic`` (input) and ``oc`` (output) that sit innermost, so one vector register holds
    one block of output channels and the weight's innermost axis feeds it. A network keeps its activations in
    this layout from layer to layer (TVM's AlterOpLayout, PyTorch's mkldnn tensors), so no layer pays a
    reorder; tunelab compares it with oneDNN's convolution on input and weight already in oneDNN's layout."""

    name = "conv2d_nchwc"
    title = "Conv2D NCHWc  out[n,fo,y,x,fi] = sum A_pad * B"
    description = (
        "2-D convolution on channel-blocked tensors: input A is N x C/ic x H x W x ic, weight B is "
        "K/oc x C/ic x R x S x ic x oc, output is N x K/oc x P x Q x oc (channel c of NCHW is block c // ic, "
        "lane c % ic). Zero padding is the separate block 'pad'; the reduction over (rco, ry, rx, rci) is "
        "block 'conv'. ic must divide C and oc must divide K."
    )
    params = (
        *_CONV_PARAMS,
        Param("ic", 16, 1, "input channels per block (divides C)"),
        Param("oc", 16, 1, "output channels per block (divides K)"),
    )
    presets = {
        name: {**shape, "ic": 16, "oc": 16} for name, shape in _CONV_PRESETS.items() if shape["C"] % 16 == 0
    }

    def _check_shape(self, s):
        for channels, block in (("C", "ic"), ("K", "oc")):
            if s[channels] % s[block]:
                raise WorkloadError(
                    f"{self.name}: {block}={s[block]} does not divide {channels}={s[channels]}; the channels are "
                    f"split into blocks of {block}, so choose a divisor of {channels} (16 for one AVX-512 "
                    f"register of float32, 8 for AVX2)"
                )
        _check_conv_window(self.name, s)

    def _tensors(self, s, dtype):
        N, C, H, W, K, R, S = (s[x] for x in "NCHWKRS")
        ic, oc = s["ic"], s["oc"]
        stride, pad, dil = s["stride"], s["pad"], s["dilation"]
        P, Q = self._pq(s)
        A = te.placeholder((N, C // ic, H, W, ic), split_dtype(dtype)[0], name="A")
        B = te.placeholder((K // oc, C // ic, R, S, ic, oc), split_dtype(dtype)[0], name="B")
        A_pad = _pad_block(A, pad, "NCHWc")
        rco = te.reduce_axis((0, C // ic), name="rco")
        ry = te.reduce_axis((0, R), name="ry")
        rx = te.reduce_axis((0, S), name="rx")
        rci = te.reduce_axis((0, ic), name="rci")
        out = te.compute(
            (N, K // oc, P, Q, oc),
            lambda n, fo, y, x, fi: te.sum(
                mul_acc(
                    A_pad[n, rco, y * stride + ry * dil, x * stride + rx * dil, rci],
                    B[fo, rco, ry, rx, rci, fi],
                    dtype,
                ),
                axis=[rco, ry, rx, rci],
            ),
            name="conv",
        )
        return [A, B, out]

    def _input_shapes(self, s):
        N, C, H, W, K, R, S, ic, oc = (s[x] for x in ("N", "C", "H", "W", "K", "R", "S", "ic", "oc"))
        return [(N, C // ic, H, W, ic), (K // oc, C // ic, R, S, ic, oc)]

    def _output_shape(self, s):
        P, Q = self._pq(s)
        return (s["N"], s["K"] // s["oc"], P, Q, s["oc"])

    def _reference(self, inputs, s):
        a, w = (np.asarray(x) for x in inputs)
        nchw, kcrs = unblock_input(a), unblock_weight(w)
        P, Q = self._pq(s)
        win = _windows_nchw(nchw, s["R"], s["S"], s["stride"], s["pad"], s["dilation"], P, Q)  # N C P Q R S
        return block_output(np.einsum("ncpqrs,kcrs->nkpq", win, kcrs, optimize=True), s["oc"])


def unblock_input(a: np.ndarray) -> np.ndarray:
    """(N, C/ic, H, W, ic) -> (N, C, H, W): channel c = block * ic + lane."""
    n, cb, h, w, ic = a.shape
    return a.transpose(0, 1, 4, 2, 3).reshape(n, cb * ic, h, w)


def unblock_weight(b: np.ndarray) -> np.ndarray:
    """(K/oc, C/ic, R, S, ic, oc) -> (K, C, R, S)."""
    kb, cb, r, s, ic, oc = b.shape
    return b.transpose(0, 5, 1, 4, 2, 3).reshape(kb * oc, cb * ic, r, s)


def block_output(out: np.ndarray, oc: int) -> np.ndarray:
    """(N, K, P, Q) -> (N, K/oc, P, Q, oc)."""
    n, k, p, q = out.shape
    return out.reshape(n, k // oc, oc, p, q).transpose(0, 1, 3, 4, 2)


class DepthwiseConv2d(Workload):
    name = "depthwise_conv2d"
    title = "Depthwise Conv2D NCHW  out[n,f,y,x] = sum A_pad[n,f/m] * B"
    description = (
        "Depthwise 2-D convolution: input A is N x C x H x W, weight B is C x multiplier x R x S, output is "
        "N x (C*multiplier) x P x Q; output channel f reads input channel f // multiplier. Zero padding is the "
        "separate block 'pad'; the reduction over (ry, rx) is block 'conv'."
    )
    params = (
        Param("N", 1, 1, "batch size"),
        Param("C", 64, 1, "input channels"),
        Param("H", 56, 1, "input height"),
        Param("W", 56, 1, "input width"),
        Param("R", 3, 1, "kernel height"),
        Param("S", 3, 1, "kernel width"),
        Param("stride", 1, 1, "stride (both directions)"),
        Param("pad", 1, 0, "zero padding on each side (both directions)"),
        Param("multiplier", 1, 1, "output channels per input channel"),
    )
    presets = {
        "mobilenet-3x3-112": {
            "N": 1,
            "C": 32,
            "H": 112,
            "W": 112,
            "R": 3,
            "S": 3,
            "stride": 1,
            "pad": 1,
            "multiplier": 1,
        },
        "mobilenet-3x3-112-s2": {
            "N": 1,
            "C": 96,
            "H": 112,
            "W": 112,
            "R": 3,
            "S": 3,
            "stride": 2,
            "pad": 1,
            "multiplier": 1,
        },
        "mobilenet-3x3-56": {
            "N": 1,
            "C": 144,
            "H": 56,
            "W": 56,
            "R": 3,
            "S": 3,
            "stride": 1,
            "pad": 1,
            "multiplier": 1,
        },
        "mobilenet-3x3-28": {
            "N": 1,
            "C": 192,
            "H": 28,
            "W": 28,
            "R": 3,
            "S": 3,
            "stride": 1,
            "pad": 1,
            "multiplier": 1,
        },
        "mobilenet-3x3-14": {
            "N": 1,
            "C": 576,
            "H": 14,
            "W": 14,
            "R": 3,
            "S": 3,
            "stride": 1,
            "pad": 1,
            "multiplier": 1,
        },
        "efficientnet-5x5-28": {
            "N": 1,
            "C": 240,
            "H": 28,
            "W": 28,
            "R": 5,
            "S": 5,
            "stride": 1,
            "pad": 2,
            "multiplier": 1,
        },
    }
    main_block = "conv"

    def _check_shape(self, s):
        _check_conv_window(self.name, s)

    def _pq(self, s) -> tuple[int, int]:
        return (
            _conv_out(s["H"], s["R"], s["stride"], s["pad"], 1),
            _conv_out(s["W"], s["S"], s["stride"], s["pad"], 1),
        )

    def _tensors(self, s, dtype):
        N, C, H, W, R, S = (s[x] for x in "NCHWRS")
        stride, pad, m = s["stride"], s["pad"], s["multiplier"]
        P, Q = self._pq(s)
        A = te.placeholder((N, C, H, W), dtype, name="A")
        B = te.placeholder((C, m, R, S), dtype, name="B")
        A_pad = _pad_block(A, pad, "NCHW")
        ry = te.reduce_axis((0, R), name="ry")
        rx = te.reduce_axis((0, S), name="rx")
        if m == 1:

            def body(n, f, y, x):
                return te.sum(A_pad[n, f, y * stride + ry, x * stride + rx] * B[f, 0, ry, rx], axis=[ry, rx])
        else:

            def body(n, f, y, x):
                return te.sum(
                    A_pad[n, te.indexdiv(f, m), y * stride + ry, x * stride + rx]
                    * B[te.indexdiv(f, m), te.indexmod(f, m), ry, rx],
                    axis=[ry, rx],
                )

        out = te.compute((N, C * m, P, Q), body, name="conv")
        return [A, B, out]

    def _input_shapes(self, s):
        return [(s["N"], s["C"], s["H"], s["W"]), (s["C"], s["multiplier"], s["R"], s["S"])]

    def _output_shape(self, s):
        P, Q = self._pq(s)
        return (s["N"], s["C"] * s["multiplier"], P, Q)

    def _flops(self, s):
        P, Q = self._pq(s)
        return 2.0 * s["N"] * s["C"] * s["multiplier"] * P * Q * s["R"] * s["S"]

    def _reduction_length(self, s):
        return s["R"] * s["S"]

    def _reference(self, inputs, s):
        a, w = inputs
        P, Q = self._pq(s)
        win = _windows_nchw(a, s["R"], s["S"], s["stride"], s["pad"], 1, P, Q)  # N C P Q R S
        out = np.einsum("ncpqrs,cmrs->ncmpq", win, w, optimize=True)  # output channel f = c * m + j
        return out.reshape(s["N"], s["C"] * s["multiplier"], P, Q)


# ======================================================================================================
# Registry
# ======================================================================================================
WORKLOADS: dict[str, Workload] = {
    wl.name: wl
    for wl in (
        Gemm(),
        DenseBias(),
        BatchMatmul(),
        Conv2dNCHW(),
        Conv2dNHWC(),
        Conv2dNCHWc(),
        DepthwiseConv2d(),
    )
}

CUSTOM_NAME = "custom"


def list_workloads() -> list[Workload]:
    """The built-in workloads in registry order (``custom`` needs a file, so it is not listed)."""
    return list(WORKLOADS.values())


def get_workload(name: str, custom_source: str | None = None) -> Workload:
    """The workload called ``name``; ``"custom"`` is built from ``custom_source`` (the text of a workload file)."""
    key = str(name).strip()
    if key == CUSTOM_NAME:
        if custom_source is None:
            raise WorkloadError(
                "custom: a workload file is needed; give the text of a Python file that defines PARAMS, compute() "
                "and reference()"
            )
        return load_custom_workload(custom_source)
    if key == TIR_NAME:  # an imported PrimFunc the catalog does not know, kept as TVMScript
        if custom_source is None:
            raise WorkloadError("tir: the PrimFunc's TVMScript is needed (an imported session keeps it)")
        return _tir_workload(custom_source)
    wl = WORKLOADS.get(key)
    if wl is None:
        known = ", ".join([*WORKLOADS, CUSTOM_NAME])
        raise WorkloadError(f"unknown workload {shown(key)}; known workloads are {known}")
    return wl


@functools.lru_cache(maxsize=16)
def _tir_workload(source: str) -> Workload:
    from tunelab.core.workloads.tir import TIRWorkload

    return TIRWorkload(source)  # type: ignore[return-value]  # the Workload interface, duck-typed


def load_custom_workload(source: str, name: str = CUSTOM_NAME, *, vet: bool = True) -> Workload:
    """A workload built from the text of a custom workload file (format: :mod:`tunelab.core.workloads.custom`).

    The file is loaded in a time-limited child process first (``vet``; once per process and file), so a
    file that hangs or ends its process is a WorkloadError before it runs here; then it runs here once
    per process (the workload is kept for the same text and name)."""
    from tunelab.core.workloads.custom import CustomWorkload

    if not isinstance(source, str):
        return CustomWorkload(source, name=name, vet=vet)  # raises the type's message
    key = (source, name)
    wl = _CUSTOM_LOADED.get(key)
    if wl is None:
        wl = CustomWorkload(source, name=name, vet=vet)
        if len(_CUSTOM_LOADED) >= 8:
            _CUSTOM_LOADED.pop(next(iter(_CUSTOM_LOADED)))
        _CUSTOM_LOADED[key] = wl
    return wl


# Custom workloads loaded in this process (source, name) -> workload: the person's file runs here once.
_CUSTOM_LOADED: dict[tuple[str, str], Workload] = {}

"""The convolution workloads of the catalog: conv2d in NCHW, NHWC and channel-blocked NCHWc, and depthwise conv2d.

The three conv2d layouts compute the same sum and differ only in where each dimension sits: one
implementation (:class:`_Conv2dBase`) builds all three from where each layout puts each dimension.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
from tvm import te

from tunelab.core.errors import WorkloadError
from tunelab.core.workloads.base import MATMUL_DTYPES, Param, Workload, mul_acc, split_dtype


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


# The pad block's axis names in each input layout; H and W ("yy", "xx") always sit side by side.
_PAD_AXES = {
    "NCHW": ("n", "c", "yy", "xx"),
    "NHWC": ("n", "yy", "xx", "c"),
    "NCHWc": ("n", "cb", "yy", "xx", "ci"),
}


def _pad_block(A: te.Tensor, pad: int, layout: str) -> te.Tensor:
    """The block "pad": A zero-padded by ``pad`` on both sides of H and W (a plain copy when pad=0)."""
    names = _PAD_AXES[layout]
    h = names.index("yy")
    dims = [int(x) for x in A.shape]
    H, W = dims[h], dims[h + 1]
    shape = (*dims[:h], H + 2 * pad, W + 2 * pad, *dims[h + 2 :])

    def at(*idx: Any) -> Any:
        return A[(*idx[:h], idx[h] - pad, idx[h + 1] - pad, *idx[h + 2 :])]

    def body(*idx: Any) -> Any:
        yy, xx = idx[h], idx[h + 1]
        inside = tvm.tirx.all(yy >= pad, yy < H + pad, xx >= pad, xx < W + pad)
        return tvm.tirx.if_then_else(inside, at(*idx), tvm.tirx.const(0, A.dtype))

    return te.compute(shape, body if pad else at, name="pad", varargs_names=list(names))


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


def _square(C: int, HW: int, K: int, RS: int, stride: int, pad: int) -> dict[str, int]:
    """A conv2d preset of batch 1, square input and kernel, no dilation."""
    return {
        "N": 1,
        "C": C,
        "H": HW,
        "W": HW,
        "K": K,
        "R": RS,
        "S": RS,
        "stride": stride,
        "pad": pad,
        "dilation": 1,
    }


_CONV_PRESETS = {
    "resnet-stem-7x7": _square(3, 224, 64, 7, 2, 3),
    "resnet-3x3-56": _square(64, 56, 64, 3, 1, 1),
    "resnet-3x3-28": _square(128, 28, 128, 3, 1, 1),
    "resnet-3x3-14": _square(256, 14, 256, 3, 1, 1),
    "resnet-3x3-7": _square(512, 7, 512, 3, 1, 1),
    "resnet-1x1-56": _square(64, 56, 256, 1, 1, 0),
    "resnet-3x3-56-s2": _square(128, 56, 128, 3, 2, 1),
}


class _ConvBase(Workload):
    """What every convolution shares: the block names, the window check, the output size."""

    main_block = "conv"

    def _check_shape(self, s):
        _check_conv_window(self.name, s)

    def _pq(self, s) -> tuple[int, int]:
        d = s.get("dilation", 1)  # the depthwise convolution has no dilation
        return (
            _conv_out(s["H"], s["R"], s["stride"], s["pad"], d),
            _conv_out(s["W"], s["S"], s["stride"], s["pad"], d),
        )


# The compute's axis for each dimension a layout's tensors are made of (those starting with "r" are reduced;
# ``Y`` and ``X`` are the input row and column an output pixel reads): every layout names its axes alike.
_AXIS_OF_DIM = {
    "N": "n",
    "K": "f",
    "P": "y",
    "Q": "x",
    "H": "Y",
    "W": "X",
    "C": "rc",
    "R": "ry",
    "S": "rx",
    "K/oc": "fo",
    "oc": "fi",
    "C/ic": "rco",
    "ic": "rci",
}


def _axes(dims: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_AXIS_OF_DIM[d] for d in dims)


class _Conv2dBase(_ConvBase):
    """One conv2d, its layout said by where each dimension sits in the input, the weight and the output
    (``input_dims``, ``weight_dims``, ``output_dims``). The rest follows from them when a layout class is
    made: the names of the output's axes, of the reduction axes (in the weight's order), the index of the
    padded input and of the weight in those names, the title and (unless a layout says more) the description."""

    params: tuple[Param, ...] = _CONV_PARAMS
    presets = _CONV_PRESETS
    dtypes = MATMUL_DTYPES
    layout: str = ""  # the input's, as _pad_block knows it
    input_dims: tuple[str, ...] = ()  # the input's, weight's and output's dims, as _dims names them
    weight_dims: tuple[str, ...] = ()
    output_dims: tuple[str, ...] = ()
    out_axes: tuple[str, ...] = ()
    reduce_axes: tuple[tuple[str, str], ...] = ()  # (axis, its extent as _dims names it), in reduction order
    input_index: tuple[str, ...] = ()
    weight_index: tuple[str, ...] = ()
    einsum: str = ""  # windows (N C P Q R S) and the weight as _reference_weight gives it -> the output

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.out_axes = _axes(cls.output_dims)
        cls.input_index = _axes(cls.input_dims)
        cls.weight_index = _axes(cls.weight_dims)
        cls.reduce_axes = tuple(
            (a, d) for a, d in zip(cls.weight_index, cls.weight_dims, strict=True) if a.startswith("r")
        )
        cls.title = f"Conv2D {cls.layout}  out[{','.join(cls.out_axes)}] = sum A_pad * B"
        if "description" not in cls.__dict__:
            cls.description = (
                f"2-D convolution: input A is {' x '.join(cls.input_dims)}, weight B is {' x '.join(cls.weight_dims)}, "
                f"output is {' x '.join(cls.output_dims)}. Zero padding is the separate block 'pad'; the reduction "
                f"over ({', '.join(a for a, _ in cls.reduce_axes)}) is block 'conv'."
            )

    def _dims(self, s: dict[str, int]) -> dict[str, int]:
        """Every size a layout's shapes are made of: the parameters, the output's P and Q, the channel blocks."""
        P, Q = self._pq(s)
        return {**s, "P": P, "Q": Q, "C/ic": s["C"] // s.get("ic", 1), "K/oc": s["K"] // s.get("oc", 1)}

    def _input_shapes(self, s):
        dims = self._dims(s)
        return [tuple(dims[d] for d in self.input_dims), tuple(dims[d] for d in self.weight_dims)]

    def _output_shape(self, s):
        dims = self._dims(s)
        return tuple(dims[d] for d in self.output_dims)

    def _tensors(self, s, dtype):
        stride, pad, dil = s["stride"], s["pad"], s["dilation"]
        a_shape, b_shape = self._input_shapes(s)
        A = te.placeholder(a_shape, split_dtype(dtype)[0], name="A")
        B = te.placeholder(b_shape, split_dtype(dtype)[0], name="B")
        A_pad = _pad_block(A, pad, self.layout)
        dims = self._dims(s)
        reduce = {name: te.reduce_axis((0, dims[extent]), name=name) for name, extent in self.reduce_axes}

        def body(*idx: Any) -> Any:
            at = {**dict(zip(self.out_axes, idx, strict=True)), **reduce}
            at["Y"] = at["y"] * stride + at["ry"] * dil
            at["X"] = at["x"] * stride + at["rx"] * dil
            a = A_pad[tuple(at[i] for i in self.input_index)]
            b = B[tuple(at[i] for i in self.weight_index)]
            return te.sum(mul_acc(a, b, dtype), axis=list(reduce.values()))

        out = te.compute(self._output_shape(s), body, name="conv", varargs_names=list(self.out_axes))
        return [A, B, out]

    def _flops(self, s):
        P, Q = self._pq(s)
        return 2.0 * s["N"] * s["K"] * P * Q * s["C"] * s["R"] * s["S"]

    def _reduction_length(self, s):
        return s["C"] * s["R"] * s["S"]

    def _reference(self, inputs, s):
        a, w = inputs
        P, Q = self._pq(s)
        nchw = self._reference_input(a)
        win = _windows_nchw(nchw, s["R"], s["S"], s["stride"], s["pad"], s["dilation"], P, Q)  # N C P Q R S
        return self._reference_output(
            np.einsum(self.einsum, win, self._reference_weight(w), optimize=True), s
        )

    def _reference_input(self, a: np.ndarray) -> np.ndarray:
        """The input as NCHW, for the NumPy reference."""
        return a

    def _reference_weight(self, w: np.ndarray) -> np.ndarray:
        return w

    def _reference_output(self, out: np.ndarray, s: dict[str, int]) -> np.ndarray:
        return out


class Conv2dNCHW(_Conv2dBase):
    name = "conv2d_nchw"
    layout = "NCHW"
    input_dims, weight_dims, output_dims = ("N", "C", "H", "W"), ("K", "C", "R", "S"), ("N", "K", "P", "Q")
    einsum = "ncpqrs,kcrs->nkpq"


class Conv2dNHWC(_Conv2dBase):
    name = "conv2d_nhwc"
    layout = "NHWC"
    input_dims, weight_dims, output_dims = ("N", "H", "W", "C"), ("R", "S", "C", "K"), ("N", "P", "Q", "K")
    einsum = "ncpqrs,rsck->npqk"

    def _reference_input(self, a: np.ndarray) -> np.ndarray:
        return a.transpose(0, 3, 1, 2)


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


class Conv2dNCHWc(_Conv2dBase):
    """The layout x86 convolutions run fastest in (TVM's ``conv2d_NCHWc``, oneDNN's ``nChw16c``): channels
    split into blocks of ``ic`` (input) and ``oc`` (output) that sit innermost, so one vector register holds
    one block of output channels and the weight's innermost axis feeds it. A network keeps its activations in
    this layout from layer to layer (TVM's AlterOpLayout, PyTorch's mkldnn tensors), so no layer pays a
    reorder; tunelab compares it with oneDNN's convolution on input and weight already in oneDNN's layout."""

    name = "conv2d_nchwc"
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
    layout = "NCHWc"
    input_dims = ("N", "C/ic", "H", "W", "ic")
    weight_dims = ("K/oc", "C/ic", "R", "S", "ic", "oc")
    output_dims = ("N", "K/oc", "P", "Q", "oc")
    einsum = "ncpqrs,kcrs->nkpq"  # on the unblocked input and weight; the output is blocked after

    def _check_shape(self, s):
        for channels, block in (("C", "ic"), ("K", "oc")):
            if s[channels] % s[block]:
                raise WorkloadError(
                    f"{self.name}: {block}={s[block]} does not divide {channels}={s[channels]}; the channels are "
                    f"split into blocks of {block}, so choose a divisor of {channels} (16 for one AVX-512 "
                    f"register of float32, 8 for AVX2)"
                )
        _check_conv_window(self.name, s)

    def _reference_input(self, a: np.ndarray) -> np.ndarray:
        return unblock_input(np.asarray(a))

    def _reference_weight(self, w: np.ndarray) -> np.ndarray:
        return unblock_weight(np.asarray(w))

    def _reference_output(self, out: np.ndarray, s: dict[str, int]) -> np.ndarray:
        return block_output(out, s["oc"])


def _mobilenet(C: int, HW: int, RS: int, stride: int, pad: int) -> dict[str, int]:
    """A depthwise preset of batch 1, square input and kernel, multiplier 1."""
    return {"N": 1, "C": C, "H": HW, "W": HW, "R": RS, "S": RS, "stride": stride, "pad": pad, "multiplier": 1}


class DepthwiseConv2d(_ConvBase):
    name = "depthwise_conv2d"
    title = "Depthwise Conv2D NCHW  out[n,f,y,x] = sum A_pad[n,f/m] * B"
    description = (
        "Depthwise 2-D convolution: input A is N x C x H x W, weight B is C x multiplier x R x S, output is "
        "N x (C*multiplier) x P x Q; output channel f reads input channel f // multiplier. Zero padding is the "
        "separate block 'pad'; the reduction over (ry, rx) is block 'conv'."
    )
    params = (
        *(p for p in _CONV_PARAMS if p.name not in ("K", "dilation")),
        Param("multiplier", 1, 1, "output channels per input channel"),
    )
    presets = {
        "mobilenet-3x3-112": _mobilenet(32, 112, 3, 1, 1),
        "mobilenet-3x3-112-s2": _mobilenet(96, 112, 3, 2, 1),
        "mobilenet-3x3-56": _mobilenet(144, 56, 3, 1, 1),
        "mobilenet-3x3-28": _mobilenet(192, 28, 3, 1, 1),
        "mobilenet-3x3-14": _mobilenet(576, 14, 3, 1, 1),
        "efficientnet-5x5-28": _mobilenet(240, 28, 5, 1, 2),
    }

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

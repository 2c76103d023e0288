"""What every workload is: named shape parameters, shapes as text, the Workload base class, FLOPs of a TE compute.

The catalog (tunelab.core.workloads.catalog) and a person's own file (tunelab.core.workloads.custom) both build on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import te

from tunelab.core.errors import WorkloadError, shown
from tunelab.core.workloads.dtypes import MIXED_BF16_F32, MIXED_F16_F32, split_dtype
from tunelab.core.workloads.shape_text import format_shape

FLOAT_DTYPES = ("float32", "float64", "float16")
# Mixed precision (tunelab.core.workloads.dtypes), offered by the matmul-like workloads (GEMM, batch
# matmul, the convolutions): what tensor cores compute with MetaSchedule's wmma f16f16f32 intrinsics, and
# bfloat16 inputs into float32 (its mma.sync path on sm_80 and later).
MATMUL_DTYPES = (*FLOAT_DTYPES, MIXED_F16_F32, MIXED_BF16_F32)


def mul_acc(a: Any, b: Any, dtype: str) -> Any:
    """``a * b`` in the accumulator dtype: the inputs cast up first when the dtype is mixed (unchanged
    otherwise, so a plain dtype's TIR is what it always was)."""
    inputs, acc = split_dtype(dtype)
    return a * b if acc == inputs else a.astype(acc) * b.astype(acc)


_SHAPE_ITEM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


@dataclass(frozen=True)
class Param:
    """One integer shape parameter of a workload."""

    name: str
    default: int
    minimum: int = 1
    doc: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "default": self.default, "minimum": self.minimum, "doc": self.doc}


def format_bytes(n: float) -> str:
    """``1.5 GiB``, ``512 MiB``, ``7.3 EiB``: a byte count for people."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} EiB"


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


INT32_MAX = 2**31 - 1


def _int_value(wl_name: str, key: str, value: Any) -> int:
    """One parameter value as an int, or WorkloadError."""
    if isinstance(value, bool):
        raise WorkloadError(f"{wl_name}: shape parameter '{key}' must be an integer, got {shown(value)}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+", text):
            try:
                return int(text)
            except ValueError:  # more digits than Python converts
                raise WorkloadError(
                    f"{wl_name}: shape parameter '{key}' has {len(text)} digits; that is no size"
                ) from None
    raise WorkloadError(f"{wl_name}: shape parameter '{key}' must be an integer, got {shown(value)}")


class Workload:
    """One operator. Subclasses set the class attributes and implement the ``_``-prefixed hooks."""

    name: str = ""
    title: str = ""
    description: str = ""
    params: tuple[Param, ...] = ()
    dtypes: tuple[str, ...] = FLOAT_DTYPES
    presets: dict[str, dict[str, int]] = {}
    main_block: str = ""

    # ---- shapes and dtypes ------------------------------------------------------------------------------
    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def default_shape(self) -> dict[str, int]:
        return {p.name: p.default for p in self.params}

    def parse_shape(self, spec: str | Mapping[str, Any] | None, *, complete: bool = False) -> dict[str, int]:
        """A full, checked shape from ``"M=512,N=256"``, a dict, a preset name, or None (all defaults).

        Parameters left out take their defaults, unless ``complete``: then a shape that names some
        parameters must name all of them (a person who typed ``M=64,N=64`` for a GEMM did not mean
        K=512), and only an empty shape (or None) means the default shape."""
        given: dict[str, Any]
        preset = False
        if spec is None:
            given = {}
        elif isinstance(spec, str):
            text = spec.strip()
            if text in self.presets:
                given = dict(self.presets[text])
                preset = True
            else:
                given = {}
                for item in text.split(",") if text else []:
                    if not item.strip():
                        continue
                    m = _SHAPE_ITEM.match(item)
                    if m is None:
                        raise WorkloadError(
                            f"{self.name}: cannot read shape item {shown(item.strip())}; write NAME=VALUE pairs "
                            f"separated by commas (parameters are {', '.join(self.param_names)}) or a preset name"
                            + (f" ({', '.join(self.presets)})" if self.presets else "")
                        )
                    key, value = m.group(1), m.group(2)
                    if key in given:
                        raise WorkloadError(f"{self.name}: shape parameter '{key}' is given twice")
                    given[key] = value
        elif isinstance(spec, Mapping):
            given = dict(spec)
        else:
            raise WorkloadError(
                f"{self.name}: a shape must be a 'NAME=VALUE,...' string or a dict, got {type(spec).__name__}"
            )
        shape = self.default_shape()
        for key, value in given.items():
            if key not in shape:
                raise WorkloadError(
                    f"{self.name}: shape parameter {shown(key)} is unknown; "
                    f"parameters are {', '.join(self.param_names)}"
                )
            shape[key] = _int_value(self.name, key, value)
        missing = [p for p in self.param_names if p not in given]
        if complete and given and missing and not preset:
            named = format_shape({k: shape[k] for k in self.param_names if k in given})
            raise WorkloadError(
                f"{self.name}: the shape {named} leaves out {', '.join(missing)}; give every parameter "
                f"({', '.join(self.param_names)}) or a preset, or no shape for the default "
                f"{format_shape(self.default_shape())}"
            )
        for p in self.params:
            if shape[p.name] < p.minimum:
                raise WorkloadError(
                    f"{self.name}: shape parameter '{p.name}' must be at least {p.minimum}, got {shape[p.name]}"
                )
        self._check_shape(shape)
        return shape

    def _check_shape(self, shape: dict[str, int]) -> None:
        """Consistency checks across parameters; raise WorkloadError."""

    def vet(self, shape, dtype: str | None = None) -> None:
        """Check, in a time-limited child, that a person's code builds this shape (custom workloads only)."""

    def _shape(self, shape: str | Mapping[str, Any] | None) -> dict[str, int]:
        return self.parse_shape(shape)

    def check_dtype(self, dtype: str | None) -> str:
        """The dtype itself (None -> the default) if this workload supports it, else WorkloadError."""
        if dtype is None:
            return self.dtypes[0]
        dt = str(dtype).strip()
        if dt not in self.dtypes:
            raise WorkloadError(
                f"{self.name}: dtype {shown(dt)} is not supported; choose one of {', '.join(self.dtypes)}"
            )
        return dt

    # ---- TVM --------------------------------------------------------------------------------------------
    def tensors(self, shape, dtype: str | None = None) -> list[te.Tensor]:
        """``[inputs..., output]`` as TE tensors."""
        return self._tensors(self._shape(shape), self.check_dtype(dtype))

    def _tensors(self, shape: dict[str, int], dtype: str) -> list[te.Tensor]:
        raise NotImplementedError

    def prim_func(self, shape, dtype: str | None = None) -> tvm.tirx.PrimFunc:
        return te.create_prim_func(self.tensors(shape, dtype))

    def ir_module(self, shape, dtype: str | None = None) -> tvm.IRModule:
        """``IRModule({"main": prim_func})``, what MetaSchedule and ``tvm.compile`` take."""
        return tvm.IRModule({"main": self.prim_func(shape, dtype)})

    # ---- sizes ------------------------------------------------------------------------------------------
    def input_shapes(self, shape) -> list[tuple[int, ...]]:
        return self._input_shapes(self._shape(shape))

    def output_shape(self, shape) -> tuple[int, ...]:
        return self._output_shape(self._shape(shape))

    def _input_shapes(self, shape: dict[str, int]) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def _output_shape(self, shape: dict[str, int]) -> tuple[int, ...]:
        raise NotImplementedError

    def flops(self, shape) -> float:
        """FLOP of one call (a multiply-add counts 2)."""
        return float(self._flops(self._shape(shape)))

    def _flops(self, shape: dict[str, int]) -> float:
        raise NotImplementedError

    def reduction_length(self, shape) -> int:
        """How many terms each output element sums (drives the tolerance)."""
        return int(self._reduction_length(self._shape(shape)))

    def _reduction_length(self, shape: dict[str, int]) -> int:
        return 1

    def bytes_moved(self, shape, dtype: str | None = None) -> float:
        """Minimum bytes read and written: every input once plus the output once."""
        s = self._shape(shape)
        inputs, out = (np.dtype(d).itemsize for d in split_dtype(self.check_dtype(dtype)))
        elems_in = sum(_prod(x) for x in self._input_shapes(s))
        return float(elems_in * inputs + _prod(self._output_shape(s)) * out)

    def check_memory(self, shape, dtype: str | None = None) -> None:
        """WorkloadError when the shape's tensors (inputs and output) cannot fit in this machine's memory.

        Asked before any space is built: nothing else about such a shape could work, and building its
        space would enumerate factors of extents in the trillions."""
        import psutil

        s = self._shape(shape)
        try:
            need = self.bytes_moved(s, dtype)
        except OverflowError:  # more bytes than a float holds
            need = float("inf")
        total = psutil.virtual_memory().total
        if need > total:
            if need == float("inf"):
                raise WorkloadError(
                    f"{self.name}: the shape {format_shape(s)} needs more bytes for its tensors "
                    f"than can be counted, far more than this machine's {format_bytes(total)} of memory"
                )
            raise WorkloadError(
                f"{self.name}: the shape {format_shape(s)} needs {format_bytes(need)} ({need:,.0f} bytes) for its "
                f"tensors, more than this machine's {format_bytes(total)} of memory"
            )
        # A shape that fits but names a size past int32: TVM's loop extents are int32 and wrap negative
        # ("the factor at position 0 is -2147483648"), so it is named here, after the memory it needs.
        for name, value in s.items():
            if value > INT32_MAX:
                raise WorkloadError(
                    f"{self.name}: {name}={value} is past the largest size TVM indexes (2^31-1 = {INT32_MAX})"
                )

    def arithmetic_intensity(self, shape, dtype: str | None = None) -> float:
        """FLOP per byte moved."""
        b = self.bytes_moved(shape, dtype)
        return self.flops(shape) / b if b else 0.0

    # ---- NumPy ------------------------------------------------------------------------------------------
    def make_inputs(self, shape, dtype: str | None = None, seed: int = 0) -> list[np.ndarray]:
        """Deterministic random inputs, uniform in [-1, 1), C-contiguous, in the workload dtype."""
        s = self._shape(shape)
        dt = np.dtype(split_dtype(self.check_dtype(dtype))[0])
        rng = np.random.default_rng(seed)
        out = []
        for shp in self._input_shapes(s):
            if dt.kind == "f" or dt.name == "bfloat16":  # ml_dtypes' bfloat16 is of kind "V"
                arr = rng.uniform(-1.0, 1.0, size=shp).astype(dt)
            else:
                arr = rng.integers(-4, 5, size=shp).astype(dt)
            out.append(np.ascontiguousarray(arr))
        return out

    def make_output(self, shape, dtype: str | None = None) -> np.ndarray:
        """A zero array shaped like the output (for the destination-passing call)."""
        return np.zeros(self.output_shape(shape), dtype=split_dtype(self.check_dtype(dtype))[1])

    def reference(self, inputs: list[np.ndarray], shape, dtype: str | None = None) -> np.ndarray:
        """NumPy result of one call, computed in float64 and returned in the output dtype of ``dtype``
        (the workload dtype; without it, the inputs' dtype)."""
        s = self._shape(shape)
        expected = self._input_shapes(s)
        if len(inputs) != len(expected):
            raise WorkloadError(f"{self.name}: reference needs {len(expected)} inputs, got {len(inputs)}")
        for i, (arr, shp) in enumerate(zip(inputs, expected, strict=True)):
            if tuple(np.shape(arr)) != tuple(shp):
                raise WorkloadError(
                    f"{self.name}: input {i} has shape {tuple(np.shape(arr))} but the shape needs {tuple(shp)}"
                )
        if dtype is not None:
            out = np.dtype(split_dtype(self.check_dtype(dtype))[1])
        else:
            out = np.asarray(inputs[0]).dtype if inputs else np.dtype(self.dtypes[0])
        wide = [np.asarray(x, dtype=np.float64) for x in inputs]
        return np.ascontiguousarray(self._reference(wide, s).astype(out))

    def _reference(self, inputs: list[np.ndarray], shape: dict[str, int]) -> np.ndarray:
        raise NotImplementedError

    def tolerance(self, dtype: str | None = None, shape=None) -> tuple[float, float]:
        """``(rtol, atol)`` for ``np.testing.assert_allclose(tvm_result, reference)``.

        atol grows with the reduction length L (the default shape's when ``shape`` is None): the rounding error of
        a sum of L products of values in [-1, 1) stays below about 0.45 * eps * L (measured for fp16 and fp32 at
        L=64..512), so atol = eps * (2 L + 8) leaves a margin of four.
        """
        # the output's dtype: a mixed dtype's inputs are exact in it, only its accumulation rounds
        dt = np.dtype(split_dtype(self.check_dtype(dtype))[1])
        if dt.kind != "f":
            return (0.0, 0.0)
        length = self.reduction_length(shape)
        eps = float(np.finfo(dt).eps)
        rtol = {2: 1e-2, 4: 1e-5, 8: 1e-12}.get(dt.itemsize, 1e-5)
        return (rtol, eps * (2 * length + 8))

    # ---- description ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "params": [p.to_json() for p in self.params],
            "dtypes": list(self.dtypes),
            "presets": {k: dict(v) for k, v in self.presets.items()},
            "main_block": self.main_block,
        }

    def __repr__(self) -> str:
        return f"<Workload {self.name}>"


# ======================================================================================================
# Built-in workloads
# ======================================================================================================


def _compute_ops(output: te.Tensor) -> list[tuple[te.Tensor, Any]]:
    """Every (tensor, ComputeOp) reachable from ``output``, output first."""
    found: list[tuple[te.Tensor, Any]] = []
    stack = [output]
    while stack:
        t = stack.pop()
        op = t.op
        if not isinstance(op, te.ComputeOp) or any(o.same_as(op) for _, o in found):
            continue
        found.append((t, op))
        stack.extend(op.input_tensors)
    return found


def _reduce_extent(op) -> int | None:
    try:
        return _prod(int(ax.dom.extent) for ax in op.reduce_axis)
    except (TypeError, ValueError):
        return None


def estimate_flops(output: te.Tensor) -> float:
    """2 * (elements) * (reduction extent), summed over every reducing compute op reachable from ``output``."""
    total = 0.0
    for t, op in _compute_ops(output):
        if len(op.reduce_axis):
            extent = _reduce_extent(op)
            try:
                elems = _prod(int(x) for x in t.shape)
            except (TypeError, ValueError):
                continue
            if extent is not None:
                total += 2.0 * elems * extent
    return total


def reduction_extent(output: te.Tensor) -> int:
    """The longest reduction (product of reduce extents) reachable from ``output``; 1 when nothing reduces."""
    best = 1
    for _, op in _compute_ops(output):
        if len(op.reduce_axis):
            best = max(best, _reduce_extent(op) or 1)
    return best

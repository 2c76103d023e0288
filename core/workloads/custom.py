"""A workload built from a person's own TE compute file (the ``custom`` workload).

File format: a small Python file. ``te``, ``tvm``, ``np`` and ``numpy`` are already imported in its namespace::

    # my_op.py
    \"\"\"Row-wise sum of squares.\"\"\"            # optional: becomes the description
    PARAMS = {"M": 256, "N": 256}              # required: shape parameter name -> default (positive ints)
    DTYPES = ["float32"]                       # optional: supported dtypes, first is the default
                                               #   (float32, float64, float16, int8, int16, int32, int64, uint8)
    TITLE = "Row sum of squares"               # optional
    PRESETS = {"big": {"M": 4096, "N": 1024}}  # optional: named shapes

    def compute(M, N, dtype):                  # required: every PARAMS name and dtype, as keywords
        A = te.placeholder((M, N), dtype, name="A")
        k = te.reduce_axis((0, N), name="k")
        B = te.compute((M,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="B")
        return [A, B]                          # placeholders (inputs) first, the output last

    def reference(A, **shape):                 # required: NumPy answer; inputs positional, parameters as keywords
        return (A * A).sum(axis=1)

    def flops(M, N):                           # optional: FLOP of one call (multiply-add = 2)
        return 2.0 * M * N

Without ``flops`` the count is estimated as 2 * (elements) * (reduction extent), summed over the compute ops that
reduce, or 0 when none does. ``reference`` gets float inputs widened to float64 (so it is the exact answer), and its
result is cast to the output tensor's dtype. The main block (what search spaces schedule) is the output tensor's op
name. Mistakes in the file (syntax errors, missing names, ``compute`` raising, wrong return values) raise
:class:`tunelab.core.errors.WorkloadError` naming the problem and, where there is one, the line.

The file is a person's own code, and TE tensors must be built in the process that tunes them, so it does
run in tunelab's process; but it runs there only after a child process loaded it first, within a time
limit (:func:`vet_custom`, :data:`VET_TIMEOUT_S`, ``$TUNELAB_CUSTOM_TIMEOUT_S``): a file that loops
forever, ends its process (``sys.exit``, ``os._exit``, a signal) or raises is refused with one line
before tunelab runs it itself. ``Workload.vet(shape, dtype)`` checks ``compute`` and ``reference`` at a
session's shape the same way. In tunelab's process a ``sys.exit`` in the file is a WorkloadError too.
"""

from __future__ import annotations

import builtins
import inspect
import json
import keyword
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tvm
from tvm import te

from tunelab.core.errors import WorkloadError
from tunelab.core.workloads.base import Param, Workload, estimate_flops, reduction_extent

# The child-process guard lives in custom_guard; its names stay importable from here.
from tunelab.core.workloads.custom_guard import (
    FILENAME,
    USER_ERRORS,
    VET_TIMEOUT_ENV,
    VET_TIMEOUT_S,
    describe,
    reference_in_child,
    vet_custom,
    vet_timeout_s,
)

__all__ = [
    "CustomWorkload",
    "SUPPORTED_DTYPES",
    "EXAMPLE_SOURCE",
    "VET_TIMEOUT_ENV",
    "VET_TIMEOUT_S",
    "vet_custom",
    "vet_timeout_s",
]

SUPPORTED_DTYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8")

EXAMPLE_SOURCE = '''\
"""Row-wise sum of squares: B[i] = sum_k A[i, k] ** 2."""
PARAMS = {"M": 256, "N": 256}
DTYPES = ["float32"]


def compute(M, N, dtype):
    A = te.placeholder((M, N), dtype, name="A")
    k = te.reduce_axis((0, N), name="k")
    B = te.compute((M,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="B")
    return [A, B]


def reference(A, **shape):
    return (A * A).sum(axis=1)


def flops(M, N):
    return 2.0 * M * N
'''


def _vet_main(job_path: str, result_path: str) -> None:
    """The child of :func:`vet_custom`: load the file (and build the shape), write the outcome, and end
    at once (os._exit), whatever threads or exit handlers the file left behind."""
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    try:
        wl = CustomWorkload(job["source"], name=job["name"], vet=False)
        outcome: dict[str, Any] = {"error": None}
        if not job["build"]:
            wl.flops(None)
        else:
            shape, dtype = wl.parse_shape(job["shape"], complete=True), wl.check_dtype(job["dtype"])
            wl.check_memory(shape, dtype)  # before anything of that size is allocated
            wl.tensors(shape, dtype)
            wl.flops(shape)
            wl._reference_here = True  # this child is the guard already
            wl.reference(wl.make_inputs(shape, dtype), shape)
            outcome.update(shape=shape, dtype=dtype)
    except WorkloadError as exc:
        outcome = {"error": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - whatever escaped is the file's doing
        outcome = {"error": f"{job['name']}: the workload file failed: {describe(exc)}"}
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(outcome, f)
    os._exit(0)


class CustomWorkload(Workload):
    """A workload whose TE compute, reference and FLOP count come from a person's file."""

    def __init__(self, source: str, name: str = "custom", *, vet: bool = True) -> None:
        self.name = name
        self.source = source
        self._reference_here = False  # True in a process that is the guard already (the vetting child)
        if vet:  # in a time-limited child first (vet_custom): a hang or an exit there is a message here
            vet_custom(source, name)
        ns = self._exec(source)
        self._compute = self._function(ns, "compute")
        self._ref = self._function(ns, "reference")
        self._user_flops = self._callable(ns, "flops", required=False)
        self.params = self._read_params(ns)
        self.dtypes = self._read_dtypes(ns)
        doc = ns.get("DESCRIPTION") or ns.get("__doc__") or ""
        self.description = (
            str(doc).strip() or f"Custom workload with parameters {', '.join(self.param_names)}."
        )
        self.title = str(ns.get("TITLE") or f"Custom: {name}")
        self._cache: dict[tuple, list[te.Tensor]] = {}
        self._check_signature()
        self.presets = {}
        presets = ns.get("PRESETS", {})
        if not isinstance(presets, Mapping):
            raise WorkloadError(f"{name}: PRESETS must be a dict of preset name -> {{parameter: value}}")
        # Build the default shape once so that mistakes show up when the file is loaded, not mid-session.
        tensors = self._tensors(self.default_shape(), self.dtypes[0])
        self.main_block = str(tensors[-1].op.name)
        try:
            te.create_prim_func(tensors)
        except Exception as exc:  # TVM raises many kinds; all mean the same to the user
            raise WorkloadError(
                f"{name}: TVM cannot turn compute()'s tensors into a PrimFunc: {exc}"
            ) from exc
        for preset, shape in presets.items():
            if not isinstance(shape, Mapping):
                raise WorkloadError(f"{name}: PRESETS['{preset}'] must be a dict of parameter -> value")
            self.presets[str(preset)] = self.parse_shape(shape)

    # ---- loading ----------------------------------------------------------------------------------------
    def _exec(self, source: str) -> dict[str, Any]:
        if not isinstance(source, str):
            raise WorkloadError(f"{self.name}: the workload file must be text, got {type(source).__name__}")
        try:
            code = compile(source, FILENAME, "exec")
        except SyntaxError as exc:
            where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
            raise WorkloadError(
                f"{self.name}: syntax error on {where} of the workload file: {exc.msg}"
            ) from None
        ns: dict[str, Any] = {
            "__name__": "tunelab_custom_workload",
            "__builtins__": builtins,
            "te": te,
            "tvm": tvm,
            "np": np,
            "numpy": np,
        }
        try:
            exec(code, ns)  # running the person's own workload file is the point
        except USER_ERRORS as exc:
            raise WorkloadError(
                f"{self.name}: the workload file failed while loading: {describe(exc)}"
            ) from exc
        return ns

    def _function(self, ns: dict[str, Any], key: str) -> Callable:
        """The function the file must define as `key`."""
        fn = self._callable(ns, key)
        assert fn is not None  # a required one is there, or _callable raised
        return fn

    def _callable(self, ns: dict[str, Any], key: str, required: bool = True) -> Callable | None:
        fn = ns.get(key)
        if fn is None:
            if required:
                raise WorkloadError(f"{self.name}: the workload file must define a function {key}()")
            return None
        if not callable(fn):
            raise WorkloadError(
                f"{self.name}: {key} in the workload file must be a function, got {type(fn).__name__}"
            )
        return fn

    def _read_params(self, ns: dict[str, Any]) -> tuple[Param, ...]:
        raw = ns.get("PARAMS")
        if raw is None:
            raise WorkloadError(
                f"{self.name}: the workload file must define PARAMS, a dict of name -> default int"
            )
        if not isinstance(raw, Mapping):
            raise WorkloadError(
                f"{self.name}: PARAMS must be a dict of name -> default int, got {type(raw).__name__}"
            )
        params = []
        for key, value in raw.items():
            if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key) or key == "dtype":
                raise WorkloadError(
                    f"{self.name}: PARAMS name {key!r} is not allowed; use a Python identifier other than 'dtype'"
                )
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise WorkloadError(f"{self.name}: PARAMS['{key}'] must be a positive integer, got {value!r}")
            params.append(Param(key, int(value), 1, ""))
        return tuple(params)

    def _read_dtypes(self, ns: dict[str, Any]) -> tuple[str, ...]:
        raw = ns.get("DTYPES", ["float32"])
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, (list, tuple)) or not raw:
            raise WorkloadError(f"{self.name}: DTYPES must be a non-empty list such as ['float32']")
        for dt in raw:
            if dt not in SUPPORTED_DTYPES:
                raise WorkloadError(
                    f"{self.name}: DTYPES entry {dt!r} is not supported; use {', '.join(SUPPORTED_DTYPES)}"
                )
        return tuple(raw)

    def _check_signature(self) -> None:
        kwargs = {**self.default_shape(), "dtype": self.dtypes[0]}
        try:
            inspect.signature(self._compute).bind(**kwargs)
        except TypeError as exc:
            wanted = ", ".join([*self.param_names, "dtype"])
            raise WorkloadError(
                f"{self.name}: compute() must take the keyword arguments {wanted} ({exc})"
            ) from None
        except ValueError:  # no signature available (a builtin); find out when calling it
            pass

    # ---- tensors ----------------------------------------------------------------------------------------
    def _tensors(self, s: dict[str, int], dtype: str) -> list[te.Tensor]:
        key = (tuple(sorted(s.items())), dtype)
        cached = self._cache.get(key)
        if cached is not None:
            return list(cached)
        try:
            result = self._compute(**s, dtype=dtype)
        except WorkloadError:
            raise
        except USER_ERRORS as exc:
            raise WorkloadError(f"{self.name}: compute() raised {describe(exc)}") from exc
        if not isinstance(result, (list, tuple)) or not all(isinstance(t, te.Tensor) for t in result):
            raise WorkloadError(
                f"{self.name}: compute() must return a list of te tensors (inputs first, output last), "
                f"got {type(result).__name__}"
            )
        tensors = list(result)
        if len(tensors) < 2:
            raise WorkloadError(
                f"{self.name}: compute() must return at least one input placeholder and the output"
            )
        for i, t in enumerate(tensors[:-1]):
            if not isinstance(t.op, te.PlaceholderOp):
                raise WorkloadError(
                    f"{self.name}: compute() returned the computed tensor '{t.op.name}' at position {i}; "
                    f"only te.placeholder inputs may come before the output"
                )
        if not isinstance(tensors[-1].op, te.ComputeOp):
            raise WorkloadError(
                f"{self.name}: the last tensor compute() returns must be the te.compute output, "
                f"got '{tensors[-1].op.name}'"
            )
        for t in tensors:
            try:
                [int(x) for x in t.shape]
            except (TypeError, ValueError):
                raise WorkloadError(
                    f"{self.name}: tensor '{t.op.name}' has a non-constant shape {list(t.shape)}; "
                    f"shapes must be built from the integer parameters"
                ) from None
        self._cache[key] = tensors
        return list(tensors)

    def _default_tensors(self, s: dict[str, int]) -> list[te.Tensor]:
        return self._tensors(s, self.dtypes[0])

    def _input_shapes(self, s):
        return [tuple(int(x) for x in t.shape) for t in self._default_tensors(s)[:-1]]

    def _output_shape(self, s):
        return tuple(int(x) for x in self._default_tensors(s)[-1].shape)

    def _tensor_dtypes(self, s: dict[str, int], dtype: str) -> list[str]:
        return [str(t.dtype) for t in self._tensors(s, dtype)]

    # ---- counts -----------------------------------------------------------------------------------------
    def _flops(self, s):
        if self._user_flops is None:
            return estimate_flops(self._default_tensors(s)[-1])
        try:
            value = self._user_flops(**s)
            return float(value)
        except USER_ERRORS as exc:
            raise WorkloadError(f"{self.name}: flops() failed: {describe(exc)}") from exc

    def _reduction_length(self, s):
        return reduction_extent(self._default_tensors(s)[-1])

    def bytes_moved(self, shape, dtype: str | None = None) -> float:
        s = self._shape(shape)
        tensors = self._tensors(s, self.check_dtype(dtype))
        return float(
            sum(int(np.prod([int(x) for x in t.shape])) * np.dtype(str(t.dtype)).itemsize for t in tensors)
        )

    # ---- NumPy ------------------------------------------------------------------------------------------
    def make_inputs(self, shape, dtype: str | None = None, seed: int = 0) -> list[np.ndarray]:
        s = self._shape(shape)
        dt = self.check_dtype(dtype)
        rng = np.random.default_rng(seed)
        out = []
        for t in self._tensors(s, dt)[:-1]:
            tdt = np.dtype(str(t.dtype))
            shp = tuple(int(x) for x in t.shape)
            if tdt.kind == "f":
                arr = rng.uniform(-1.0, 1.0, size=shp).astype(tdt)
            elif tdt.kind == "b":
                arr = rng.integers(0, 2, size=shp).astype(tdt)
            else:
                lo = 0 if tdt.kind == "u" else -4
                arr = rng.integers(lo, 5, size=shp).astype(tdt)
            out.append(np.ascontiguousarray(arr))
        return out

    def reference(self, inputs: list[np.ndarray], shape, dtype: str | None = None) -> np.ndarray:
        """The person's reference() at ``shape``, run in a child process: code that crashes the process
        (a segfault in a C extension, os.abort) is then this file's crash in one line, where in tunelab's
        own process it ended the session with a dump that read like a kernel's crash."""
        if self._reference_here or not hasattr(os, "fork"):
            return self._reference(inputs, shape, dtype)
        return reference_in_child(self, [np.asarray(x) for x in inputs], self._shape(shape), dtype)

    def _reference(self, inputs: list[np.ndarray], shape, dtype: str | None = None) -> np.ndarray:
        s = self._shape(shape)
        arrays = [np.asarray(x) for x in inputs]
        dtype = str(arrays[0].dtype) if arrays and str(arrays[0].dtype) in self.dtypes else self.dtypes[0]
        tensors = self._tensors(s, dtype)
        out_dtype = np.dtype(str(tensors[-1].dtype))
        out_shape = tuple(int(x) for x in tensors[-1].shape)
        if len(arrays) != len(tensors) - 1:
            raise WorkloadError(f"{self.name}: reference needs {len(tensors) - 1} inputs, got {len(arrays)}")
        wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
        try:
            result = self._ref(*wide, **s)
        except USER_ERRORS as exc:
            raise WorkloadError(f"{self.name}: reference() raised {describe(exc)}") from exc
        result = np.asarray(result)
        if result.shape != out_shape:
            raise WorkloadError(
                f"{self.name}: reference() returned shape {result.shape} but the output tensor has shape {out_shape}"
            )
        return np.ascontiguousarray(result.astype(out_dtype))

    def vet(self, shape, dtype: str | None = None) -> None:
        """Build this shape's tensors, inputs and reference in a time-limited child first (vet_custom)."""
        vet_custom(
            self.source, self.name, build=True, shape=self._shape(shape), dtype=self.check_dtype(dtype)
        )

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["custom"] = True
        return out


if __name__ == "__main__":  # pragma: no cover - the child of vet_custom, or a file checked by hand
    if len(sys.argv) == 4 and sys.argv[1] == "--vet":
        _vet_main(sys.argv[2], sys.argv[3])
    wl = CustomWorkload(open(sys.argv[1], encoding="utf-8").read() if len(sys.argv) > 1 else EXAMPLE_SOURCE)
    print(wl.to_json())

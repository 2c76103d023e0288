"""A workload tunelab's catalog does not know, held as its TIR (the ``tir`` workload).

A MetaSchedule run made without tunelab may hold workloads of any kind (a fused Relax operator, a
person's own TVMScript). Imported (tunelab.core.usecases.ms_import), such a workload keeps its
PrimFunc as TVMScript text in the session (``custom_source``, as a custom workload keeps its file), so
its records can be viewed, compared, re-measured and exported. It cannot be re-tuned: tunelab's spaces
are built from a TE compute, and an opaque PrimFunc has none.

What tunelab needs of a workload, read from the PrimFunc itself:

- inputs and output: its parameters' buffers in order, the last one the output (the destination-passing
  convention of ``te.create_prim_func`` and of the PrimFuncs Relax lowers to); static shapes only;
- FLOP of one call: 2 x the iteration space of every block that reduces (its iter vars' extents), as
  for a TE compute (:func:`tunelab.core.workloads.base.estimate_flops`); 0 when nothing reduces;
- the reference answer: the unscheduled PrimFunc itself, built plainly for this CPU and run on the same
  inputs. It is the workload's own meaning, so a tuned schedule that differs from it is wrong.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import numpy as np
import tvm

from tunelab.core.errors import WorkloadError

TIR_NAME = "tir"
REDUCE_ITER = 2  # tirx.IterVar.CommReduce


def _prod(values: Any) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


def parse_tir(source: str) -> Any:
    """The PrimFunc of a TVMScript text (an IRModule with one function, or a PrimFunc); WorkloadError."""
    try:
        parsed = tvm.script.from_source(source)
    except Exception as exc:  # noqa: BLE001 - TVMScript's parser raises DiagnosticError and others
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise WorkloadError(
            f"tir: the TVMScript does not parse: {lines[-1][:200] if lines else exc}"
        ) from None
    if isinstance(parsed, tvm.IRModule):
        funcs = [f for _, f in parsed.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
        if len(funcs) != 1:
            raise WorkloadError(f"tir: the module holds {len(funcs)} PrimFuncs; one workload is one PrimFunc")
        parsed = funcs[0]
    if not isinstance(parsed, tvm.tirx.PrimFunc):
        raise WorkloadError(f"tir: the TVMScript is a {type(parsed).__name__}, not a PrimFunc")
    return parsed.with_attr("global_symbol", "main")


def tir_source(func: Any) -> str:
    """The TVMScript text a session keeps for a PrimFunc (what :func:`parse_tir` reads back)."""
    return tvm.IRModule({"main": func}).script()


class TIRWorkload:
    """The Workload interface over a PrimFunc (duck-typed like tunelab.core.workloads.base.Workload)."""

    name = TIR_NAME
    title = "TIR workload (imported)"
    params: tuple = ()
    presets: dict[str, dict[str, int]] = {}

    def __init__(self, source: str) -> None:
        self.source = source
        self._func = parse_tir(source)
        from tvm.s_tir import meta_schedule as ms

        try:  # MetaSchedule's reading of the parameters: what its runner allocates for a candidate
            buffers = ms.arg_info.ArgInfo.from_prim_func(self._func)
            self._shapes = [tuple(int(x) for x in b.shape) for b in buffers]
        except Exception:  # noqa: BLE001 - a scalar parameter or a symbolic shape
            raise WorkloadError(
                "tir: every parameter of the PrimFunc must be a buffer of static shape (inputs, then the output)"
            ) from None
        if not buffers:
            raise WorkloadError("tir: the PrimFunc has no buffers")
        self._dtypes = [str(b.dtype) for b in buffers]
        self.dtypes = (self._dtypes[-1],)
        self._blocks = _blocks(self._func)
        self.main_block = _main_block(self._blocks)
        digest = hashlib.sha1(source.encode()).hexdigest()[:8]
        self.description = (
            f"an opaque PrimFunc ({len(buffers) - 1} inputs, output {self._shapes[-1]}, {digest})"
        )

    # ---- the Workload interface ---------------------------------------------------------------------------
    @property
    def param_names(self) -> tuple[str, ...]:
        return ()

    def default_shape(self) -> dict[str, int]:
        return {}

    def parse_shape(self, spec: Any, *, complete: bool = False) -> dict[str, int]:
        if spec:
            raise WorkloadError("tir: an imported PrimFunc has one fixed shape; it takes no shape parameters")
        return {}

    def vet(self, shape: Any, dtype: str | None = None) -> None:
        """Nothing to vet: the text is TIR, not a person's Python."""

    def check_dtype(self, dtype: str | None) -> str:
        if dtype is not None and str(dtype) != self.dtypes[0]:
            raise WorkloadError(f"tir: the PrimFunc's output is {self.dtypes[0]}, not {dtype}")
        return self.dtypes[0]

    def prim_func(self, shape: Any = None, dtype: str | None = None) -> Any:
        return self._func

    def ir_module(self, shape: Any = None, dtype: str | None = None) -> Any:
        return tvm.IRModule({"main": self._func})

    def input_shapes(self, shape: Any = None) -> list[tuple[int, ...]]:
        return list(self._shapes[:-1])

    def output_shape(self, shape: Any = None) -> tuple[int, ...]:
        return self._shapes[-1]

    def flops(self, shape: Any = None) -> float:
        return float(sum(2 * _prod(extents) for extents, kinds in self._blocks.values() if _reduces(kinds)))

    def reduction_length(self, shape: Any = None) -> int:
        """The longest reduction of any block (drives the tolerance, as for a TE compute)."""
        lengths = [
            _prod(e for e, kind in zip(extents, kinds, strict=True) if kind == REDUCE_ITER)
            for extents, kinds in self._blocks.values()
        ]
        return max([1, *lengths])

    def bytes_moved(self, shape: Any = None, dtype: str | None = None) -> float:
        return float(
            sum(_prod(s) * np.dtype(d).itemsize for s, d in zip(self._shapes, self._dtypes, strict=True))
        )

    def check_memory(self, shape: Any = None, dtype: str | None = None) -> None:
        import psutil

        if self.bytes_moved() > psutil.virtual_memory().total:
            raise WorkloadError("tir: the PrimFunc's buffers need more memory than this machine has")

    def arithmetic_intensity(self, shape: Any = None, dtype: str | None = None) -> float:
        moved = self.bytes_moved()
        return self.flops() / moved if moved else 0.0

    def make_inputs(self, shape: Any = None, dtype: str | None = None, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        out = []
        for shp, dt in zip(self._shapes[:-1], self._dtypes[:-1], strict=True):
            kind = np.dtype(dt).kind
            if kind == "f":
                arr = rng.uniform(-1.0, 1.0, size=shp).astype(dt)
            elif kind == "b":
                arr = rng.integers(0, 2, size=shp).astype(dt)
            else:  # small integers: an index buffer stays in range of most gathers
                arr = rng.integers(0, 2, size=shp).astype(dt)
            out.append(np.ascontiguousarray(arr))
        return out

    def make_output(self, shape: Any = None, dtype: str | None = None) -> np.ndarray:
        return np.zeros(self._shapes[-1], dtype=self._dtypes[-1])

    def reference(self, inputs: list[np.ndarray], shape: Any = None, dtype: str | None = None) -> np.ndarray:
        """The unscheduled PrimFunc's answer, built plainly for this CPU."""
        if len(inputs) != len(self._shapes) - 1:
            raise WorkloadError(f"tir: the PrimFunc takes {len(self._shapes) - 1} inputs, got {len(inputs)}")
        dev = tvm.cpu()
        args = [tvm.runtime.tensor(np.ascontiguousarray(x), dev) for x in inputs]
        out = tvm.runtime.tensor(self.make_output(), dev)
        _plain_build(self.source)(*args, out)
        return out.numpy()

    def tolerance(self, dtype: str | None = None, shape: Any = None) -> tuple[float, float]:
        dt = np.dtype(self.dtypes[0])
        if dt.kind != "f":
            return (0.0, 0.0)
        eps = float(np.finfo(dt).eps)
        rtol = {2: 1e-2, 4: 1e-5, 8: 1e-12}.get(dt.itemsize, 1e-5)
        return (rtol, eps * (2 * self.reduction_length() + 8))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "params": [],
            "dtypes": list(self.dtypes),
            "presets": {},
            "main_block": self.main_block,
        }

    def __repr__(self) -> str:
        return f"<Workload tir {self.main_block}>"


@functools.lru_cache(maxsize=8)
def _plain_build(source: str) -> Any:
    """The reference kernel: the PrimFunc as written, for this host's generic CPU (runs everywhere)."""
    return tvm.compile(tvm.IRModule({"main": parse_tir(source)}), target=tvm.target.Target("llvm"))


def _blocks(func: Any) -> dict[str, tuple[list[int], list[int]]]:
    """Each named block: its iter vars' extents and kinds (0 spatial, 2 reduction), read through a
    Schedule (TVM 0.27's Python has no TIR visitor)."""
    from tvm.s_tir import Schedule

    sch = Schedule(tvm.IRModule({"main": func}))
    found: dict[str, tuple[list[int], list[int]]] = {}
    stack = list(sch.get_child_blocks(sch.get_sblock("root")))
    while stack:
        block_rv = stack.pop()
        block = sch.get(block_rv)
        stack.extend(sch.get_child_blocks(block_rv))
        try:
            extents = [int(iv.dom.extent) for iv in block.iter_vars]
        except (TypeError, ValueError):  # a symbolic extent: no static count
            continue
        if extents:
            found[str(block.name_hint)] = (extents, [int(iv.iter_type) for iv in block.iter_vars])
    return found


def _reduces(kinds: list[int]) -> bool:
    return REDUCE_ITER in kinds


def _main_block(blocks: dict[str, tuple[list[int], list[int]]]) -> str:
    """The block with the most work, reductions first (what a person would schedule)."""
    if not blocks:
        return "root"
    return max(blocks, key=lambda name: (_reduces(blocks[name][1]), _prod(blocks[name][0])))

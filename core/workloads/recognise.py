"""Which catalog workload, at which shape and dtype, a TIR function is: for a module tuned elsewhere.

A function is recognised only when the catalog builds a structurally equal function (``tvm_ffi.structural_equal``)
for some shape and dtype: its buffers' dims say which shapes to try, equality decides. A function that is
equal to none (another operator, another TE spelling of the same one) is not in the catalog; nothing is
guessed from names.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from tunelab.core.workloads.catalog import list_workloads

# Distinct primes, one per parameter of a probe shape: a buffer dim equal to one names that parameter.
_PROBE_PRIMES = (101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157)
# Values tried for parameters no buffer dim shows (stride, pad, dilation, relu, ...).
_HIDDEN_VALUES = (0, 1, 2, 3)


@dataclass(frozen=True)
class Recognised:
    workload: str  # a catalog name
    shape: dict[str, int]
    dtype: str


def _arguments(func: Any) -> list[tuple[str, tuple[int, ...]]] | None:
    """Each argument tensor's (dtype, static dims), as MetaSchedule describes them; None when one is not a
    tensor of constant dims."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    arguments = []
    try:
        for info in ArgInfo.from_prim_func(func):
            kind, dtype, dims = info.as_json()
            if kind != "TENSOR":
                return None
            arguments.append((str(dtype), tuple(int(d) for d in dims)))
    except Exception:  # noqa: BLE001 - a symbolic dim or a non-tensor argument: not a catalog shape
        return None
    return arguments


def _probes(workload: Any) -> list[dict[str, int]]:
    """Probe shapes: a distinct prime for every parameter; where the workload refuses that (a window
    larger than its input, a flag that must be 0 or 1), primes for the size-like parameters (default
    above 1), the largest to the largest default, and the defaults elsewhere."""
    params = list(workload.params)
    if len(params) > len(_PROBE_PRIMES):
        return []
    every = {p.name: prime for p, prime in zip(params, _PROBE_PRIMES, strict=False)}
    sizes = sorted((p for p in params if p.default > 1), key=lambda p: p.default)
    sized = {p.name: p.default for p in params}
    sized.update({p.name: prime for p, prime in zip(sizes, _PROBE_PRIMES, strict=False)})
    return [every, sized]


def _candidate_shapes(workload: Any, dims: list[tuple[int, ...]], dtype: str) -> list[dict[str, int]]:
    """Shapes of ``workload`` whose buffers could have ``dims``: each parameter a buffer dim shows is read
    off where a probe shape (a distinct prime per parameter) puts it; the others take small values."""
    names = [p.name for p in workload.params]
    probe_dims = None
    for probe in _probes(workload):
        try:
            probe_args = _arguments(workload.prim_func(probe, dtype))
        except Exception:  # noqa: BLE001 - a probe this workload refuses: try the next
            continue
        probe_dims = None if probe_args is None else [d for _, d in probe_args]
        break
    if probe_dims is None or [len(d) for d in probe_dims] != [len(d) for d in dims]:
        return []
    seen: dict[str, int] = {}
    for probe_buffer, buffer in zip(probe_dims, dims, strict=True):
        for probe_dim, dim in zip(probe_buffer, buffer, strict=True):
            for name, prime in probe.items():
                if probe_dim == prime and prime in _PROBE_PRIMES:
                    if seen.setdefault(name, dim) != dim:
                        return []  # one parameter, two sizes: not this workload
    hidden = [n for n in names if n not in seen]
    shapes = []
    for values in itertools.product(_HIDDEN_VALUES, repeat=len(hidden)):
        shape = {n: seen[n] if n in seen else values[hidden.index(n)] for n in names}
        if all(shape[p.name] >= p.minimum for p in workload.params):
            shapes.append(shape)
    return shapes


def recognise(mod: Any) -> Recognised | None:
    """The catalog workload, shape and dtype whose TIR equals ``mod``'s ``main`` (structurally), or None."""
    import tvm
    import tvm_ffi

    funcs = list(mod.functions.items())
    if len(funcs) != 1:
        return None
    func = funcs[0][1]
    if not isinstance(func, tvm.tirx.PrimFunc):
        return None
    arguments = _arguments(func)
    if not arguments:
        return None
    dtype, dims = arguments[0][0], [d for _, d in arguments]
    for workload in list_workloads():
        for shape in _candidate_shapes(workload, dims, dtype):
            try:
                candidate = tvm.IRModule({"main": workload.prim_func(shape, dtype)})
            except Exception:  # noqa: BLE001 - a shape the workload refuses is not a match
                continue
            if tvm_ffi.structural_equal(candidate, mod):
                return Recognised(workload.name, shape, dtype)
    return None


def describe_function(mod: Any) -> str:
    """A TIR module in a few words for a message: its functions' names and argument tensors."""
    parts = []
    for gvar, func in mod.functions.items():
        arguments = _arguments(func) if hasattr(func, "params") else None
        shown = ", ".join(f"{dt}[{','.join(map(str, d))}]" for dt, d in arguments or [])
        parts.append(f"{gvar.name_hint}({shown})")
    return "; ".join(parts)[:300]

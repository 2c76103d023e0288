"""The template's knobs: the defaults for a block's axes, and the check of an edited template against them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tunelab.core.errors import SpaceError, shown
from tunelab.core.search.space.base import divisors
from tunelab.core.search.space.checks import entry_list, is_int_in
from tunelab.core.search.space.wmma import KNOB_NAMES as WMMA_KNOBS

# Reduction inner loops never go outside their outer loops (that only re-walks memory).
ORDERS_CPU: tuple[str, ...] = ("ro,si,ri", "ro,ri,si", "si,ro,ri")
ORDERS_CUDA: tuple[str, ...] = ("ro,ri,si", "ro,si,ri")
UNROLL_STEPS = (0, 16, 64, 512)
CPU_MAX_INNER = 64
CUDA_MAX_THREAD = 64
CUDA_MAX_INNER = 8
SPLIT_LIMIT = 4096  # candidates beyond this per knob make a space nobody can edit


@dataclass(frozen=True)
class Axis:
    name: str
    extent: int
    kind: str  # "spatial" | "reduce"


def _default_knobs(axes: list[Axis], target_kind: str) -> list[dict[str, Any]]:
    knobs: list[dict[str, Any]] = []
    for axis in axes:
        if target_kind == "cuda" and axis.kind == "spatial":
            cands = [
                [t, i]
                for t in divisors(axis.extent)
                if t <= CUDA_MAX_THREAD
                for i in divisors(axis.extent // t)
                if i <= CUDA_MAX_INNER
            ]
            knobs.append(
                {
                    "name": f"tile_{axis.name}",
                    "type": "split",
                    "axis": axis.name,
                    "parts": 3,
                    "candidates": cands,
                }
            )
        else:
            limit = CPU_MAX_INNER if target_kind == "llvm" else CUDA_MAX_INNER * 4
            cands = [[d] for d in divisors(axis.extent) if d <= limit]
            knobs.append(
                {
                    "name": f"tile_{axis.name}",
                    "type": "split",
                    "axis": axis.name,
                    "parts": 2,
                    "candidates": cands,
                }
            )
    orders = ORDERS_CPU if target_kind == "llvm" else ORDERS_CUDA
    if not any(axis.kind == "reduce" for axis in axes):
        orders = ("ro,ri,si",)  # nothing to reorder (an elementwise compute): spatial inner loops last
    knobs.append({"name": "order", "type": "order", "candidates": list(orders)})
    knobs.append({"name": "unroll", "type": "choice", "candidates": list(UNROLL_STEPS)})
    if target_kind == "llvm":
        knobs.append({"name": "vectorize", "type": "choice", "candidates": [True, False]})
        knobs.append({"name": "parallel", "type": "choice", "candidates": [True, False]})
    else:
        knobs.append({"name": "shared", "type": "choice", "candidates": [True, False]})
        knobs.append({"name": "local", "type": "choice", "candidates": [True, False]})
    return knobs


def check_template(
    data: dict[str, Any], axes: list[Axis], target_kind: str, wmma: tuple[Axis, Axis, Axis] | None = None
) -> list[dict[str, Any]]:
    """Check an edited template against the axes; return its knobs or raise SpaceError with the reason.
    ``wmma``: the (i, j, k) axes a tensor-core kernel fits (tunelab.core.search.space.wmma.wmma_axes), or
    None, when the template may not have the tensor-core knobs."""
    knobs = entry_list(data, "knobs", "a template space")
    by_axis = {a.name: a for a in axes}
    names = [k["name"] for k in knobs if isinstance(k, dict) and isinstance(k.get("name"), str)]
    if len(names) != len(knobs):
        raise SpaceError("every knob must be a JSON object with a name (a string)")
    required = {f"tile_{a.name}" for a in axes} | {"order", "unroll"}
    required |= {"vectorize", "parallel"} if target_kind == "llvm" else {"shared", "local"}
    if set(WMMA_KNOBS) & set(names):
        if wmma is None:
            raise SpaceError(
                "the tensor-core knobs (tensor_core, wmma_i, wmma_j, wmma_k) need a float16 matrix multiply "
                "whose i, j and k are multiples of 16, on a CUDA GPU of sm_70 or later"
            )
        required |= set(WMMA_KNOBS)
    if set(names) != required or len(set(names)) != len(names):
        missing, extra = sorted(required - set(names)), sorted(set(names) - required)
        raise SpaceError(
            f"template knobs must be exactly {sorted(required)} (missing {missing}, unexpected {shown(extra, 120)})"
        )
    cleaned = []
    wmma_axis = dict(zip(WMMA_KNOBS[1:], wmma or (), strict=False))
    for knob in knobs:
        name, cands = knob["name"], knob.get("candidates")
        if not isinstance(cands, list) or not cands:
            raise SpaceError(f"knob {name!r} needs a non-empty list of candidates")
        if len(cands) > SPLIT_LIMIT:
            raise SpaceError(f"knob {name!r} has {len(cands)} candidates; at most {SPLIT_LIMIT} are allowed")
        if any(cands.count(c) > 1 for c in cands):
            raise SpaceError(f"knob {name!r} lists a candidate twice")
        if name in wmma_axis:
            cleaned.append(_check_wmma_knob(name, cands, wmma_axis[name]))
        elif name.startswith("tile_"):
            axis = by_axis[name[5:]]
            parts = 3 if (target_kind == "cuda" and axis.kind == "spatial") else 2
            _check_factors(name, cands, parts, axis.extent, f"axis {axis.name} of extent {axis.extent}")
            cleaned.append(
                {"name": name, "type": "split", "axis": axis.name, "parts": parts, "candidates": cands}
            )
        elif name == "order":
            allowed = ORDERS_CPU if target_kind == "llvm" else ORDERS_CUDA
            bad = [c for c in cands if c not in allowed]
            if bad:
                raise SpaceError(
                    f"knob 'order': {shown(bad[0])} is not a loop order; choose from {list(allowed)}"
                )
            cleaned.append({"name": name, "type": "order", "candidates": cands})
        elif name == "unroll":
            bad = [c for c in cands if not is_int_in(c, 0, 4096)]
            if bad:
                raise SpaceError(f"knob 'unroll': {shown(bad[0])} is not an unroll step between 0 and 4096")
            cleaned.append({"name": name, "type": "choice", "candidates": cands})
        else:
            bad = [c for c in cands if not isinstance(c, bool)]
            if bad:
                raise SpaceError(f"knob {name!r}: {shown(bad[0])} is not true or false")
            cleaned.append({"name": name, "type": "choice", "candidates": cands})
    return cleaned


def _check_wmma_knob(name: str, cands: list[Any], axis: Axis) -> dict[str, Any]:
    """A wmma_i / wmma_j ([warps, fragments]) or wmma_k ([fragments]) knob, in 16-element fragments."""
    from tunelab.core.search.space.wmma import FRAGMENT

    parts = 2 if name == "wmma_k" else 3
    fragments = axis.extent // FRAGMENT
    along = f"the {fragments} fragments of 16 along axis {axis.name} (extent {axis.extent})"
    _check_factors(name, cands, parts, fragments, along)
    return {
        "name": name,
        "type": "split",
        "axis": axis.name,
        "parts": parts,
        "fragment": FRAGMENT,
        "candidates": cands,
    }


def _check_factors(name: str, cands: list[Any], parts: int, total: int, what: str) -> None:
    """Each candidate of a split knob is ``parts - 1`` positive factors whose product divides ``total``
    (``what`` says what that is in the message)."""
    for cand in cands:
        if not isinstance(cand, list) or len(cand) != parts - 1 or not all(is_int_in(f, 1) for f in cand):
            raise SpaceError(
                f"knob {name!r}: candidate {shown(cand)} must be a list of {parts - 1} positive integer factor(s)"
            )
        if total % math.prod(cand) != 0:
            raise SpaceError(f"knob {name!r}: factors {shown(cand)} do not divide {what}")

"""Shape lists: the text that names the shapes a tuned schedule is carried over to, read into shapes."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from typing import Any

from tunelab.core.errors import WorkloadError, shown
from tunelab.core.workloads.catalog import get_workload

MAX_SHAPES = 256


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_INT = re.compile(r"^[+-]?\d+$")


def _values(wl_name: str, name: str, text: str) -> list[int]:
    text = text.strip()
    if _INT.match(text):
        return [int(text)]
    if ".." in text:
        a, _, b = text.partition("..")
        if not (_INT.match(a.strip()) and _INT.match(b.strip())):
            raise WorkloadError(
                f"{wl_name}: cannot read {name}={shown(text)}; a doubling range is A..B, e.g. 16..128"
            )
        lo, hi = int(a), int(b)
        if lo < 1 or hi < lo:
            raise WorkloadError(f"{wl_name}: range {name}={text} needs 1 <= A <= B")
        out = []
        while lo <= hi:
            out.append(lo)
            lo *= 2
        return out
    if ":" in text:
        parts = [p.strip() for p in text.split(":")]
        if len(parts) not in (2, 3) or not all(_INT.match(p) for p in parts):
            raise WorkloadError(
                f"{wl_name}: cannot read {name}={shown(text)}; a stepped range is A:B or A:B:STEP"
            )
        lo, hi = int(parts[0]), int(parts[1])
        step = int(parts[2]) if len(parts) == 3 else 1
        if step < 1 or hi < lo:
            raise WorkloadError(f"{wl_name}: range {name}={text} needs A <= B and STEP >= 1")
        if (hi - lo) // step + 1 > MAX_SHAPES:
            raise WorkloadError(f"{wl_name}: range {name}={text} gives more than {MAX_SHAPES} values")
        return list(range(lo, hi + 1, step))
    raise WorkloadError(
        f"{wl_name}: cannot read the value {shown(text)} of {name}; write an integer, A..B or A:B:STEP"
    )


def parse_shapes(workload: Any, text: str, base: Mapping[str, Any] | None = None) -> list[dict[str, int]]:
    """The shapes a shape-list text names (see the module docstring), each full and checked.

    `workload` is a Workload or its name; `base` is the shape whose values unnamed parameters keep
    (the tuned shape; default: the workload's default shape). Duplicates are dropped, order kept.
    Bad input raises WorkloadError with a one-line message.
    """
    wl = get_workload(workload) if isinstance(workload, str) else workload
    base_shape = wl.parse_shape(dict(base) if base is not None else None)
    if not isinstance(text, str) or not text.strip():
        raise WorkloadError(
            f"{wl.name}: give at least one shape, e.g. M=16,32,64 or M=64,N=64,K=64;M=128,N=128,K=128"
        )
    shapes: list[dict[str, int]] = []
    for group in text.split(";"):
        group = group.strip()
        if not group:
            continue
        if "=" not in group and group in wl.presets:
            shapes.append(wl.parse_shape(group))
            continue
        varied: dict[str, list[int]] = {}
        current: str | None = None
        for item in group.split(","):
            item = item.strip()
            if not item:
                raise WorkloadError(f"{wl.name}: empty item in shape list {shown(group)}")
            if "=" in item:
                name, _, value = item.partition("=")
                name = name.strip()
                if not _NAME.match(name):
                    raise WorkloadError(f"{wl.name}: cannot read shape item {shown(item)}; write NAME=VALUE")
                if name not in base_shape:
                    raise WorkloadError(
                        f"{wl.name}: shape parameter '{name}' is unknown; parameters are {', '.join(wl.param_names)}"
                    )
                if name in varied:
                    raise WorkloadError(
                        f"{wl.name}: shape parameter '{name}' is given twice in {shown(group)}"
                    )
                current = name
                varied[name] = _values(wl.name, name, value)
            else:
                if current is None:
                    hint = f" or a preset ({', '.join(wl.presets)})" if wl.presets else ""
                    where = "" if item == group else f" in {shown(group)}"
                    raise WorkloadError(
                        f"{wl.name}: cannot read {shown(item)}{where}; start with NAME=VALUE{hint}"
                    )
                varied[current].extend(_values(wl.name, current, item))
        names = list(varied)
        count = math.prod(len(v) for v in varied.values())
        if count + len(shapes) > MAX_SHAPES:
            raise WorkloadError(f"{wl.name}: the shape list names more than {MAX_SHAPES} shapes")
        for values in itertools.product(*(varied[n] for n in names)):
            shapes.append(wl.parse_shape({**base_shape, **dict(zip(names, values, strict=True))}))
    if not shapes:
        raise WorkloadError(f"{wl.name}: give at least one shape, e.g. M=16,32,64")
    unique: list[dict[str, int]] = []
    for shape in shapes:
        if shape not in unique:
            unique.append(shape)
    return unique

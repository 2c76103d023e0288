"""Recorded exhaustive spaces (tests/core/data/*_grid_llvm.json, written by record_grid.py), loaded as
the real TemplateSpace they were measured on and its table of latencies (None: the config failed)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.core.records import SessionSpec
from tunelab.core.search.space.base import SearchSpace
from tunelab.core.session.loop import check_spec

DATA = Path(__file__).resolve().parent / "core" / "data"
BENCH_DATA = Path(__file__).resolve().parent / "benchmarks" / "data"


@dataclass(frozen=True)
class RecordedSpace:
    name: str
    space: SearchSpace
    table: dict[str, float | None]  # space.key(config) -> median latency (ms)
    doc: dict[str, Any]  # the recording as written (workload, shape, target, machine, ...)


def recording_names() -> list[str]:
    return sorted(p.name.removesuffix("_grid_llvm.json") for p in DATA.glob("*_grid_llvm.json"))


def load_recorded(name: str, folder: Path = DATA) -> RecordedSpace:
    """The recording ``name`` in ``folder`` (the tests' own, or BENCH_DATA: the benchmarks' larger ones)."""
    doc = json.loads((folder / f"{name}_grid_llvm.json").read_text())
    spec = SessionSpec(workload=doc["workload"], shape=doc["shape"], target="llvm", space_kind="template")
    space = check_spec(spec).space
    data = space.to_json()
    for knob in data["knobs"]:
        knob["candidates"] = doc["knobs"][knob["name"]]
    space = check_spec(SessionSpec(**{**spec.__dict__, "space": data})).space
    table = {
        space.key(t["config"]): (t["latency_ms"] if t["status"] == "ok" else None) for t in doc["trials"]
    }
    assert len(table) == space.size == len(doc["trials"]), f"{name}: the recording is not the whole space"
    return RecordedSpace(name=name, space=space, table=table, doc=doc)

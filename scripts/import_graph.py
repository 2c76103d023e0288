#!/usr/bin/env python3
"""The installed package's import graph, checked: import-linter's contracts, zero import cycles, and the
app and the command line importing the engine only through its front doors (FRONT_DOORS).

    python scripts/import_graph.py            # contracts (pyproject.toml) and cycles; exit 1 on any
    python scripts/import_graph.py --cycles   # only list the cycles

grimp (import-linter's graph builder) reads a package from its folder, and the folders core/ and app/
become tunelab.core and tunelab.app only when installed. So the graph is built from a copy laid out
as the wheel lays it out; every import counts, those inside functions too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def installed_view(into: Path) -> Path:
    """A copy of the sources as site-packages holds them: into/tunelab/{core,app}."""
    package = into / "tunelab"
    shutil.copytree(ROOT / "packaging" / "tunelab", package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("core", "app"):
        shutil.copytree(ROOT / folder, package / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def cycles(view: Path) -> list[list[str]]:
    """Every strongly connected set of modules (each an import cycle), biggest first."""
    sys.path.insert(0, str(view))
    import grimp

    graph = grimp.build_graph("tunelab")
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found, key=len, reverse=True)


# The app and the command line reach the engine through its front doors: the use cases (one module per
# journey), the typed records and their words, the errors, the statistics, shape text, the store (opening
# and reading it); and, for the app, the events of the `tunelab` child processes it starts.
FRONT_DOORS = (
    "tunelab.core.usecases",
    "tunelab.core.records",
    "tunelab.core.errors",
    "tunelab.core.stats",
    "tunelab.core.faults",
    "tunelab.core.workloads.shape_text",
    "tunelab.core.store",
)
FACES = {"tunelab.app": FRONT_DOORS + ("tunelab.core.cli.protocol",), "tunelab.core.cli": FRONT_DOORS}


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def past_front_doors(view: Path) -> list[tuple[str, str]]:
    """Every direct import (inside functions too) from the app or the command line into the engine that
    does not go through a front door. An indirect import goes through the module imported directly, so
    direct imports are the ones to check."""
    sys.path.insert(0, str(view))
    import grimp

    graph = grimp.build_graph("tunelab")
    edges = []
    for face, doors in FACES.items():
        for module in sorted(m for m in graph.modules if _within(m, (face,))):
            for imported in sorted(graph.find_modules_directly_imported_by(module)):
                engine = _within(imported, ("tunelab.core",)) and not _within(imported, (face,))
                if engine and not _within(imported, doors):
                    edges.append((module, imported))
    return edges


def front_door_failures(edges: list[tuple[str, str]]) -> list[str]:
    return [f"{a} imports {b}: reach it through a use case (tunelab.core.usecases)" for a, b in edges]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", action="store_true", help="only list the import cycles")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tunelab-import-graph-") as folder:
        view = installed_view(Path(folder))
        status = 0
        if not args.cycles:
            lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
            env = dict(os.environ, PYTHONPATH=str(view))
            status = subprocess.run(
                [lint, str(ROOT / "pyproject.toml"), "--no-cache"], env=env, cwd=ROOT
            ).returncode
        found = cycles(view)
        doors = [] if args.cycles else front_door_failures(past_front_doors(view))
    for line in doors:
        print(line)
    if not args.cycles and not doors:
        print("the app and the command line reach the engine only through its front doors")
    for component in found:
        print(f"import cycle of {len(component)} modules: {', '.join(component)}")
    if not found:
        print("no import cycles")
    return 1 if status or found or doors else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""docs/ARCHITECTURE.md's list of every module by its one-line job, kept true to the tree.

    python scripts/module_map.py           # exit 1 when a module is missing, gone, or says another job
    python scripts/module_map.py --write   # rewrite the list from the modules' docstrings

A module's job is the first sentence of its docstring; a module without one fails the check.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
BEGIN = "<!-- module map: scripts/module_map.py --write -->"
END = "<!-- end of module map -->"
FOLDERS = {"core": "tunelab.core", "app": "tunelab.app", "packaging/tunelab": "tunelab"}


def job_of(path: Path) -> str:
    """The first sentence of a module's docstring, on one line ("" without a docstring)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def module_lines() -> tuple[list[str], list[str]]:
    """The list's lines, package by package, and the modules that say no job."""
    lines: list[str] = []
    silent: list[str] = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT).as_posix()
            job = job_of(path)
            if not job and path.name != "__init__.py":
                silent.append(rel)
            if job:
                lines.append(f"- `{rel}`: {job.replace('|', '/')}")
    return lines, silent


def rendered() -> str:
    lines, _ = module_lines()
    return "\n".join([BEGIN, *lines, END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the list in docs/ARCHITECTURE.md")
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{DOC.name} has no module map (markers {BEGIN} ... {END})")
        return 1
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    new = head + rendered() + tail
    _, silent = module_lines()
    for rel in silent:
        print(f"{rel}: no docstring saying the module's job")
    if args.write:
        DOC.write_text(new, encoding="utf-8")
    elif new != text:
        print(
            f"{DOC.relative_to(ROOT)}: the module map is out of date (python scripts/module_map.py --write)"
        )
        return 1
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main())

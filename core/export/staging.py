"""Write an export's files safely: a checked folder, a hidden staging folder, moved into place whole.

A full disk is an OutOfSpace (the disk's fault, exit 3) and any other failure to write a TunelabError,
each one line naming the export's folder; nothing of a failed export is left in place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tunelab.core.errors import TunelabError
from tunelab.core.faults import OutOfSpace, out_of_space_error


def export_paths(out: Path, name: str) -> dict[str, Path]:
    """What each format writes (the database: its records file, the one an earlier export left)."""
    return {
        "schedule": out / f"{name}.schedule.json",
        "tvmscript": out / f"{name}.tvmscript.py",
        "library": out / f"{name}.so",
        "database": out / "database" / "database_tuning_record.json",
    }


def check_out_dir(out: Path, paths: list[Path], force: bool) -> None:
    """The export folder exists (created) and can be written, and holds no earlier export at these paths
    (unless ``force``); else TunelabError, before anything is built or written."""
    if out.exists() and not out.is_dir():
        raise TunelabError(f"cannot export into {out}: it is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TunelabError(f"cannot export into {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise TunelabError(f"cannot export into {out}: the folder is read-only")
    earlier = [p for p in paths if p.exists()]
    if earlier and not force:
        raise TunelabError(
            f"{out} already holds an export ({earlier[0].relative_to(out)}); choose another "
            f"folder, or overwrite it",
            option="force",
        )


def guard(path: Path, write: Any) -> None:
    """``write()``; a full disk is an OutOfSpace (exit 3), any other failure to write a TunelabError,
    each one line naming the export's folder."""
    try:
        write()
    except OSError as exc:
        where = path.parent.parent if path.parent.name.startswith(".") else path.parent
        if out_of_space_error(exc):
            raise OutOfSpace(
                f"no space left to write the export into {where} ({exc.strerror or exc}); nothing was exported"
            ) from None
        raise TunelabError(f"cannot write the export into {where}: {exc.strerror or exc}") from None


def write_text(path: Path, text: str) -> None:
    guard(path, lambda: path.write_text(text, encoding="utf-8"))


def staging_folder(out: Path, name: str) -> Path:
    """A hidden folder inside ``out`` (the same disk: moving from it is a rename) for one export."""
    try:
        return Path(tempfile.mkdtemp(prefix=f".{name}.exporting-", dir=out))
    except OSError as exc:
        if out_of_space_error(exc):
            raise OutOfSpace(f"no space left to write the export into {out}: {exc.strerror or exc}") from None
        raise TunelabError(f"cannot export into {out}: {exc.strerror or exc}") from None


def check_database(folder: Path, ms: Any) -> None:
    """The database files as MetaSchedule wrote them must read back whole: its writer does not report a
    full disk (a workload file cut at 4096 bytes, an empty records file were left, and the export said
    it succeeded)."""
    try:
        db = ms.database.JSONDatabase(
            str(folder / "database_workload.json"),
            str(folder / "database_tuning_record.json"),
            allow_missing=False,
        )
        whole = len(db) == 1
    except Exception:  # noqa: BLE001 - a cut line is TVM's parse error
        whole = False
    if not whole:
        free = shutil.disk_usage(folder).free
        raise OutOfSpace(
            f"the MetaSchedule database written into {folder.parent.parent} came out cut short (its disk "
            f"has {free:,} bytes free); nothing was exported"
        )


def move_into_place(staging: Path, out: Path, name: str, formats: tuple[str, ...]) -> dict[str, str]:
    """Move the whole export from ``staging`` into ``out`` (renames on one disk); the schedule file, which
    makes a folder read as an export, last."""
    written: dict[str, str] = {}
    paths = export_paths(out, name)
    for kind in sorted(formats, key=lambda f: f == "schedule"):
        final = paths[kind]
        if kind == "database":
            folder = out / "database"
            if not folder.is_dir():
                guard(folder, lambda d=folder: os.replace(staging / "database", d))
            else:  # an earlier export's (force): its two files replaced, anything else there kept
                for file in ("database_workload.json", "database_tuning_record.json"):
                    guard(folder / file, lambda f=file, d=folder: os.replace(staging / "database" / f, d / f))
            written[kind] = str(folder)
        else:
            guard(final, lambda k=kind, f=final: os.replace(staging / f.name, f))
            written[kind] = str(final)
    return {kind: written[kind] for kind in formats if kind in written}

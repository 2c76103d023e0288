"""The measurement's temporary folder: the problem's files in it, and a full folder told from a config's failure."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import numpy as np

from tunelab.core.errors import StoreFailure
from tunelab.core.faults import OutOfSpace, out_of_space, out_of_space_error
from tunelab.core.measure.outcome import _one_line

# A build or run that fails while the temporary folder has less than this left failed for want of space
# (a build's objects and library are tens of KB to a few MB), not because of its config.
TEMP_FREE_FLOOR = 1 << 20


def problem_folder(
    workload: Any, shape: dict[str, int], dtype: str, seed: int, check: bool
) -> tuple[str, tuple[tuple[str, ...], str | None]]:
    """A fresh folder under the temporary folder holding the problem's files: (the folder, the problem as
    the runner's workers load it); a StoreFailure (or OutOfSpace) naming the folder when it cannot be made."""
    try:
        folder = tempfile.mkdtemp(prefix="tunelab-measure-")
    except OSError as exc:
        raise StoreFailure(
            f"cannot make a folder in the temporary folder {tempfile.gettempdir()}: {exc.strerror or exc}"
        ) from None
    try:
        return folder, _write_problem(folder, workload, shape, dtype, seed, check)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _temp_free_bytes() -> int | None:
    try:
        return shutil.disk_usage(tempfile.gettempdir()).free
    except OSError:
        return None


def _temp_folder_full(message: str) -> bool:
    """Whether a build's or run's failure is the temporary folder's: its words say so, or it has less than
    :data:`TEMP_FREE_FLOOR` left. A worker that LLVM ends on a full disk ("LLVM ERROR: IO failure on
    output stream") says only that it exited with status 1, on its own stderr."""
    if out_of_space(message):
        return True
    free = _temp_free_bytes()
    return free is not None and free < TEMP_FREE_FLOOR


def _disk_full_line(what: str, message: str) -> str:
    """One line naming the full folder and the words that said so ('ld: final link failed: No space ...')."""
    said = next((line.strip() for line in message.splitlines() if out_of_space(line)), _one_line(message))
    free = _temp_free_bytes()
    left = "" if free is None else f", {free:,} bytes free"
    return (
        f"the temporary folder {tempfile.gettempdir()} is full{left}: {what} failed "
        f"({said[:200]}); free space there or point TMPDIR at a larger folder."
    )


def _write_problem(
    folder: str, workload: Any, shape: dict[str, int], dtype: str, seed: int, check: bool
) -> tuple[tuple[str, ...], str | None]:
    """The deterministic inputs (and, when checked, the NumPy reference) as .npy files in ``folder``; a
    folder that cannot hold them (a full disk: NumPy's "4096 requested and 992 written") is a StoreFailure
    naming it."""
    inputs = workload.make_inputs(shape, dtype, seed)
    paths = []
    try:
        for j, x in enumerate(inputs):
            paths.append(os.path.join(folder, f"input{j}.npy"))
            np.save(paths[-1], x)
        expected = None
        if check:
            expected = os.path.join(folder, "expected.npy")
            np.save(expected, workload.reference(inputs, shape, dtype))
    except OSError as exc:
        if out_of_space_error(exc):
            raise OutOfSpace(_disk_full_line("writing the problem's inputs", str(exc))) from None
        raise StoreFailure(
            f"cannot write the problem's inputs into the temporary folder {folder}: {exc.strerror or exc}"
        ) from None
    return tuple(paths), expected

"""The GPU bundle (scripts/gpu_bundle.py): a wheel too large for one run packed, cut into parts shared among
runs, and put back together and installed by pip without an index, as the GPU machine does it. On a small
real wheel (the same code path as apache-tvm's 100 MB one, which takes minutes to compress)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from gpu_bundle import MANIFEST, install_bundle, pack_wheel, write_runs


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(folder: Path) -> Path:
    """A real wheel of a package ``tinypkg`` 1.0 with 40 KB of data that does not compress."""
    files = {
        "tinypkg/__init__.py": b"from pathlib import Path\nBLOB = (Path(__file__).parent / 'blob.bin').read_bytes()\n",
        "tinypkg/blob.bin": os.urandom(40_000),
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "\n".join(_record_line(n, d) for n, d in files.items()) + "\ntinypkg-1.0.dist-info/RECORD,,\n"
    files["tinypkg-1.0.dist-info/RECORD"] = record.encode()
    wheel = folder / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


def _bundle(tmp_path: Path) -> tuple[Path, list[list[Path]], bytes]:
    wheel = _wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        blob = z.read("tinypkg/blob.bin")
    parts = pack_wheel(wheel, tmp_path / "packed", part_bytes=16_000)
    out = tmp_path / "bundle"
    runs = write_runs(out, parts, [], "tinypkg==1.0", [], wheel.name, budget=30_000)
    return out, runs, blob


def test_a_wheel_in_parts_over_several_runs_installs_without_an_index(tmp_path):
    out, runs, blob = _bundle(tmp_path)
    assert len(runs) >= 2  # 40 KB that does not compress, at most 30 KB a run
    assert all(sum(p.stat().st_size for p in (out / f"run{k}").iterdir() if p.is_file()) <= 30_000 + 2_000
               for k in range(1, len(runs) + 1))  # fmt: skip
    assert (out / f"run{len(runs)}" / MANIFEST).is_file()  # the manifest travels with the last run
    # on the GPU machine: every run's files copied into one folder, then installed
    gathered = tmp_path / "gathered"
    gathered.mkdir()
    for run in sorted(out.iterdir()):
        for f in run.iterdir():
            shutil.copy(f, gathered / f.name)
    site = tmp_path / "site"
    commands = install_bundle(gathered, target=site)
    assert "--no-index" in commands[0]
    found = subprocess.run(
        [sys.executable, "-c", "import tinypkg, sys; sys.stdout.buffer.write(tinypkg.BLOB)"],
        env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, check=True,
    ).stdout  # fmt: skip
    assert found == blob
    assert not any(p.name.startswith("tunelab-wheel-") for p in gathered.iterdir())  # its scratch is gone


@pytest.mark.parametrize("fault", ["missing", "damaged"])
def test_a_missing_or_damaged_part_is_one_line_naming_it(tmp_path, fault):
    out, runs, _ = _bundle(tmp_path)
    gathered = tmp_path / "gathered"
    gathered.mkdir()
    for run in sorted(out.iterdir()):
        for f in run.iterdir():
            shutil.copy(f, gathered / f.name)
    part = sorted(gathered.glob("*.part*"))[0]
    if fault == "missing":
        part.unlink()
    else:
        data = bytearray(part.read_bytes())
        data[100] ^= 0xFF
        part.write_bytes(bytes(data))
    with pytest.raises(SystemExit) as caught:
        install_bundle(gathered, target=tmp_path / "site")
    message = str(caught.value)
    assert part.name in message and "\n" not in message
    assert ("missing" if fault == "missing" else "damaged") in message
    assert not (tmp_path / "site").exists()  # nothing installed

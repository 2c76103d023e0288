"""What the GPU machine lacks, packed to travel with the prepared GPU check (issue 12; scripts/gpu_check.py).

The GPU machine has no network and takes at most 64 MiB per run, the checkout included. It has Python 3.12,
NumPy, SciPy, psutil, cloudpickle and PyTorch, but not TVM, its FFI, xgboost, sqlite-utils or archspec.
apache-tvm's wheel is 100 MB (its ``libtvm_compiler.so`` 259 MB unpacked), so it goes as the wheel's files in
one ``tar`` under ``xz -9``, cut into parts that fit beside the checkout, one part per run:

    python3 scripts/gpu_bundle.py --out bundle                 # here: download, pack, cut; prints the runs

and on the GPU machine, while it is held (files outside a run's output folder stay between runs):

    run 1..n-1:  mkdir -p /tmp/tunelab-bundle && cp bundle/run1/* /tmp/tunelab-bundle/
    run n:       cp -r bundle/runN/* /tmp/tunelab-bundle/ &&
                 python3 scripts/gpu_check.py --bundle /tmp/tunelab-bundle --out $OUT --run breadth   # or depth, tuners

``gpu_check.py --bundle`` joins the parts, checks them against the manifest's SHA-256, unpacks the wheel,
zips it again (stored, no compression) and installs it with the other wheels by ``pip --no-index``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
RUN_LIMIT = 64 * MIB  # what one run may carry, the checkout included
MARGIN = 2 * MIB  # for untracked files and the manifest
TVM = "apache-tvm==0.27.0.post1"
# The rest of what tunelab's core and TVM import, as pip resolves it for the GPU machine's Python.
OTHERS = ("apache-tvm-ffi==0.1.14.post1", "xgboost-cpu>=3.0,<4", "sqlite-utils>=3.36", "archspec>=0.2.5",
          "platformdirs>=4.0", "ml_dtypes", "typing_extensions", "tornado>=6.0")  # fmt: skip
# The GPU image has these (and pip counts what is installed): carrying them would only take room.
IMAGE_HAS = ("numpy", "scipy", "psutil", "cloudpickle", "torch", "nvidia-ml-py", "cupy", "pip")
MANIFEST = "manifest.json"
PART = "tvm-wheel.tar.xz.part"


def checkout_bytes() -> int:
    """The size of the checkout's tracked files: what every run carries before any bundle part."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.split(
        b"\0"
    )
    return sum((ROOT / n.decode()).stat().st_size for n in names if n and (ROOT / n.decode()).is_file())


def download(folder: Path, python_version: str) -> tuple[Path, list[Path]]:
    """apache-tvm's wheel and the others' for ``python_version`` on manylinux x86_64 (binary only)."""
    folder.mkdir(parents=True, exist_ok=True)
    common = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
              "--python-version", python_version, "--platform", "manylinux_2_28_x86_64", "-d", str(folder)]  # fmt: skip
    subprocess.run([*common, "--no-deps", TVM], check=True)
    subprocess.run([*common, *OTHERS], check=True)
    tvm = next(folder.glob("apache_tvm-*.whl"))
    normal = {n.replace("-", "_").lower() for n in IMAGE_HAS}
    others = [
        w for w in sorted(folder.glob("*.whl"))
        if w != tvm and w.name.split("-")[0].lower() not in normal
    ]  # fmt: skip
    return tvm, others


def pack_wheel(wheel: Path, out: Path, part_bytes: int) -> list[Path]:
    """The wheel's files as one ``tar.xz`` (xz -9) cut into parts of at most ``part_bytes``."""
    out.mkdir(parents=True, exist_ok=True)
    packed = out / "tvm-wheel.tar.xz"
    with tempfile.TemporaryDirectory(prefix="tunelab-bundle-") as scratch:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(scratch)
        with tarfile.open(packed, "w:xz", preset=9) as tar:
            for path in sorted(Path(scratch).iterdir()):
                tar.add(path, arcname=path.name)
    parts = []
    with packed.open("rb") as src:
        while chunk := src.read(part_bytes):
            part = out / f"{PART}{len(parts):02d}"
            part.write_bytes(chunk)
            parts.append(part)
    packed.unlink()
    return parts


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(MIB):
            h.update(block)
    return h.hexdigest()


def unpack_wheel(folder: Path, scratch: Path) -> Path:
    """The wheel again from the parts in ``folder`` (checked against the manifest): unpacked, zipped
    stored; its path. A missing or damaged part is one line naming it."""
    manifest = json.loads((folder / MANIFEST).read_text())
    for name, digest in manifest["parts"].items():
        part = folder / name
        if not part.is_file():
            raise SystemExit(f"bundle part {name} is missing from {folder}: copy every run's files there")
        if sha256(part) != digest:
            raise SystemExit(f"bundle part {name} in {folder} is damaged (its SHA-256 differs)")
    joined = scratch / "tvm-wheel.tar.xz"
    with joined.open("wb") as out:
        for name in manifest["parts"]:
            with (folder / name).open("rb") as src:
                shutil.copyfileobj(src, out)
    files = scratch / "files"
    with lzma.open(joined) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
        tar.extractall(files, filter="data")
    joined.unlink()
    wheel = scratch / manifest["wheel"]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        for path in sorted(files.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(files).as_posix())
    shutil.rmtree(files)
    return wheel


def install_bundle(folder: Path, target: Path | None = None) -> list[str]:
    """Install the bundle in ``folder``: apache-tvm rebuilt from its parts, then it and the other wheels by
    ``pip --no-index`` (``target``: into that folder instead of the environment, for tests); the commands."""
    manifest = json.loads((folder / MANIFEST).read_text())
    with tempfile.TemporaryDirectory(prefix="tunelab-wheel-", dir=folder) as scratch:
        unpack_wheel(folder, Path(scratch))  # found by pip through --find-links
        command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links",
                   str(folder / "wheels"), "--find-links", str(scratch)]  # fmt: skip
        if target is not None:
            command += ["--target", str(target)]
        command += [manifest["requirement"], *manifest["also"]]
        subprocess.run(command, check=True, timeout=900)
    return [" ".join(command)]


def write_runs(out: Path, parts: list[Path], others: list[Path], requirement: str, also: list[str],
               wheel_name: str, budget: int) -> list[list[Path]]:  # fmt: skip
    """Share the parts and wheels among runs of at most ``budget`` bytes each; the manifest and the
    wheels go with the last run. ``out/runK/`` holds run K's files."""
    runs: list[list[Path]] = [[]]
    sizes = [0]
    for item in [*parts, *others]:
        size = item.stat().st_size
        if size > budget:
            raise SystemExit(
                f"{item.name} ({size / MIB:.1f} MiB) does not fit beside the checkout in one run"
            )
        if sizes[-1] + size > budget:
            runs.append([])
            sizes.append(0)
        runs[-1].append(item)
        sizes[-1] += size
    for k, files in enumerate(runs, 1):
        folder = out / f"run{k}"
        folder.mkdir(parents=True, exist_ok=True)
        for f in files:
            dest = folder / "wheels" / f.name if f.suffix == ".whl" else folder / f.name
            dest.parent.mkdir(exist_ok=True)
            shutil.move(str(f), dest)
    manifest = {"wheel": wheel_name, "requirement": requirement, "also": also,
                "parts": {p.name: sha256(next(out.glob(f"run*/{p.name}"))) for p in parts}}  # fmt: skip
    (out / f"run{len(runs)}" / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="the bundle's folder (ignored by git: bundle/)"
    )
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python (default 3.12)")
    args = parser.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        raise SystemExit(f"{args.out} is not empty: give a new folder")
    budget = RUN_LIMIT - checkout_bytes() - MARGIN
    downloads = args.out / "downloads"
    tvm, others = download(downloads, args.python_version)
    parts = pack_wheel(tvm, args.out / "packed", budget)
    also = sorted({w.name.split("-")[0].replace("_", "-") for w in others})
    runs = write_runs(args.out, parts, others, TVM, also, tvm.name, budget)
    shutil.rmtree(downloads)
    shutil.rmtree(args.out / "packed", ignore_errors=True)
    for k in range(1, len(runs) + 1):
        size = sum(f.stat().st_size for f in (args.out / f"run{k}").rglob("*") if f.is_file())
        print(f"run {k}: carry {args.out / f'run{k}'} ({size / MIB:.1f} MiB beside the checkout)")
    print(f"each run may carry {budget / MIB:.1f} MiB beside the checkout ({checkout_bytes() / MIB:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

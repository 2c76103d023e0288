"""Before a session measures anything: does a vectorized kernel built for its target run here?

The feature check of tunelab.core.target.host_cpu compares what LLVM implies for an `mcpu` with what the OS
reports; the self-check is the proof. It builds one small vectorized, parallel kernel (an FMA
loop and a reduction, the instructions tuned kernels use) for the target, runs it in a child
process and checks its result. A child that dies tells how (SIGILL: an instruction this CPU
lacks), and the session is not started. A pass is cached per target and machine, so it costs
once (about 3 s: the child's TVM import) and not per session.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from tunelab.core.errors import TargetError, first_line
from tunelab.core.faults import PLANT_ENV, describe_exit
from tunelab.core.target.info import TargetInfo

SELF_CHECK_VERSION = 1
CACHE_ENV = "TUNELAB_CACHE_DIR"
TIMEOUT_S = 120.0
N = 4096

# Runs in the child: load the kernel, run it on known inputs, compare with NumPy.
_CHILD = r"""
import sys
import numpy as np
from tunelab.core.faults import plant
fault = plant("selfcheck")
import tvm
from tunelab.core.target.selfcheck import check_inputs, check_outputs_ok
lib = tvm.runtime.load_module(sys.argv[1])
n = int(sys.argv[2])
a, b = check_inputs(n)
dev = tvm.cpu(0)
ta, tb = tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev)
tc, td = tvm.runtime.tensor(np.zeros(n, "float32"), dev), tvm.runtime.tensor(np.zeros(1, "float32"), dev)
lib["main"](ta, tb, tc, td)
if fault == "wrong":
    tc = tvm.runtime.tensor(np.zeros(n, "float32"), dev)
sys.exit(0 if check_outputs_ok(a, b, tc.numpy(), td.numpy()) else 3)
"""


def check_inputs(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    """The self-check kernel's two inputs (known values: the result is checked against NumPy)."""
    return np.linspace(-1.0, 1.0, n, dtype="float32"), np.linspace(0.5, 2.0, n, dtype="float32")


def check_outputs_ok(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> bool:
    """Whether the kernel computed c = a * b + a and d = a · b."""
    ok = np.allclose(c, a * b + a, rtol=1e-5, atol=1e-5)
    return bool(ok and np.allclose(d[0], float(np.dot(a, b)), rtol=1e-3))


def _cache_file() -> Path:
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        import platformdirs

        folder = platformdirs.user_cache_dir("tunelab")
    return Path(folder) / "selfcheck.json"


def _key(target: TargetInfo) -> str:
    import tvm

    from tunelab.core.target.host_cpu import host_cpu

    text = json.dumps(
        [SELF_CHECK_VERSION, target.json, host_cpu().fingerprint, tvm.__version__], sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _cached(key: str) -> bool:
    try:
        return key in json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return False


def _remember(key: str) -> None:
    path = _cache_file()
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[key] = time.time()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    except OSError:  # an unwritable cache only costs the check again next time
        pass


def build_check_kernel(target: TargetInfo, out: Path) -> None:
    """The self-check's kernel for ``target`` as a library at ``out`` (``.so``; ``.tar``: objects to be
    linked where it runs, as a remote server links them)."""
    import tvm
    from tvm import te
    from tvm.s_tir import Schedule

    a = te.placeholder((N,), "float32", name="A")
    b = te.placeholder((N,), "float32", name="B")
    c = te.compute((N,), lambda i: a[i] * b[i] + a[i], name="C")
    k = te.reduce_axis((0, N), name="k")
    d = te.compute((1,), lambda _: te.sum(a[k] * b[k], axis=k), name="D")
    sch = Schedule(te.create_prim_func([a, b, c, d]))
    outer, inner = sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, 64])
    sch.parallel(outer)
    sch.vectorize(inner)
    block = sch.get_sblock("D")
    _, kk = sch.get_loops(block)
    ko, ki = sch.split(kk, [None, 16])
    rf = sch.rfactor(ki, 0)
    sch.vectorize(sch.get_loops(rf)[-1])
    tvm.compile(sch.mod, target=target.tvm_target()).export_library(str(out))


@contextmanager
def built_check_kernel(target: TargetInfo, name: str, prefix: str) -> Iterator[Path]:
    """The self-check's kernel for ``target`` built as ``name`` (see :func:`build_check_kernel`) in a
    temporary folder that is removed when the block ends; TargetError when it cannot be built here."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        lib = Path(folder) / name
        try:
            build_check_kernel(target, lib)
        except Exception as exc:  # noqa: BLE001 - LLVM and TVM raise many kinds; all mean this target does not build here
            mcpu = target.json.get("mcpu", "generic")
            raise TargetError(f"kernels for {mcpu} cannot be built here: {first_line(exc)}") from None
        yield lib


def self_check(target: TargetInfo, *, use_cache: bool = True) -> None:
    """Raise TargetError (naming the signal and its cause) unless a kernel for `target` runs here."""
    if target.kind != "llvm" or not target.can_run:
        return  # CUDA kernels are checked by the runner itself; an unrunnable target is refused elsewhere
    key = _key(target)
    if use_cache and _cached(key) and not os.environ.get(PLANT_ENV):
        return
    mcpu = target.json.get("mcpu", "generic")
    with built_check_kernel(target, "selfcheck.so", "tunelab-selfcheck-") as lib:
        try:
            child = subprocess.run(
                [sys.executable, "-c", _CHILD, str(lib), str(N)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise TargetError(
                f"a kernel built for {mcpu} hung here for {TIMEOUT_S:.0f} s; choose a target with another mcpu",
                option="target",
            ) from None
    if child.returncode == 3:
        raise TargetError(
            f"a kernel built for {mcpu} computes wrong results here; choose a target with another mcpu",
            option="target",
        )
    if child.returncode != 0:
        from tunelab.core.target.host_cpu import choose_cpu, host_cpu, missing_features

        host = host_cpu()
        lacks = missing_features(str(mcpu), tuple(target.json.get("mattr") or ()), host)
        lacking = f"; this CPU lacks {', '.join(lacks[:4])}" if lacks else ""
        detail = child.stderr.strip().splitlines()[-1:] if child.returncode > 0 else []
        raise TargetError(
            f"kernels built for {mcpu} {describe_exit(child.returncode)} here"
            + (f": {detail[0]}" if detail else "")
            + lacking
            + f'; choose the target \'{{"kind":"llvm","mcpu":"{choose_cpu(host).mcpu}"}}\'',
            option="target",
        )
    _remember(key)

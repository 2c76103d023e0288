"""`tunelab compile`: build a workload's space for a target without measuring anything.

For people who prepare a tuning run for another machine (a GPU this one does not have included) and for
CI: a few distinct configs of the space are sampled, each is scheduled and built, and what the build
made is written out — for CUDA the kernel source TVM generated and the PTX nvcc makes of it (TVM keeps
CUDA *source* in the module and compiles it only when it is loaded on a GPU, so a build alone proves
nothing about nvcc), for LLVM the LLVM IR and the assembly. A config that does not schedule, build or
compile is reported with its reason, grouped, so a space whose every point fails says why once; configs
the space itself rejects (on a GPU, most random points of an auto space exceed its thread or shared-memory
limits) are drawn again, and counted with their reasons.

Files in the output folder, for sample ``NN``: ``NN.json`` (its config, the schedule's trace, the
outcome), ``NN.cu`` and ``NN.ptx`` (CUDA) or ``NN.ll`` and ``NN.s`` (LLVM); and ``compile.json``, the
report (:class:`CompileReport`).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError, TargetError, TunelabError
from tunelab.core.records_json import JsonRecord
from tunelab.core.search.space.factory import make_space
from tunelab.core.search.space.tvm_context import InvalidSchedule
from tunelab.core.target.build import build_scope
from tunelab.core.target.info import TargetInfo, resolve_target
from tunelab.core.workloads.catalog import get_workload
from tunelab.core.workloads.shape_text import format_shape

REPORT_FILE = "compile.json"
MAX_SAMPLES = 256
# The PTX instructions that say a kernel runs on tensor cores (WMMA fragments or warp-level MMA).
TENSOR_CORE_PTX = re.compile(rb"\b(wmma\.mma|mma\.sync|wgmma\.mma_async)\b")
SAMPLE_TRIES = 50  # draws per wanted sample before the space is taken as unable to give more


@dataclass(frozen=True)
class CompiledSample(JsonRecord):
    """One sampled config and what became of it."""

    index: int
    config: Any
    ok: bool
    stage: str  # "built" | "build" | "nvcc"
    reason: str | None = None
    files: tuple[str, ...] = ()  # names inside the output folder
    tensor_core: bool = False  # its PTX uses tensor-core instructions (CUDA only)


@dataclass(frozen=True)
class CompileReport:
    workload: str
    shape: dict[str, int]
    dtype: str
    target: dict[str, Any]
    target_description: str
    space_kind: str
    space_size: int
    asked: int
    out_dir: str
    samples: tuple[CompiledSample, ...] = field(default_factory=tuple)
    draws: int = 0  # distinct configs drawn to find the samples
    rejected: tuple[tuple[str, int], ...] = ()  # why drawn configs did not schedule, most frequent first

    @property
    def built(self) -> int:
        return sum(1 for s in self.samples if s.ok)

    @property
    def tensor_core(self) -> int:
        return sum(1 for s in self.samples if s.tensor_core)

    def failure_reasons(self) -> list[tuple[str, int]]:
        """The reasons of the sampled schedules that did not build, most frequent first."""
        counts = Counter(f"{s.stage}: {s.reason}" for s in self.samples if not s.ok)
        return counts.most_common()

    def summary(self) -> str:
        what = f"{self.workload} {format_shape(self.shape)} {self.dtype} ({self.space_kind} space)"
        text = (
            f"built {self.built} of {len(self.samples)} sampled schedules of {what} for "
            f"{self.target_description} into {self.out_dir}"
        )
        if self.target.get("kind") == "cuda" and self.built:
            text += f"; {self.tensor_core} of them use tensor cores (mma/wmma in the PTX)"
        if len(self.samples) < self.asked:
            text += f" (only {len(self.samples)} of {self.draws} distinct configs drawn scheduled)"
        if self.rejected:
            n_rejected = sum(n for _, n in self.rejected)
            text += f"\n{n_rejected} of {self.draws} configs drawn did not schedule: " + "; ".join(
                f"{reason} ({n})" for reason, n in self.rejected[:5]
            )
        reasons = self.failure_reasons()
        if reasons:
            text += "\nnot built: " + "; ".join(f"{reason} ({n})" for reason, n in reasons[:5])
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "shape": self.shape,
            "dtype": self.dtype,
            "target": self.target,
            "target_description": self.target_description,
            "space_kind": self.space_kind,
            "space_size": self.space_size,
            "asked": self.asked,
            "out_dir": self.out_dir,
            "built": self.built,
            "tensor_core": self.tensor_core,
            "not_built": [{"reason": r, "count": n} for r, n in self.failure_reasons()],
            "draws": self.draws,
            "rejected": [{"reason": r, "count": n} for r, n in self.rejected],
            "samples": [s.to_json() for s in self.samples],
        }


def compile_space(
    workload_name: str,
    *,
    shape: Any = None,
    dtype: str | None = None,
    target: str | dict[str, Any] = "auto",
    space_kind: str = "template",
    space_data: dict[str, Any] | None = None,
    samples: int = 8,
    seed: int = 0,
    out_dir: str | Path,
    force: bool = False,
    custom_source: str | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> CompileReport:
    """Sample ``samples`` distinct configs of the space, build each for ``target`` and write what the build
    made into ``out_dir``. Every input is checked before the folder is touched (a TunelabError)."""
    if not 1 <= samples <= MAX_SAMPLES:
        raise TunelabError(f"--samples must be 1..{MAX_SAMPLES}, not {samples}")
    if workload_name == "custom" and isinstance(custom_source, str):
        from tunelab.core.workloads.custom import vet_custom

        vet_custom(custom_source, build=True, shape=shape, dtype=dtype or None)
    workload = get_workload(workload_name, custom_source)
    parsed = workload.parse_shape(shape, complete=True)
    dtype = workload.check_dtype(dtype or None)
    info = resolve_target(
        target, elsewhere=True
    )  # built for it, run nowhere: another CPU or arch may be named
    nvcc = shutil.which("nvcc") if info.kind == "cuda" else None
    if info.kind == "cuda" and nvcc is None:
        raise TargetError("compiling for CUDA needs nvcc on PATH (the CUDA toolkit); none was found")
    out = Path(out_dir)
    _check_out_dir(out, force)
    space = make_space(workload, parsed, dtype, info, space_kind, space_data)
    if space.size < 1:
        raise SpaceError("the search space is empty")
    _prepare_out_dir(out)  # every input accepted: only now is the folder touched
    found, draws, rejected = _schedulable_configs(space, samples, seed, on_progress)
    done: list[CompiledSample] = []
    for index, (config, sch) in enumerate(found):
        if on_progress is not None:
            on_progress(f"building sample {index + 1} of {len(found)}")
        done.append(_compile_one(sch, config, index, info, out))
    report = CompileReport(
        workload=workload.name,
        shape=parsed,
        dtype=dtype,
        target=dict(info.json),
        target_description=info.description,
        space_kind=space.kind,
        space_size=int(space.size),
        asked=samples,
        out_dir=str(out),
        samples=tuple(done),
        draws=draws,
        rejected=tuple(rejected.most_common()),
    )
    (out / REPORT_FILE).write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    return report


def _check_out_dir(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise TunelabError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise TunelabError(
                f"--out {out} is not empty; give another folder or --force to replace an earlier "
                "compile there",
            )
        if not (out / REPORT_FILE).is_file():
            raise TunelabError(
                f"--out {out} holds files that are not an earlier compile's; --force replaces only those",
            )


def _prepare_out_dir(out: Path) -> None:
    """Remove an earlier compile's files (``_check_out_dir`` allowed it) and make the folder."""
    if out.is_dir():
        for old in out.iterdir():
            if old.is_file() and (
                old.name == REPORT_FILE or re.fullmatch(r"\d+\.(json|cu|ptx|ll|s)", old.name)
            ):
                old.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TunelabError(f"--out {out}: {exc.strerror or exc}") from None


def _schedulable_configs(
    space: Any, samples: int, seed: int, on_progress: Callable[[str], None] | None
) -> tuple[list[tuple[Any, Any]], int, Counter[str]]:
    """Draw distinct configs until ``samples`` of them schedule (the space's own checks pass: on a GPU,
    VerifyGPUCode's thread and shared-memory limits, which most random points of an auto space exceed),
    or the draws run out. Returns the (config, schedule) pairs, the number of distinct draws and why the
    rejected ones were rejected."""
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    found: list[tuple[Any, Any]] = []
    rejected: Counter[str] = Counter()
    for _ in range(samples * SAMPLE_TRIES):
        config = space.sample(rng)
        key = space.key(config)
        if key in seen:
            continue
        seen.add(key)
        try:
            found.append((config, space.schedule(config)))
        except (InvalidSchedule, SpaceError) as exc:
            rejected[_first_line(exc)] += 1
            continue
        if on_progress is not None:
            on_progress(f"sampled {len(found)} of {samples} schedules ({len(seen)} draws)")
        if len(found) == samples:
            break
    return found, len(seen), rejected


def _compile_one(sch: Any, config: Any, index: int, info: TargetInfo, out: Path) -> CompiledSample:
    import tvm

    stem = f"{index:02d}"
    record: dict[str, Any] = {"config": config}
    files: list[str] = []

    def finish(ok: bool, stage: str, reason: str | None = None, tensor_core: bool = False) -> CompiledSample:
        record.update(ok=ok, stage=stage, reason=reason, tensor_core=tensor_core)
        (out / f"{stem}.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
        return CompiledSample(index, config, ok, stage, reason, (f"{stem}.json", *files), tensor_core)

    try:
        record["trace"] = sch.trace.as_python()
    except Exception:  # noqa: BLE001 - the trace text is for people; the build decides
        record["trace"] = None
    try:
        with build_scope(sch.mod, info.tvm_target()):
            executable = tvm.compile(sch.mod, info.tvm_target())
    except Exception as exc:  # noqa: BLE001 - TVM raises many types; the reason is what matters
        return finish(False, "build", _first_line(exc))
    if info.kind != "cuda":
        for fmt, suffix in (("ll", "ll"), ("asm", "s")):
            try:
                text = executable.mod.inspect_source(fmt)
            except Exception:  # noqa: BLE001 - a format this module does not keep
                continue
            (out / f"{stem}.{suffix}").write_text(text)
            files.append(f"{stem}.{suffix}")
        return finish(True, "built")
    devices = [m for m in executable.mod.imports if m.kind == "cuda"]
    if not devices:
        return finish(False, "build", "the build made no CUDA kernel")
    source = devices[0].inspect_source("cuda")
    (out / f"{stem}.cu").write_text(source)
    files.append(f"{stem}.cu")
    try:
        ptx = _nvcc_ptx(source, info)
    except Exception as exc:  # noqa: BLE001 - nvcc's own message is the reason
        return finish(False, "nvcc", _first_line(exc))
    (out / f"{stem}.ptx").write_bytes(ptx)
    files.append(f"{stem}.ptx")
    return finish(True, "built", tensor_core=bool(TENSOR_CORE_PTX.search(ptx)))


def _nvcc_ptx(source: str, info: TargetInfo) -> bytes:
    from tvm.support import nvcc

    with info.tvm_target():  # nvcc's options follow the target's arch when it is in scope
        ptx = nvcc.compile_cuda(source, target_format="ptx", arch=info.json["arch"], compiler="nvcc")
    return bytes(ptx)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    # TVM's errors end with the message after a traceback; the last line says what went wrong
    text = lines[-1] if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."

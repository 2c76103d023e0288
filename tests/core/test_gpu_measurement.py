"""GPU measurement done right, the parts that hold without a GPU (issue 12 part 3): when the L2 is
flushed, the flush kernel itself (built for CUDA and compiled by nvcc here), the options' plumbing and
bad input, and the clock lock that says why NVML refused."""

from __future__ import annotations

import shutil

import pytest
import tvm
from specs import small_spec  # the tests' helpers

from tunelab.core.errors import TunelabError
from tunelab.core.measure.l2_flush import FALLBACK_L2_BYTES, flush_module, wants_flush
from tunelab.core.records import MeasureOptions
from tunelab.core.session.loop import check_spec
from tunelab.core.telemetry.clock_lock import ClockLock, _marker


class FakeGpu:
    """Only what wants_flush reads off a device: its DLPack type and L2 size (no kernel runs on it)."""

    def __init__(self, l2: int | None) -> None:
        self.l2_cache_size_bytes = l2

    def dlpack_device_type(self) -> int:
        return 2


def test_the_l2_is_flushed_where_the_data_fits_in_it_and_never_on_a_cpu():
    gpu = FakeGpu(50 << 20)
    assert wants_flush("auto", gpu, 12 << 20) and not wants_flush("auto", gpu, 96 << 20)
    assert wants_flush("on", gpu, 96 << 20) and not wants_flush("off", gpu, 1)
    assert wants_flush("auto", FakeGpu(None), FALLBACK_L2_BYTES)  # a device that does not say: 50 MB
    assert not wants_flush("on", tvm.cpu(0), 1)  # the CPU's option is cache_flush


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_flush_kernel_builds_for_cuda_and_nvcc_compiles_it():
    from tvm.support import nvcc

    module = flush_module(1 << 20)
    [device] = [m for m in module.mod.imports if m.kind == "cuda"]
    source = device.inspect_source("cuda")
    assert "__global__" in source and "blockIdx.x" in source
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
    with target:
        ptx = bytes(nvcc.compile_cuda(source, target_format="ptx", arch="sm_90", compiler="nvcc"))
    assert b".entry" in ptx and b"st.global" in ptx


def test_measurement_options_are_checked_before_anything_is_stored():
    spec = small_spec(measure=MeasureOptions(l2_flush="sometimes"))
    with pytest.raises(TunelabError, match="L2 flush must be one of auto, on, off"):
        check_spec(spec)
    check_spec(small_spec(measure=MeasureOptions(l2_flush="on", lock_clocks=True)))  # a CPU: said later


def test_a_clock_lock_nvml_refuses_changes_nothing_and_says_why(tmp_path):
    marker = _marker(7)
    marker.unlink(missing_ok=True)
    with ClockLock(7) as lock:  # no GPU 7 here (nor, on this machine, any NVML at all)
        assert not lock.locked and lock.message.startswith("GPU clocks not locked: ")
    assert not marker.exists()


def test_a_cpu_session_asked_to_lock_clocks_says_there_is_no_gpu_to_lock(tmp_path):
    from dataclasses import replace

    from specs import FAST_MEASURE

    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store

    store = Store(tmp_path / "t.sqlite")
    session = create_session(
        store, small_spec(trials=2, batch=2, measure=replace(FAST_MEASURE, lock_clocks=True))
    )
    stages: list[str] = []
    session.on_stage.append(stages.append)
    assert len(list(session.run())) == 2
    assert "GPU clocks not locked: the target is llvm, not a GPU" in stages
    store.close()

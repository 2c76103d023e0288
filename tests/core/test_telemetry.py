"""Telemetry: the sampler thread on the real CPU, the GPU paths through a replayed NVML trace (and a
faked NVML library), the summary that stamps each trial, and its roundtrip through the store."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pynvml
import pytest
from stores import new_trial

from tunelab.core.errors import StoreError
from tunelab.core.records import SessionSpec
from tunelab.core.store import MIGRATIONS, Store
from tunelab.core.store.telemetry_sink import StoreSink
from tunelab.core.telemetry.cpu import PsutilSource
from tunelab.core.telemetry.nvml import REPLAY_ENV, NvmlSource, ReplaySource, default_gpu_source
from tunelab.core.telemetry.readings import (
    NO_GPU,
    CpuReading,
    GpuReading,
    TelemetrySample,
    summarize,
    throttle_reason_names,
)
from tunelab.core.telemetry.sampler import TelemetrySampler

DATA = Path(__file__).parent / "data"
TRACE = DATA / "nvml_trace_h200.jsonl"


@pytest.fixture(autouse=True)
def no_leaked_sampler_threads():
    yield
    deadline = time.monotonic() + 2.0
    while (alive := [t for t in threading.enumerate() if t.name == "tunelab-telemetry"]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.01)
    assert not alive, f"sampler threads still running: {alive}"


class FakeCpu:
    """A CPU source with fixed readings: GPU tests need neither psutil's timing nor its noise."""

    errors = 0

    def read(self) -> CpuReading:
        return CpuReading(load_per_core=(10.0, 30.0), freq_mhz=3000.0, own_pids=frozenset({os.getpid()}))

    def close(self) -> None:
        pass


def replayed_samples(n: int = 300) -> list[TelemetrySample]:
    sampler = TelemetrySampler(source=ReplaySource(TRACE), cpu_source=FakeCpu())
    samples = [sampler.sample_once() for _ in range(n)]
    sampler.stop()
    return samples


def new_session(store: Store) -> int:
    spec = SessionSpec(workload="gemm", shape={"M": 32, "N": 32, "K": 32}, target="cuda")
    return store.create_session(
        spec, target_json={"kind": "cuda"}, target_kind="cuda", space_json={}, tvm_version="0.27", flops=1.0
    )


def add_trial(store: Store, session_id: int, key: str = "a") -> int:
    now = time.time()
    trial = new_trial({"k": key}, (1.0, 1.1), run_s=0.2, started_at=now - 1, finished_at=now)
    return store.add_trial(session_id, trial, key).id


# ----------------------------------------------------------------------------------- decoding


def test_throttle_reasons_decode_by_name() -> None:
    assert throttle_reason_names(0) == ()
    assert throttle_reason_names(0x1) == ("idle",)
    assert throttle_reason_names(0x4 | 0x40) == ("sw_power_cap", "hw_thermal_slowdown")
    assert throttle_reason_names(0x2 | 0x8 | 0x10 | 0x20) == (
        "app_clocks",
        "hw_slowdown",
        "sync_boost",
        "sw_thermal_slowdown",
    )
    assert throttle_reason_names(0x4 | 0x10000) == ("sw_power_cap", "0x10000")
    assert TelemetrySample(t=0, throttle_reasons=("sw_power_cap",)).throttled
    assert not TelemetrySample(t=0, throttle_reasons=("idle", "sync_boost")).throttled


# ----------------------------------------------------------------------------------- the real CPU


@pytest.mark.serial  # its thread's 100 ms ticks and process scans are what a busy neighbour delays
def test_sampler_on_the_real_cpu_every_100_ms() -> None:
    sampler = TelemetrySampler()  # this machine's NVML and psutil, whatever they are
    sampler.start()
    assert sampler.running
    time.sleep(0.55)
    sampler.stop()
    assert not sampler.running

    samples = sampler.samples()
    assert 4 <= len(samples) <= 8
    gaps = [b.t - a.t for a, b in zip(samples, samples[1:], strict=False)]
    assert 0.07 <= statistics.median(gaps) <= 0.15
    n_cpus = psutil.cpu_count()
    for s in samples:
        assert len(s.cpu_load_per_core) == n_cpus
        assert all(0.0 <= x <= 100.0 for x in s.cpu_load_per_core)
        assert s.cpu_load_mean == pytest.approx(statistics.fmean(s.cpu_load_per_core), abs=0.01)
        assert s.cpu_freq_mhz is None or s.cpu_freq_mhz > 0
    assert sampler.latest() == samples[-1]
    assert sampler.errors == 0, sampler.last_error
    if not sampler.gpu_available:
        assert sampler.gpu_status.startswith(NO_GPU)
        assert not any(s.has_gpu for s in samples)
        assert summarize(samples)["gpu"] is False


def _spawn_busy_orphan() -> int:
    """A busy loop that is NOT in our process tree: its shell parent exits at once."""
    out = subprocess.run(
        ["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip())


def test_other_busy_processes_are_counted_but_not_our_own() -> None:
    sampler = TelemetrySampler(cpu_source=PsutilSource(process_scan_s=0.2), interval_s=0.05)
    sampler.start()
    child = orphan = None
    try:
        time.sleep(0.5)  # two scans without the busy loops
        before = sampler.samples()
        child = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # ours: like a run worker
        orphan = _spawn_busy_orphan()
        deadline = time.monotonic() + 5.0
        seen: TelemetrySample | None = None
        while seen is None and time.monotonic() < deadline:
            latest = sampler.latest()
            if latest is not None and orphan in latest.other_busy_pids:
                seen = latest
            time.sleep(0.05)
        assert seen is not None, "the busy process outside our tree was never counted"
        assert seen.other_busy_procs == len(seen.other_busy_pids) >= 1
        assert child.pid not in seen.other_busy_pids  # our own children are never "other"
        assert all(orphan not in s.other_busy_pids for s in before)
        assert all(os.getpid() not in s.other_busy_pids for s in sampler.samples())
    finally:
        sampler.stop()
        if child is not None:
            child.kill()
            child.wait()
        if orphan is not None:
            os.kill(orphan, signal.SIGKILL)


# ----------------------------------------------------------------------------------- the GPU, replayed


def test_the_recorded_trace_is_what_its_script_makes() -> None:
    spec = importlib.util.spec_from_file_location("make_nvml_trace", DATA / "make_nvml_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert TRACE.read_text(encoding="utf-8").splitlines() == module.trace_lines()


def test_replayed_h200_burst_decodes_and_summarizes() -> None:
    source = ReplaySource(TRACE)
    assert len(source) == 300
    assert "NVIDIA H200" in source.status and "synthetic" in source.status

    samples = replayed_samples()
    idle, burst, capped = samples[:30], samples[30:220], samples[60:220]

    first = samples[0]
    assert first.throttle_reasons == ("idle",)
    assert first.gpu_power_limit_w == 700.0
    assert first.gpu_power_w == pytest.approx(33.637)
    assert first.gpu_mem_clock_mhz == 3201.0
    assert first.other_gpu_procs == 0  # the recorder's own context replays as ours
    assert first.cpu_load_per_core == (10.0, 30.0) and first.cpu_load_mean == 20.0

    s_idle = summarize(idle)
    assert s_idle["n"] == 30 and s_idle["gpu"] is True
    assert s_idle["throttle_reasons"] == ["idle"] and s_idle["throttled"] is False
    assert s_idle["gpu_power_w"]["max"] < 40.0
    assert s_idle["gpu_temp_c"] == {"min": 30.0, "max": 30.0, "mean": 30.0}
    assert s_idle["other_gpu_procs_max"] == 0

    s_capped = summarize(capped)
    assert s_capped["throttle_reasons"] == ["sw_power_cap"]
    assert s_capped["throttled"] is True and s_capped["throttled_fraction"] == 1.0
    assert 685.0 < s_capped["gpu_power_w"]["max"] <= 700.0
    assert s_capped["gpu_power_limit_w"]["max"] == 700.0
    assert 1620.0 <= s_capped["gpu_sm_clock_mhz"]["min"] <= 1680.0
    assert s_capped["gpu_sm_clock_mhz"]["max"] < 1980.0
    assert 73.0 <= s_capped["gpu_temp_c"]["max"] <= 77.0
    assert s_capped["gpu_util_pct"]["min"] >= 99.0
    assert s_capped["other_gpu_procs_max"] == 1 and s_capped["other_gpu_pids"] == [5151]
    assert s_capped["cpu_load_core_max"] == 30.0 and s_capped["cpu_load_mean"]["mean"] == 20.0

    s_burst = summarize(burst)  # the ramp is not capped yet: part of the window only
    assert 0.0 < s_burst["throttled_fraction"] < 1.0
    assert s_burst["gpu_sm_clock_mhz"]["max"] == 1980.0
    assert summarize(samples)["gpu_mem_used_mib"]["max"] == 512 + 2400 + 8192


def test_samples_between_and_summary_between() -> None:
    sampler = TelemetrySampler(source=ReplaySource(TRACE), cpu_source=FakeCpu())
    samples = [sampler.sample_once() for _ in range(300)]
    sampler.stop()
    assert sampler.samples() == samples
    assert sampler.samples_between(samples[60].t, samples[219].t) == samples[60:220]
    assert sampler.summary_between(samples[60].t, samples[219].t) == summarize(samples[60:220])
    assert sampler.samples_between(samples[-1].t + 1, samples[-1].t + 2) == []


def test_a_window_shorter_than_the_interval_gets_the_sample_before_it() -> None:
    sampler = TelemetrySampler(source=ReplaySource(TRACE), cpu_source=FakeCpu(), interval_s=0.1)
    before = sampler.sample_once()
    time.sleep(0.02)
    sampler.sample_once()
    sampler.stop()
    short = sampler.summary_between(before.t + 0.005, before.t + 0.01)
    assert short["n"] == 1 and short["t0"] == before.t
    # Long after the last sample: the sampler was not running, nothing is known about that window.
    assert sampler.summary_between(before.t + 100, before.t + 101)["n"] == 0


def test_replay_loops_or_holds_the_last_line() -> None:
    looped = ReplaySource(TRACE)
    held = ReplaySource(TRACE, loop=False)
    first = looped.read()
    for _ in range(299):
        looped.read()
    for _ in range(300):
        last = held.read()
    assert looped.read() == first
    assert held.read() == last


def test_summarize_nothing() -> None:
    s = summarize([])
    assert s["n"] == 0 and s["t0"] is None and s["gpu"] is False
    assert s["gpu_power_w"] is None and s["cpu_load_mean"] is None
    assert s["throttle_reasons"] == [] and s["throttled"] is False
    assert s["other_gpu_procs_max"] is None and s["other_busy_procs_max"] == 0


# ----------------------------------------------------------------------------------- NVML itself


def test_nvml_source_on_this_machine_never_raises() -> None:
    source = NvmlSource()
    if source.available:  # a GPU machine: a real reading
        reading = source.read()
        assert isinstance(reading, GpuReading) and reading.power_w is not None
    else:
        assert source.status.startswith(NO_GPU)
        assert source.read() is None
        sampler = TelemetrySampler(source=source)
        assert sampler.gpu_available is False and sampler.gpu_status.startswith(NO_GPU)
        assert not sampler.sample_once().has_gpu
        sampler.stop()
    source.close()


def test_nvml_source_without_nvidia_ml_py(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    source = NvmlSource()
    assert not source.available
    assert source.status == f"{NO_GPU} (nvidia-ml-py is not installed)"


class FakeNvml:
    """Stands in for the NVML C library behind the real pynvml module, fed from the recorded trace."""

    def __init__(self) -> None:
        self.records = ReplaySource(TRACE).records
        self.i = 0
        self.lost = False
        self.shutdowns = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        nv = pynvml

        def record():
            if self.lost:
                raise nv.NVMLError(nv.NVML_ERROR_GPU_IS_LOST)
            return self.records[self.i]

        def clock(handle, kind):
            return record()["sm_clock_mhz" if kind == nv.NVML_CLOCK_SM else "mem_clock_mhz"]

        def util(handle):
            r = record()
            return type("Util", (), {"gpu": r["gpu_util_pct"], "memory": r["mem_util_pct"]})()

        def memory(handle):
            return type("Memory", (), {"used": record()["mem_used_bytes"]})()

        def procs(handle):
            return [type("Proc", (), {"pid": p})() for p in record()["compute_pids"]]

        def not_supported(handle):
            raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)

        def event_reasons(handle):  # a driver older than R535
            raise nv.NVMLError(nv.NVML_ERROR_FUNCTION_NOT_FOUND)

        fakes = {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: setattr(self, "shutdowns", self.shutdowns + 1),
            "nvmlDeviceGetCount": lambda: 1,
            "nvmlDeviceGetHandleByIndex": lambda index: "gpu0",
            "nvmlDeviceGetName": lambda handle: "NVIDIA H200",
            "nvmlDeviceGetTemperature": lambda handle, sensor: record()["temp_c"],
            "nvmlDeviceGetPowerUsage": lambda handle: record()["power_mw"],
            "nvmlDeviceGetEnforcedPowerLimit": not_supported,
            "nvmlDeviceGetClockInfo": clock,
            "nvmlDeviceGetUtilizationRates": util,
            "nvmlDeviceGetMemoryInfo": memory,
            "nvmlDeviceGetCurrentClocksEventReasons": event_reasons,
            "nvmlDeviceGetCurrentClocksThrottleReasons": lambda handle: record()["throttle_mask"],
            "nvmlDeviceGetComputeRunningProcesses": procs,
        }
        for name, fn in fakes.items():
            monkeypatch.setattr(nv, name, fn)


def test_nvml_source_decodes_what_nvml_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    fake.install(monkeypatch)
    source = NvmlSource(process_scan_s=0.0)
    assert source.available and source.status == "NVIDIA H200 (GPU 0, NVML)"

    fake.i = 150  # power capped, the second process on the GPU
    raw = fake.records[150]
    reading = source.read()
    assert reading.temp_c == raw["temp_c"]
    assert reading.power_w == raw["power_mw"] / 1000
    assert reading.power_limit_w is None  # not supported on this "device": left out, not an error
    assert reading.sm_clock_mhz == raw["sm_clock_mhz"] and reading.mem_clock_mhz == 3201
    assert reading.mem_used_mib == raw["mem_used_bytes"] / 2**20
    assert throttle_reason_names(reading.throttle_mask) == ("sw_power_cap",)  # through the old API
    assert reading.compute_pids == (4242, 5151)
    assert source.errors == 0

    fake.lost = True  # the GPU falls off the bus: every field fails, each failure is counted
    sampler = TelemetrySampler(source=source, cpu_source=FakeCpu())
    sample = sampler.sample_once()
    assert sample.gpu_power_w is None and sample.throttle_reasons == ()
    assert sampler.errors > 0 and "GPU is lost" in source.last_error
    sampler.stop()
    assert fake.shutdowns == 1


# ----------------------------------------------------------------------------------- resilience


class BrokenGpu:
    available = True
    status = "a GPU that always fails"
    errors = 0

    def read(self) -> GpuReading | None:
        raise RuntimeError("driver hiccup")

    def close(self) -> None:
        pass


def test_failures_are_counted_and_sampling_goes_on() -> None:
    delivered: list[TelemetrySample] = []
    calls = 0

    def flaky_sink(batch: list[TelemetrySample]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("database is locked")
        delivered.extend(batch)

    sampler = TelemetrySampler(
        source=BrokenGpu(), cpu_source=FakeCpu(), sink=flaky_sink, interval_s=0.02, flush_interval_s=0.05
    )
    with sampler:
        time.sleep(0.3)
    taken = sampler.samples()
    assert len(taken) >= 8
    assert delivered == taken  # the failed batch was offered again: nothing lost, nothing twice
    assert sampler.errors >= len(taken) + 1
    assert "database is locked" in sampler.last_error or "driver hiccup" in sampler.last_error
    assert all(s.cpu_load_mean == 20.0 and not s.has_gpu for s in taken)
    with pytest.raises(RuntimeError, match="started once"):
        sampler.start()


def test_a_sampler_never_started_still_hands_its_samples_to_the_sink() -> None:
    got: list[TelemetrySample] = []
    sampler = TelemetrySampler(source=ReplaySource(TRACE), cpu_source=FakeCpu(), sink=got.extend)
    taken = [sampler.sample_once() for _ in range(3)]
    sampler.stop()
    sampler.stop()  # idempotent
    assert got == taken


def test_replay_through_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(REPLAY_ENV, str(TRACE))
    sampler = TelemetrySampler(cpu_source=FakeCpu())
    assert sampler.gpu_available and "replayed from nvml_trace_h200.jsonl" in sampler.gpu_status
    assert sampler.sample_once().gpu_power_limit_w == 700.0
    sampler.stop()
    monkeypatch.setenv(REPLAY_ENV, str(tmp_path / "missing.jsonl"))
    source = default_gpu_source()
    assert not source.available and source.status.startswith(f"{NO_GPU} (cannot replay")


# ----------------------------------------------------------------------------------- the store


def test_store_roundtrip_of_telemetry_and_trial_stamps(store: Store) -> None:
    assert store.schema_version() == len(MIGRATIONS) >= 2
    sid = new_session(store)
    samples = replayed_samples(40)
    store.add_telemetry(sid, samples[:25])
    store.add_telemetry(sid, samples[25:])
    store.add_telemetry(sid, [])
    assert store.telemetry(sid) == samples
    assert store.telemetry(sid, since_t=samples[29].t) == samples[30:]
    assert store.telemetry(sid, since_t=samples[9].t, until_t=samples[19].t) == samples[10:20]
    with pytest.raises(StoreError):
        store.add_telemetry(sid + 1, samples)

    tid = add_trial(store, sid)
    other = add_trial(store, sid, "b")
    summary = summarize(samples[30:40])
    store.stamp_trial(tid, summary)
    store.stamp_trial(other, summarize(samples[:10]))
    store.stamp_trial(other, summarize(samples[:5]))  # a later stamp replaces the first
    stamps = store.trial_telemetry(sid)
    assert stamps == {tid: summary, other: summarize(samples[:5])}
    row = store.db.execute(
        "SELECT throttled, gpu_power_max, gpu_sm_clock_min FROM trial_telemetry WHERE trial_id = ?", (tid,)
    ).fetchone()
    assert row == (0, summary["gpu_power_w"]["max"], summary["gpu_sm_clock_mhz"]["min"])
    with pytest.raises(StoreError, match="does not exist"):
        store.stamp_trial(10_000, summary)

    store.delete_session(sid)
    assert store.db.execute("SELECT count(*) FROM telemetry").fetchone()[0] == 0
    assert store.db.execute("SELECT count(*) FROM trial_telemetry").fetchone()[0] == 0


def test_a_v1_database_gains_the_telemetry_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tunelab.core.store.schema as store_module

    path = tmp_path / "old.sqlite"
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:1])
    with Store(path) as old:
        sid = new_session(old)
        assert "telemetry" not in old.db.table_names()
    monkeypatch.undo()
    with Store(path) as new:
        assert {"telemetry", "trial_telemetry"} <= set(new.db.table_names())
        new.add_telemetry(sid, replayed_samples(3))
        assert len(new.telemetry(sid)) == 3


def test_sampler_writes_through_its_own_store(store: Store) -> None:
    sid = new_session(store)
    sampler = TelemetrySampler(
        sink=StoreSink(store.path, sid),
        source=ReplaySource(TRACE),
        cpu_source=FakeCpu(),
        interval_s=0.02,
        flush_interval_s=0.1,
    )
    sampler.start()
    deadline = time.monotonic() + 3.0
    while not store.telemetry(sid) and time.monotonic() < deadline:  # read while the sampler writes
        time.sleep(0.02)
    assert store.telemetry(sid), "no batch reached the store while sampling"
    time.sleep(0.1)
    sampler.stop()
    assert sampler.errors == 0, sampler.last_error
    assert store.telemetry(sid) == sampler.samples()  # the last batch was flushed at stop


_SCAN = """
import json, time
from tunelab.core.telemetry.cpu import PsutilSource
source = PsutilSource(process_scan_s=0)
source.read()
time.sleep(1.5)
reading = source.read()
print(json.dumps({"root": source.root_pid, "busy": list(reading.busy_pids)}))
"""


def test_the_apps_own_tree_is_never_a_busy_neighbour_of_its_tuning_child():
    """The app runs each session as a `tunelab tune` child and names itself in TUNELAB_ROOT_PID: the
    child's telemetry counts the app and everything it started (here a busy sibling, as a validation
    worker would be) as its own. Without the variable the same sibling is flagged, as it was."""
    from tunelab.core.telemetry.cpu import ROOT_PID_ENV

    sibling = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        found = {}
        for named in (True, False):
            env = {k: v for k, v in os.environ.items() if k != ROOT_PID_ENV}
            if named:
                env[ROOT_PID_ENV] = str(os.getpid())
            out = subprocess.run(
                [sys.executable, "-c", _SCAN], env=env, capture_output=True, text=True, timeout=120
            )
            assert out.returncode == 0, out.stderr[-2000:]
            found[named] = json.loads(out.stdout)
        assert found[True]["root"] == os.getpid() and sibling.pid not in found[True]["busy"]
        assert found[False]["root"] != os.getpid() and sibling.pid in found[False]["busy"]
    finally:
        sibling.kill()
        sibling.wait()


def test_a_root_pid_that_is_no_ancestor_is_ignored(monkeypatch):
    from tunelab.core.telemetry.cpu import ROOT_PID_ENV, session_root_pid

    monkeypatch.setenv(ROOT_PID_ENV, "1" if os.getpid() != 1 else "2")
    assert session_root_pid() in (os.getpid(), 1)  # pid 1 is every process's ancestor on Linux
    monkeypatch.setenv(ROOT_PID_ENV, "not a pid")
    assert session_root_pid() == os.getpid()


def test_a_session_whose_app_is_gone_still_owns_its_workers():
    """A session a closed window left running is re-parented away from the app it names as its root
    (TUNELAB_ROOT_PID): its own workers must still not read as busy neighbours."""
    from tunelab.core.telemetry.cpu import PsutilSource

    out = subprocess.run(  # the app that went away: not our ancestor, and none of our children is its
        ["sh", "-c", f"'{sys.executable}' -c 'import time; time.sleep(60)' >/dev/null 2>&1 & echo $!"],
        check=True,
        capture_output=True,
        text=True,
    )
    gone_app = int(out.stdout.strip())
    worker = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # like a run worker of ours
    try:
        source = PsutilSource(process_scan_s=0, root_pid=gone_app)
        source.read()
        time.sleep(1.5)
        reading = source.read()
        assert worker.pid not in reading.busy_pids and os.getpid() not in reading.busy_pids
        assert worker.pid in reading.own_pids
    finally:
        worker.kill()
        worker.wait()
        os.kill(gone_app, signal.SIGKILL)


def test_the_busiest_neighbours_come_first_and_are_the_ones_a_warning_names():
    """A warning names three busy pids; by pid it named the oldest busy processes, and a neighbour
    started last (the one slowing the measurement most) was left out beside three older ones."""
    from tunelab.core.session.machine_load import busy_reason
    from tunelab.core.telemetry.cpu import busiest_first
    from tunelab.core.telemetry.readings import TelemetrySample

    load = {101: 30.0, 102: 25.0, 103: 40.0, 104: 5.0, 999: 100.0, 7: 95.0}  # pid -> % of one core
    busy = busiest_first(load, own={7}, busy_pct=20.0)
    assert busy == (999, 103, 101, 102)  # 104 is under the threshold, 7 is our own
    assert busiest_first({5: 50.0, 3: 50.0}, own=set(), busy_pct=20.0) == (3, 5)  # ties by pid
    sample = TelemetrySample(t=0.0, other_busy_procs=len(busy), other_busy_pids=busy)
    assert "(pid 999, 103, 101)" in (busy_reason(sample) or "")

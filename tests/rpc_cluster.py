"""A real TVM RPC tracker and servers on 127.0.0.1, for tests: `python -m tvm.exec.rpc_tracker` and
`python -m tvm.exec.rpc_server --tracker ...`, each in a process group of its own (a server serves every
session in a forked child, so stopping a server means stopping its group)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from tunelab.core.measure.remote import RemoteError, TrackerAddress, tracker_summary
from tunelab.core.target.info import cpu_core_count

STARTUP_S = 120.0  # TVM's import alone takes several seconds per process on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen) -> None:
    """SIGKILL the process's whole group (the server and the child serving a session) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


@dataclass
class Cluster:
    tracker: TrackerAddress
    key: str
    tracker_proc: subprocess.Popen
    # Servers on one host share its cores, as a person placing several there would split them: each
    # running kernels on every core, two measuring at once contend (GEMM 64x64x256 read 1.75x slower
    # through two such servers than here).
    server_threads: int = 1
    servers: dict[str, subprocess.Popen] = field(default_factory=dict)  # by "HOST:PORT"

    def add_server(self, key: str | None = None, env: dict[str, str] | None = None) -> str:
        """Start one more server under the key (or ``key``), with ``env`` over this process's environment;
        returns its address once the tracker lists it."""
        key = key or self.key
        before = {s.address for s in tracker_summary(self.tracker).servers}
        port = free_port()
        proc = _spawn(
            "tvm.exec.rpc_server",
            "--tracker",
            str(self.tracker),
            "--key",
            key,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--port-end",
            str(port + 1),
            env={**os.environ, "TVM_NUM_THREADS": str(self.server_threads), **(env or {})},
        )
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            new = {s.address for s in tracker_summary(self.tracker).servers_for(key)} - before
            if new:
                address = new.pop()
                self.servers[address] = proc
                return address
            if proc.poll() is not None:
                raise RuntimeError(f"the RPC server on port {port} exited with {proc.returncode}")
            time.sleep(0.3)
        stop(proc)
        raise RuntimeError(f"the RPC server on port {port} did not register within {STARTUP_S:g} s")

    def kill_server(self, address: str) -> None:
        stop(self.servers.pop(address))

    def close(self) -> None:
        for proc in self.servers.values():
            stop(proc)
        self.servers.clear()
        stop(self.tracker_proc)


def start_cluster(n_servers: int = 2, key: str = "tunelab-test") -> Cluster:
    """A tracker on a free port and ``n_servers`` servers registered with it under ``key``."""
    port = free_port()
    proc = _spawn(
        "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)
    )
    tracker = TrackerAddress("127.0.0.1", port)
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            tracker_summary(tracker, timeout_s=1.0)
            break
        except RemoteError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError(f"the RPC tracker on port {port} did not start") from None
            time.sleep(0.3)
    cluster = Cluster(tracker, key, proc, server_threads=max(cpu_core_count() // max(n_servers, 1), 1))
    try:
        for _ in range(n_servers):
            cluster.add_server()
    except BaseException:
        cluster.close()
        raise
    return cluster

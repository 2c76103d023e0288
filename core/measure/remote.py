"""Measurement on remote devices through TVM's RPC tracker, with MetaSchedule's own ``RPCRunner``.

The parts are TVM's: a tracker (``python -m tvm.exec.rpc_tracker``), servers registered with it under
a key (``python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY``) and MetaSchedule's
``RPCRunner``, which asks the tracker for a free server per candidate. What tunelab adds are the
runner's plug-in functions, so that a remote measurement keeps the local hygiene
(``tunelab.core.measure.evaluate``): the workload's deterministic inputs copied to the remote device,
warm-up, the correctness check against the NumPy reference, adaptive repeats, the leader band and,
on a CPU, each buffer at the page offset a local measurement gives it
(:mod:`tunelab.core.measure.remote_placement`). It also
records which server measured each candidate: the runner returns only run times, so
:class:`UploadModule` writes the server's address beside the candidate's artifact, where the
Measurer reads it.

A server that is lost mid-candidate (killed, its machine gone) is told apart from a kernel that
broke its session by asking the tracker whether the server is still registered
(:func:`servers_lost`); the Measurer measures such a candidate again on another server.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.errors import TunelabError, first_line
from tunelab.core.faults import stop_on_sigint_like_sigterm
from tunelab.core.measure.evaluate import AllocArguments, Evaluate, _inputs_and_reference
from tunelab.core.measure.placement import DEFAULT_LAYOUT
from tunelab.core.measure.remote_placement import PlacementError, RemotePlacer

SERVED_BY_FILE = "served_by.txt"  # beside a candidate's artifact: the server that ran it
SERVER_KEY_PREFIX = "server:"  # how the tracker's summary prefixes a server's key


class RemoteError(TunelabError):
    """The tracker cannot be reached or has no server for the key."""


@dataclass(frozen=True)
class TrackerAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> TrackerAddress:
        """``HOST:PORT`` (as ``--rpc`` takes it); a bad one raises :class:`RemoteError` naming it."""
        host, sep, port = text.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RemoteError(f"--rpc {text!r}: expected HOST:PORT of a TVM RPC tracker, e.g. 127.0.0.1:9190")
        return cls(host, int(port))

    @classmethod
    def from_env(cls) -> TrackerAddress | None:
        """``TVM_TRACKER_HOST`` and ``TVM_TRACKER_PORT``, as TVM's own tools read them; None when unset."""
        host, port = os.environ.get("TVM_TRACKER_HOST"), os.environ.get("TVM_TRACKER_PORT")
        if not host and not port:
            return None
        if not host or not port:
            raise RemoteError("set both TVM_TRACKER_HOST and TVM_TRACKER_PORT, or neither")
        return cls.parse(f"{host}:{port}")


@dataclass(frozen=True)
class RemoteServer:
    key: str
    address: str  # HOST:PORT the server listens on, as the tracker reports it


@dataclass(frozen=True)
class KeyQueue:
    key: str
    free: int  # servers waiting for a request
    pending: int  # requests waiting for a server


@dataclass(frozen=True)
class TrackerSummary:
    tracker: str
    servers: tuple[RemoteServer, ...]
    queues: tuple[KeyQueue, ...]

    def servers_for(self, key: str) -> tuple[RemoteServer, ...]:
        return tuple(s for s in self.servers if s.key == key)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(sorted({s.key for s in self.servers} | {q.key for q in self.queues}))

    def to_json(self) -> dict[str, Any]:
        return {
            "tracker": self.tracker,
            "servers": [{"key": s.key, "address": s.address} for s in self.servers],
            "keys": [{"key": q.key, "free": q.free, "pending": q.pending} for q in self.queues],
        }


def tracker_summary(tracker: TrackerAddress, timeout_s: float = 5.0) -> TrackerSummary:
    """What the tracker holds: its servers (key, address) and, per key, free servers and pending requests.

    A tracker that does not answer within ``timeout_s`` raises :class:`RemoteError`, one sentence."""
    from tvm.rpc import base

    try:
        with socket.create_connection((tracker.host, tracker.port), timeout=timeout_s) as sock:
            sock.sendall(base.struct.pack("<i", base.RPC_TRACKER_MAGIC))
            magic = base.struct.unpack("<i", base.recvall(sock, 4))[0]
            if magic != base.RPC_TRACKER_MAGIC:
                raise RemoteError(f"{tracker} is not a TVM RPC tracker (it answered the handshake wrongly)")
            base.sendjson(sock, [base.TrackerCode.SUMMARY])
            reply = base.recvjson(sock)
    except (OSError, ValueError, RuntimeError) as exc:
        raise RemoteError(
            f"no TVM RPC tracker answers at {tracker} ({exc.__class__.__name__}: {exc}); "
            "start one with `python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port PORT`"
        ) from None
    if not isinstance(reply, list) or len(reply) != 2 or reply[0] != base.TrackerCode.SUCCESS:
        raise RemoteError(f"the tracker at {tracker} answered its summary request with {reply!r}")
    data = reply[1]
    servers = []
    for info in data.get("server_info", []):
        key = str(info.get("key", "")).removeprefix(SERVER_KEY_PREFIX)
        host, port = (list(info.get("addr") or [None, None]) + [None, None])[:2]
        servers.append(RemoteServer(key, f"{host}:{port}"))
    queues = [
        KeyQueue(str(k), int(v.get("free", 0)), int(v.get("pending", 0)))
        for k, v in sorted(data.get("queue_info", {}).items())
    ]
    return TrackerSummary(
        str(tracker), tuple(sorted(servers, key=lambda s: (s.key, s.address))), tuple(queues)
    )


def require_servers(tracker: TrackerAddress, key: str) -> TrackerSummary:
    """The tracker's summary when it holds at least one server under ``key``; else one clear RemoteError."""
    summary = tracker_summary(tracker)
    if not key:
        raise RemoteError(
            "--rpc needs --rpc-key: the key the servers registered under (`tunelab devices --rpc`)"
        )
    if not summary.servers_for(key):
        held = ", ".join(f"{k} ({len(summary.servers_for(k))})" for k in summary.keys) or "none"
        raise RemoteError(
            f"the tracker at {tracker} has no server under key {key!r} (keys it holds: {held}); "
            f"start one with `python -m tvm.exec.rpc_server --tracker {tracker} --key {key}`"
        )
    return summary


def servers_lost(
    tracker: TrackerAddress, serving: set[str], server: str | None, wait_s: float = 1.0
) -> list[str]:
    """After a candidate failed: the servers lost since ``serving`` (the key's servers when it was
    sent) that explain it, else [] (the candidate failed by itself).

    ``server`` is where the candidate ran, when it got far enough to note it: lost means that one
    left the tracker. A candidate that broke before (while its session was being set up) is explained
    by any server of ``serving`` that left. A killed server's tracker connection closes with its
    process and the tracker drops it at once; ``wait_s`` covers the moment in between."""
    deadline = time.monotonic() + wait_s
    suspects = {server} if server else set(serving)
    while True:
        held = {s.address for s in tracker_summary(tracker, timeout_s=2.0).servers}
        gone = sorted(suspects - held)
        if gone or time.monotonic() >= deadline:
            return gone
        time.sleep(0.2)


# The server the current runner worker's session is connected to (each RPCRunner worker process
# runs one candidate at a time: create the session, upload, allocate, evaluate).
_CONNECTED_TO: list[str] = []


class CreateSession:
    """RPCRunner's f_create_session: a session on a free server under the config's key, remembering which.

    TVM's ``TrackerSession.request`` does not say which server it connected to, so the request is
    made here with the tracker protocol's own calls (``tvm.rpc.base``), then ``tvm.rpc.connect``."""

    def __init__(self, priority: int = 1, wait_s: float | None = None) -> None:
        self.priority = priority
        self.wait_s = wait_s  # how long to wait for a free server (None: as long as it takes, as TVM does)

    def __call__(self, rpc_config: Any) -> Any:
        from tvm import rpc
        from tvm.rpc import base

        tracker = rpc.connect_tracker(rpc_config.tracker_host, rpc_config.tracker_port)
        try:
            base.sendjson(
                tracker._sock, [base.TrackerCode.REQUEST, rpc_config.tracker_key, "", self.priority]
            )
            if self.wait_s is not None:
                tracker._sock.settimeout(self.wait_s)  # closing the connection withdraws the request
            try:
                reply = base.recvjson(tracker._sock)
            except TimeoutError:
                raise RuntimeError(
                    f"no server under key {rpc_config.tracker_key!r} was free within {self.wait_s:g} s"
                ) from None
        finally:
            tracker.close()
        if reply[0] != base.TrackerCode.SUCCESS:
            raise RuntimeError(f"the tracker refused a session: {reply!r}")
        url, port, matchkey = reply[1]
        _CONNECTED_TO[:] = [f"{url}:{port}"]
        return rpc.connect(url, port, matchkey, rpc_config.session_timeout_sec)


class UploadModule:
    """RPCRunner's f_upload_module: the default upload, after noting the server beside the artifact."""

    def __call__(self, session: Any, local_path: str, remote_path: str) -> Any:
        with open(os.path.join(os.path.dirname(local_path), SERVED_BY_FILE), "w") as f:
            f.write(_CONNECTED_TO[0] if _CONNECTED_TO else "")
        session.upload(local_path, remote_path)
        return session.load_module(remote_path)


def served_by(artifact_path: str) -> str | None:
    """The server a candidate was sent to (None when it never reached one)."""
    try:
        with open(os.path.join(os.path.dirname(artifact_path), SERVED_BY_FILE)) as f:
            return f.read().strip() or None
    except OSError:
        return None


class RemoteAllocArguments(AllocArguments):
    """RPCRunner's f_alloc_argument: the workload's inputs plus zeroed outputs, on the remote device."""

    def __call__(  # type: ignore[override]  # RPCRunner's signature: the session comes first
        self, session: Any, device: Any, args_info: Any, alloc_repeat: int
    ) -> list[list[Any]]:
        inputs, _ = _inputs_and_reference(self.problem)
        outputs = [np.zeros(shape, dtype=dtype) for _, dtype, shape in args_info[len(inputs) :]]
        # placed as a local measurement places them (tunelab.core.measure.remote_placement)
        placer = RemotePlacer(session, device)
        return [placer.placed([*inputs, *outputs], DEFAULT_LAYOUT) for _ in range(alloc_repeat)]


class RemoteEvaluate(Evaluate):
    """RPCRunner's f_run_evaluator: the local evaluator's steps on the remote module and device."""

    def __call__(  # type: ignore[override]  # RPCRunner's signature: the session comes first
        self, session: Any, rt_mod: Any, device: Any, evaluator_config: Any, repeated_args: Any
    ) -> list[float]:
        # The L2 flush is a function registered in the measuring process (tunelab.core.measure.l2_flush):
        # a server's process has none, so remote GPUs are timed without it.
        self.l2_flush = "off"
        return super().__call__(rt_mod, device, evaluator_config, repeated_args)


def make_rpc_runner(
    tracker: TrackerAddress,
    key: str,
    workers: int,
    timeout_s: float,
    evaluator_config: Any,
    alloc: RemoteAllocArguments,
    evaluate: RemoteEvaluate,
) -> Any:
    """MetaSchedule's RPCRunner with tunelab's plug-ins, ``workers`` candidates in flight at once."""
    from tvm.s_tir import meta_schedule as ms

    config = ms.runner.RPCConfig(
        tracker_host=tracker.host,
        tracker_port=tracker.port,
        tracker_key=key,
        session_priority=1,
        session_timeout_sec=max(1, int(timeout_s)),
    )
    return ms.runner.RPCRunner(
        rpc_config=config,
        evaluator_config=evaluator_config,
        f_create_session=CreateSession(),
        f_upload_module=UploadModule(),
        f_alloc_argument=alloc,
        f_run_evaluator=evaluate,
        max_workers=max(1, workers),
        initializer=stop_on_sigint_like_sigterm,
    )


def server_session(
    tracker: TrackerAddress, key: str, timeout_s: float, wait_s: float | None = None
) -> tuple[Any, str]:
    """An RPC session on a free server under ``key`` and that server's address ("HOST:PORT"). The
    server serves it in a process forked for it, gone when the session is dropped; it ends the session
    after ``timeout_s`` seconds. ``wait_s`` bounds the wait for a free server. RemoteError, one
    sentence, when none can be had."""
    from types import SimpleNamespace

    config = SimpleNamespace(
        tracker_host=tracker.host,
        tracker_port=tracker.port,
        tracker_key=key,
        session_timeout_sec=max(1, int(timeout_s)),
    )
    try:
        session = CreateSession(wait_s=wait_s)(config)
    except Exception as exc:  # noqa: BLE001 - the RPC layer raises TVMError, OSError or a timeout; all mean no session
        raise RemoteError(
            f"cannot open a session on a server under key {key!r} at {tracker}: {first_line(exc)}"
        ) from None
    return session, (_CONNECTED_TO[0] if _CONNECTED_TO else "?")


def remote_target(tracker: TrackerAddress, key: str, timeout_s: float = 60.0) -> Any:
    """``--target remote``: the CPU target of a server under ``key`` as that server's own TVM reports it
    (LLVM's triple and CPU name of its host, its runtime's thread count), a TargetInfo for kernels built
    here and run there. The servers under one key are meant to be alike; one of them is asked."""
    from dataclasses import replace

    from tunelab.core.target.info import resolve_target

    # Bounded: TVM's own request waits for a free server forever (a hung start, not a message)
    session, address = server_session(tracker, key, timeout_s, wait_s=timeout_s)
    try:
        triple = str(session.get_function("target.llvm_get_system_triple")())
        cpu = str(session.get_function("target.llvm_get_system_cpu")())
        threads = int(session.get_function("runtime.NumThreads")())
    except Exception as exc:  # noqa: BLE001 - whatever the server's TVM raises, it cannot say its CPU
        raise RemoteError(
            f"server {address} (key {key!r}) cannot say its CPU ({first_line(exc)}): its TVM has no LLVM; "
            "give --target as a JSON target with its mtriple and mcpu"
        ) from None
    spec = {"kind": "llvm", "mtriple": triple, "mcpu": cpu, "num-cores": max(1, threads)}
    info = resolve_target(spec, elsewhere=True)
    return replace(info, note=f"the CPU of server {address} (key {key}), as its TVM's LLVM names it")


def remote_self_check(target: Any, tracker: TrackerAddress, key: str, timeout_s: float = 120.0) -> None:
    """Before a remote session stores anything: does a vectorized kernel built here for ``target`` run on a
    server under ``key``, on buffers placed as the session will place them, and compute the right result?
    (tunelab.core.target.selfcheck's kernel, linked on the server from the objects LLVM emitted here.) A
    kernel whose instructions the server's CPU lacks kills the server's session child (SIGILL), and a
    server that cannot link the placement helper cannot place a buffer: either would otherwise fail
    every trial of the session."""
    from tunelab.core.errors import TargetError
    from tunelab.core.target.selfcheck import built_check_kernel, check_inputs, check_outputs_ok

    if target.kind != "llvm":
        return
    with built_check_kernel(target, "selfcheck.tar", "tunelab-remote-check-") as lib:
        session, address = server_session(tracker, key, timeout_s, wait_s=timeout_s)
        a, b = check_inputs()
        try:
            session.upload(str(lib), "selfcheck.tar")
            module = session.load_module("selfcheck.tar")
            device = session.cpu(0)
            arrays = [a, b, np.zeros_like(a), np.zeros(1, dtype="float32")]
            ta, tb, tc, td = RemotePlacer(session, device).placed(arrays, DEFAULT_LAYOUT)
            module["main"](ta, tb, tc, td)
            ok = check_outputs_ok(a, b, tc.numpy(), td.numpy())
        except PlacementError as exc:
            raise RemoteError(f"server {address} (key {key!r}): {exc}") from None
        except Exception as exc:  # noqa: BLE001 - an RPC error from the server's run of the kernel, whatever its kind
            raise TargetError(
                f"a kernel built for {target.description} fails on server {address} (key {key!r}): "
                f"{rpc_error_line(exc)}; give --target with an mcpu that server's CPU runs (or --target remote)",
                option="target",
            ) from None
    if not ok:
        raise TargetError(
            f"a kernel built for {target.description} computes wrong results on server {address} (key {key!r})",
            option="target",
        )


def rpc_error_line(exc: BaseException) -> str:
    """What went wrong on the server, from an error an RPC call raised here: its first line only says
    "RPCError: Error caught from RPC call:", the server's own message follows (a linker's "error" line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    told = [
        line
        for line in lines
        if not line.startswith(("RPCError: Error caught from RPC call", "Compilation error:"))
    ]
    errors = [line for line in told if "error" in line.lower()]
    text = (errors or told or [type(exc).__name__])[0]
    return text if len(text) <= 300 else text[:297] + "..."

"""Buffers on an RPC server's CPU are placed as local ones are: a real tracker and real
`python -m tvm.exec.rpc_server` processes on 127.0.0.1 (tests/rpc_cluster.py), the placement helper
linked on the server, the page offsets read back from the server's own memory, and a kernel built here
computing the right result on the placed buffers."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from rpc_cluster import start_cluster

from tunelab.core.errors import TargetError
from tunelab.core.measure.placement import LAYOUTS, PAGE, page_offset
from tunelab.core.measure.remote import RemoteError, remote_self_check, server_session
from tunelab.core.measure.remote_placement import PlacementError, RemotePlacer
from tunelab.core.target.info import llvm_target
from tunelab.core.target.selfcheck import build_check_kernel, check_inputs, check_outputs_ok

pytestmark = pytest.mark.slow

BROKEN_KEY = "no-compiler"


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster(1)
    # a server that can link nothing: its compiler is `false`
    c.add_server(key=BROKEN_KEY, env={"CXX": "false"})
    yield c
    c.close()


def test_each_buffer_sits_at_its_layout_s_page_offset_on_the_server(cluster):
    session, address = server_session(cluster.tracker, cluster.key, timeout_s=60)
    placer = RemotePlacer(session, session.cpu(0))
    arrays = [
        np.arange(300 * 257, dtype="float32").reshape(300, 257),  # not a multiple of a page
        np.linspace(-1, 1, 64 * 64).reshape(64, 64),  # float64
        np.arange(7, dtype="int8"),
    ]
    for layout in ("staggered", "aligned"):
        tensors = placer.placed(arrays, layout)
        offsets = [placer.data_address(t) % PAGE for t in tensors]
        assert offsets == [page_offset(layout, i) for i in range(len(arrays))], (layout, address)
        for tensor, array in zip(tensors, arrays, strict=True):
            assert tensor.shape == array.shape and str(tensor.dtype) == str(array.dtype)
            assert np.array_equal(tensor.numpy(), array)
    plain = placer.placed(arrays, "plain")  # where the server's allocator puts them
    assert [np.array_equal(t.numpy(), a) for t, a in zip(plain, arrays, strict=True)] == [True] * 3
    with pytest.raises(ValueError, match="unknown buffer layout 'diagonal'"):
        placer.placed(arrays, "diagonal")


def test_a_kernel_built_here_computes_right_on_placed_server_buffers(cluster, tmp_path):
    lib = tmp_path / "check.tar"
    build_check_kernel(llvm_target(), lib)
    session, _ = server_session(cluster.tracker, cluster.key, timeout_s=60)
    session.upload(str(lib), "check.tar")
    kernel = session.load_module("check.tar")["main"]
    placer = RemotePlacer(session, session.cpu(0))
    a, b = check_inputs()
    for layout in LAYOUTS:
        ta, tb, tc, td = placer.placed([a, b, np.zeros_like(a), np.zeros(1, dtype="float32")], layout)
        kernel(ta, tb, tc, td)
        assert check_outputs_ok(a, b, tc.numpy(), td.numpy()), layout


def test_a_server_that_cannot_link_the_helper_is_one_clear_message(cluster):
    session, _ = server_session(cluster.tracker, BROKEN_KEY, timeout_s=60)
    with pytest.raises(PlacementError, match="cannot link tunelab's buffer-placement helper") as caught:
        RemotePlacer(session, session.cpu(0))
    assert "\n" not in str(caught.value)
    # the server serves one session at a time and the self-check needs it: drop every reference to
    # this one (the caught error's traceback holds one)
    del caught, session
    gc.collect()
    # before a session stores anything, the self-check names that server (its kernel fails to link first)
    with pytest.raises((RemoteError, TargetError), match=f"key '{BROKEN_KEY}'"):
        remote_self_check(llvm_target(), cluster.tracker, BROKEN_KEY)

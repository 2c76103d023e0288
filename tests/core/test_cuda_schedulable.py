"""Every GPU session starts: the schedulability probe draws until a config is legal, bounded by time.

On the H200 (sm_90) 3 of 4 prepared sessions were refused before they started: the probe tried 8
configs, and about 94-97 % of random auto-space configs of these problems fail VerifyGPUCode
(here: 6 of 200 legal for the fp32 GEMM, 11 of 200 for fp16 and for the conv). The probe now draws the
way MetaSchedule samples its first population, many draws within a time budget. Built for CUDA
without a GPU, as a session's spec is checked before anything is stored; a space that truly cannot
schedule (a GPU with 64 bytes of shared memory a block) is still refused in one line."""

from __future__ import annotations

import json

import pytest

from tunelab.core.errors import SpaceError
from tunelab.core.records import SessionSpec
from tunelab.core.search.space.factory import make_space
from tunelab.core.session.loop import check_schedulable, check_spec
from tunelab.core.target.info import H200_TARGET, resolve_target
from tunelab.core.workloads.catalog import get_workload

# The target the H200 run resolved to (issue 29's reproduction), with the limits VerifyGPUCode checks.
H200 = H200_TARGET
GEMM_4096 = {"M": 4096, "N": 4096, "K": 4096}
RESNET_CONV = dict(N=1, C=64, H=56, W=56, K=64, R=3, S=3, stride=1, pad=1, dilation=1)


@pytest.mark.parametrize(
    ("workload", "shape", "dtype"),
    [
        ("gemm", GEMM_4096, "float32"),
        pytest.param(
            "gemm", GEMM_4096, "float16:float32", marks=pytest.mark.slow
        ),  # tensor intrinsics: ~15 s
        ("conv2d_nchw", RESNET_CONV, "float32"),
    ],
    ids=["fp32-gemm", "fp16-fp32-gemm", "resnet-conv"],
)
def test_the_h200_sessions_that_were_refused_now_start(workload, shape, dtype):
    spec = SessionSpec(
        workload=workload,
        shape=shape,
        dtype=dtype,
        target=json.dumps(H200),
        space_kind="auto",
        tuner="evolutionary",
        trials=64,
    )
    space = check_spec(spec).space  # raised SpaceError before
    draws = check_schedulable(space)
    assert draws > 1  # the first config alone is not legal here: the probe really draws
    assert draws <= 1000


def test_a_space_that_truly_cannot_schedule_is_refused_in_one_line_within_its_budget():
    tiny_smem = {**H200, "max_shared_memory_per_block": 64}
    workload = get_workload("gemm")
    space = make_space(
        workload,
        {"M": 256, "N": 256, "K": 256},
        "float32",
        resolve_target(json.dumps(tiny_smem)),
        "auto",
        None,
    )
    with pytest.raises(SpaceError) as caught:
        check_schedulable(space, budget_s=2.0)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the auto space cannot schedule this compute: none of ")
    assert "VerifyGPUCode" in message
    drawn = int(message.split("none of ")[1].split()[0])
    assert drawn > 8  # drawn until the budget ran out, not a fixed handful


def test_the_draw_count_bounds_the_probe_too():
    space = make_space(
        get_workload("gemm"),
        {"M": 256, "N": 256, "K": 256},
        "float32",
        resolve_target(json.dumps({**H200, "max_shared_memory_per_block": 64})),
        "auto",
        None,
    )
    with pytest.raises(SpaceError, match="none of 5 configs drawn"):
        check_schedulable(space, budget_s=600, max_draws=5)

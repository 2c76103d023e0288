"""A task fills its batches while the tuner proposes configs not yet measured, however many of them the space
rejects, and a session that stops before its budget says why.

On sm_90 about 98 % of uniform draws of GEMM 4096^3's auto space fail VerifyGPUCode (36 of 2,000 legal
here). A task used to give up after twenty asks in a row without a legal config: random search of seed 1
stopped after 12 trials of 64, and the session ended as "finished" with no word of why. Built for CUDA
without a GPU, as a session's batches are before they are measured."""

from __future__ import annotations

import json

from cli_runs import run_tunelab, tune_gemm
from stores import add_session

from tunelab.core.records import SessionSpec
from tunelab.core.search.space.factory import make_space
from tunelab.core.search.tuners.base import Observation
from tunelab.core.session.task import TuningTask
from tunelab.core.store import Store
from tunelab.core.target.info import H200_TARGET, resolve_target
from tunelab.core.workloads.catalog import get_workload

GEMM_4096 = {"M": 4096, "N": 4096, "K": 4096}


def test_random_search_fills_every_batch_where_the_gpu_rejects_most_configs(tmp_path):
    target = resolve_target(json.dumps(H200_TARGET))
    space = make_space(get_workload("gemm"), GEMM_4096, "float32", target, "auto", None)
    spec = SessionSpec(workload="gemm", shape=GEMM_4096, tuner="random", seed=1, space_kind="auto")
    with Store(tmp_path / "tunelab.sqlite") as store:
        sid = add_session(store, spec, target_json=H200_TARGET, target_kind="cuda")
        task = TuningTask(store.tasks(sid)[0], space, [], False, store.session(sid), None)
    reasons: list[str] = []
    sizes = []
    for _ in range(3):
        batch = task.ask_valid(8, reasons.append)
        sizes.append(len(batch))
        for config, _schedule in batch:  # as the loop records a batch it measured
            task.measured.add(task.key(config))
        task.tuner.tell([Observation(config, 1.0) for config, _ in batch])
    assert sizes == [8, 8, 8]  # was 5, 7, then nothing
    assert task.spent == ""
    assert len(reasons) > 8 * 3  # the space did reject most of what was proposed
    assert all("VerifyGPUCode" in why for why in reasons)


def test_a_session_whose_space_is_spent_says_so(tmp_path):
    """A space of 3 configs and a budget of 8: three trials, then the line that says why no more."""
    w = get_workload("gemm")
    data = make_space(w, {"M": 32, "N": 32, "K": 32}, "float32", resolve_target("llvm"), "template").to_json()
    for knob in data["knobs"]:
        knob["candidates"] = knob["candidates"][:3] if knob["name"] == "tile_i" else knob["candidates"][:1]
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(data))
    db = tmp_path / "tunelab.sqlite"
    args = tune_gemm("--space-file", str(space_file), "--tuner", "random", "--db", str(db), trials=8)
    proc = run_tunelab(*args, "--repeat", "1", "--min-repeat-ms", "0", "--confirm-runs", "0", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["trials"] == 3
    said = "tuning stopped after 3 trials: the tuner had no config left to propose (the space holds 3)"
    assert summary["spent"] == [said]

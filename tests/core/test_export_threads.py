"""An export states the kernel threads its figure needs, and how a person's process gets them (issue 26,
probe 0: an exported GEMM ran 2.05x slower in a fresh process than its file stated, since plain TVM's pool
takes half the CPUs on x86 and tunelab measures with TVM_NUM_THREADS set to every core).

The library is loaded as a person's application loads it: a fresh Python process whose environment holds
none of TVM's thread variables, `tvm.runtime.load_module`, inputs from `tvm.runtime.tensor`. There, the
pool is TVM's default; with the variable the file names, it is the figure's thread count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tunelab.core.export.files import export_trial
from tunelab.core.export.pick import export_pick
from tunelab.core.measure.threads import SPIN_VARIABLE, THREADS_VARIABLES, tvm_default_threads
from tunelab.core.store import Store

PERSONS_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tvm

    lib = tvm.runtime.load_module(sys.argv[1])
    m, n, k = 32, 32, 32
    a = np.random.default_rng(0).random((m, k), dtype=np.float32)
    b = np.random.default_rng(1).random((k, n), dtype=np.float32)
    c = tvm.runtime.tensor(np.zeros((m, n), dtype=np.float32))
    lib["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    print(json.dumps({
        "threads": int(tvm.get_global_func("runtime.NumThreads")()),
        "correct": bool(np.allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)),
    }))
    """
)


def _persons_process(library: str, extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (*THREADS_VARIABLES, SPIN_VARIABLE)}
    proc = subprocess.run(
        [sys.executable, "-c", PERSONS_PROCESS, library],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, **extra},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_file_states_the_threads_and_a_person_gets_them_with_the_variable_it_names(
    finished_session, tmp_path
):
    path, sid = finished_session
    store = Store(path)
    try:
        cores = store.session(sid).target["num-cores"]
        written = export_trial(store, sid, out_dir=str(tmp_path / "out"))
        pick = export_pick(store, sid)
    finally:
        store.close()
    with open(written["schedule"], encoding="utf-8") as f:
        stated = json.load(f)["stats"]["threads"]
    assert stated["threads"] == cores and stated["variable"] == "TVM_NUM_THREADS"
    assert f"set TVM_NUM_THREADS={cores} in the process that loads the library" in stated["how"]
    assert stated["how"] in pick.summary()  # what show and the export dialog say too
    default = tvm_default_threads()
    assert ("plain TVM would use" in stated["how"]) == (default != cores)

    plain = _persons_process(written["library"], {})
    assert plain == {"threads": default, "correct": True}  # what plain TVM gives, as the file warns
    told = _persons_process(written["library"], {stated["variable"]: str(stated["threads"])})
    assert told == {"threads": cores, "correct": True}

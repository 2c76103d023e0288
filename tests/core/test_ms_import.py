"""`tunelab import WORK_DIR`: MetaSchedule runs read in as sessions (real TVM, real sessions, real tune_tir)."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest
from specs import small_spec

from tunelab.core.cli.main import main
from tunelab.core.store import Store

pytestmark = pytest.mark.slow

DB_FILES = ("database_workload.json", "database_tuning_record.json")


def _lines(folder, name):
    return [json.loads(t) for t in (folder / name).read_text().splitlines() if t.strip()]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A real finished session (GEMM 32^3, llvm, auto space, 4 trials) and the MetaSchedule database
    export of each of its measured trials, one folder per trial: {trial id: folder}."""
    from tunelab.core.export.files import export_trial
    from tunelab.core.session.loop import create_session

    root = tmp_path_factory.mktemp("roundtrip")
    store = Store(root / "source.sqlite")
    session = create_session(store, small_spec(space_kind="auto", tuner="random", trials=4, batch=4))
    list(session.run())
    folders = {}
    for trial in store.trials(session.session_id):
        if trial.status == "ok":
            export_trial(
                store, session.session_id, trial.id, out_dir=root / f"t{trial.id}", formats=("database",)
            )
            folders[trial.id] = root / f"t{trial.id}" / "database"
    yield store, session.session_id, folders
    store.close()


def test_round_trip_of_tunelabs_own_export_gives_the_same_trials_back(exported, tmp_path):
    import tvm_ffi

    from tunelab.core.search.space.factory import space_for_session

    source, source_id, folders = exported
    assert len(folders) >= 2
    db = tmp_path / "imported.sqlite"
    originals = {t.id: t for t in source.trials(source_id)}
    source_space = space_for_session(source.session(source_id))
    for folder in folders.values():
        assert main(["import", str(folder), "--db", str(db)]) == 0
    store = Store(db)
    sessions = sorted(store.sessions(), key=lambda r: r.id)
    assert len(sessions) == len(folders)
    for record, (trial_id, folder) in zip(sessions, folders.items(), strict=True):
        original = originals[trial_id]
        assert record.workload == "gemm" and record.shape == {"M": 32, "N": 32, "K": 32}
        assert record.space_kind == "auto" and record.status == "finished"
        assert record.name.endswith(f"imported from {folder.resolve()}")
        assert record.target["mcpu"] == source.session(source_id).target["mcpu"]
        (trial,) = store.trials(record.id)
        assert trial.status == "ok" and trial.number == 1
        # the same schedule: the same point of the same space, and structurally the same IR
        assert trial.config == original.config
        imported_space = space_for_session(record)
        assert tvm_ffi.structural_equal(
            imported_space.schedule(trial.config).mod, source_space.schedule(original.config).mod
        )
        # the export states one run time (the session's median: this session was not confirmed), which
        # MetaSchedule keeps as float32
        assert trial.latency_ms == pytest.approx(original.latency_ms, rel=1e-6)
        (exported_record,) = _lines(folder, "database_tuning_record.json")
        assert trial.trace_json == exported_record[1][0]
    store.close()


@pytest.fixture(scope="module")
def tune_tir_dir(tmp_path_factory):
    """A real `tune_tir` work folder: GEMM 32^3 on this host's llvm target, 4 trials of 3 runs each."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.measure.runner import fast_build
    from tunelab.core.target.info import llvm_target
    from tunelab.core.workloads.catalog import get_workload

    work_dir = tmp_path_factory.mktemp("tune_tir")
    mod = get_workload("gemm").ir_module({"M": 32, "N": 32, "K": 32}, "float32")
    ms.tune_tir(
        mod,
        tvm.target.Target(llvm_target().json),
        work_dir=str(work_dir),
        max_trials_global=4,
        num_trials_per_iter=4,
        # the default builder imports tensor intrinsics in each worker (TVM_NOTES 1.3): 30 s timeouts here
        builder=ms.builder.LocalBuilder(max_workers=1, f_build=fast_build),
        # three run seconds per record: the trial's three samples
        runner=ms.runner.LocalRunner(
            evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=3, min_repeat_ms=1)
        ),
    )
    return work_dir


def test_a_tune_tir_folder_becomes_a_session_of_its_records(tune_tir_dir, tmp_path, capsys):
    import tvm_ffi
    from tvm.s_tir import Schedule, Trace
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.search.space.factory import space_for_session
    from tunelab.core.target.info import llvm_target

    db = tmp_path / "t.sqlite"
    assert main(["import", str(tune_tir_dir), "--db", str(db), "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    lines = _lines(tune_tir_dir, "database_tuning_record.json")
    assert len(lines) == 4
    store = Store(db)
    record = store.session(printed["id"])
    assert (record.workload, record.shape, record.dtype) == ("gemm", {"M": 32, "N": 32, "K": 32}, "float32")
    assert record.target["mcpu"] == llvm_target().json["mcpu"]
    trials = store.trials(record.id)
    assert [t.number for t in trials] == [1, 2, 3, 4]
    space = space_for_session(record)
    (workload_line,) = _lines(tune_tir_dir, "database_workload.json")
    mod = ms.database.Workload.from_json(workload_line).mod
    for trial, line in zip(trials, lines, strict=True):  # the file's order, its run seconds as samples
        run_secs = line[1][1]
        assert trial.trace_json == line[1][0]
        # the trial's config is the record's schedule: tunelab's space rebuilds the same IR from it
        recorded = Schedule(mod)
        Trace.apply_json_to_schedule(line[1][0], recorded)
        assert tvm_ffi.structural_equal(space.schedule(trial.config).mod, recorded.mod)
        if run_secs is None or min(run_secs) >= 1e9:
            assert trial.status == "run_error"
        else:
            assert trial.status == "ok" and len(run_secs) == 3
            assert store.samples(trial.id) == pytest.approx([s * 1e3 for s in run_secs], rel=1e-9)
    # tunelab's figure is the median of the samples, MetaSchedule ranks by their mean: both agree
    ok = [t for t in trials if t.status == "ok"]
    assert ok, "tune_tir measured no candidate"
    assert record.best_ms == pytest.approx(min(statistics.median(store.samples(t.id)) for t in ok), rel=1e-9)
    database = ms.database.JSONDatabase(work_dir=str(tune_tir_dir), allow_missing=False)
    (top,) = database.get_top_k(database.get_all_tuning_records()[0].workload, 1)
    top_mean_ms = 1e3 * statistics.fmean(float(s) for s in top.run_secs)
    assert min(t.mean_ms for t in ok) == pytest.approx(top_mean_ms, rel=1e-6)
    # the imported session exports like one tuned here: its best record's schedule, as a schedule file
    from tunelab.core.export.files import export_trial, schedule_from_file

    written = export_trial(store, record.id, out_dir=tmp_path / "export", formats=("schedule",))
    best = min(ok, key=lambda t: (t.latency_ms, t.id))
    _, exported_sch = schedule_from_file(written["schedule"])
    assert tvm_ffi.structural_equal(exported_sch.mod, space.schedule(best.config).mod)
    store.close()
    # the same folder a second time: refused, naming the session that holds it; nothing more stored
    err = _bad(capsys, tune_tir_dir, "--db", db)
    assert f"already in the store as session {record.id}" in err, err
    assert [s.id for s in Store(db).sessions()] == [record.id]


def _bad(capsys, *args):
    code = main(["import", *map(str, args)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    return err[0]


def _copy(folder, to):
    to.mkdir()
    for name in DB_FILES:
        shutil.copy(folder / name, to / name)
    return to


def test_bad_folders_are_one_line_and_store_nothing(exported, tmp_path, capsys):
    _, _, folders = exported
    good = next(iter(folders.values()))
    db = tmp_path / "none.sqlite"

    assert "does not exist" in _bad(capsys, tmp_path / "missing", "--db", db)
    (tmp_path / "plain").mkdir()
    assert "holds no MetaSchedule database" in _bad(capsys, tmp_path / "plain", "--db", db)

    truncated = _copy(good, tmp_path / "truncated")
    text = (truncated / "database_tuning_record.json").read_text()
    (truncated / "database_tuning_record.json").write_text(text[: len(text) // 2])
    assert "database_tuning_record.json line 1 is not JSON (cut short?)" in _bad(
        capsys, truncated, "--db", db
    )

    other_tvm = _copy(good, tmp_path / "other_tvm")  # an instruction this TVM does not know
    (line,) = _lines(other_tvm, "database_tuning_record.json")
    line[1][0][0][0][0] = "GetBlockFromTheFuture"
    (other_tvm / "database_tuning_record.json").write_text(json.dumps(line) + "\n")
    message = _bad(capsys, other_tvm, "--db", db)
    assert message.startswith("tunelab: error: database_tuning_record.json line 1: its trace does not apply")
    assert "GetBlockFromTheFuture is not registered" in message

    misfit = _copy(good, tmp_path / "misfit")  # a trace that names a block the workload lacks
    text = (misfit / "database_tuning_record.json").read_text()
    (misfit / "database_tuning_record.json").write_text(text.replace('["C","main"]', '["D","main"]', 1))
    message = _bad(capsys, misfit, "--db", db)
    assert "database_tuning_record.json line 1: its trace does not apply" in message

    empty = _copy(good, tmp_path / "empty")
    (empty / "database_tuning_record.json").write_text("")
    assert "holds no tuning records" in _bad(capsys, empty, "--db", db)

    assert not db.exists()  # bad input created no store


# What the scripts that make a real MetaSchedule work folder share: the folder from argv, this host's LLVM
# target, 4 candidates a round, tunelab's fast builder (the default one imports tensor intrinsics in each
# worker) and three samples a record.
MS_TUNE_OPTIONS = """
import sys
import tvm
from tvm.s_tir import meta_schedule as ms
from tunelab.core.measure.runner import fast_build
from tunelab.core.target.info import llvm_target

OPTIONS = dict(
    target=tvm.target.Target(llvm_target().json),
    work_dir=sys.argv[1],
    num_trials_per_iter=4,
    builder=ms.builder.LocalBuilder(max_workers=1, f_build=fast_build),
    runner=ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=3, min_repeat_ms=1)),
)
"""

OPAQUE_TUNE_TIR = (
    MS_TUNE_OPTIONS
    + """
from tvm import te

a = te.placeholder((64, 128), "float32", name="A")
k = te.reduce_axis((0, 128), name="k")
squares = te.compute((64,), lambda i: te.sum(a[i, k] * a[i, k], axis=k), name="S")
halved = te.compute((64,), lambda i: squares[i] * 0.5, name="H")
ms.tune_tir(tvm.IRModule({"main": te.create_prim_func([a, halved])}), max_trials_global=4, **OPTIONS)
"""
)


@pytest.fixture(scope="module")
def opaque_tune_tir_dir(tmp_path_factory):
    """A real `tune_tir` work folder of a workload tunelab's catalog does not know: each row's sum of
    squares, halved (64 x 128, float32), 4 trials. In its own process: a second tune_tir in one process
    fails in MetaSchedule's logging set-up (its handlers list holds None)."""
    import subprocess
    import sys

    work_dir = tmp_path_factory.mktemp("opaque")
    subprocess.run([sys.executable, "-c", OPAQUE_TUNE_TIR, str(work_dir)], check=True, timeout=600)
    return work_dir


def test_a_workload_the_catalog_does_not_know_imports_as_tir_and_is_remeasured_and_exported(
    opaque_tune_tir_dir, tmp_path, capsys
):
    import numpy as np
    import tvm_ffi
    from tvm.s_tir import Schedule, Trace
    from tvm.s_tir import meta_schedule as ms

    from tunelab.core.export.files import export_trial, schedule_from_file
    from tunelab.core.search.space.factory import space_for_session
    from tunelab.core.workloads.catalog import get_workload

    db = tmp_path / "t.sqlite"
    assert main(["import", str(opaque_tune_tir_dir), "--db", str(db), "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    store = Store(db)
    record = store.session(printed["id"])
    assert (record.workload, record.shape, record.space_kind) == ("tir", {}, "records")
    workload = get_workload(record.workload, record.custom_source)
    assert workload.main_block == "S" and workload.flops() == 2 * 64 * 128
    (workload_line,) = _lines(opaque_tune_tir_dir, "database_workload.json")
    mod = ms.database.Workload.from_json(workload_line).mod
    assert tvm_ffi.structural_equal(workload.ir_module(), mod)  # the PrimFunc survives its TVMScript text
    lines = _lines(opaque_tune_tir_dir, "database_tuning_record.json")
    trials = store.trials(record.id)
    assert [t.config for t in trials] == [{"record": i} for i in range(len(lines))] and len(lines) == 4
    space = space_for_session(record)
    for trial, line in zip(trials, lines, strict=True):
        recorded = Schedule(mod)
        Trace.apply_json_to_schedule(line[1][0], recorded)
        assert tvm_ffi.structural_equal(space.schedule(trial.config).mod, recorded.mod)
    # the reference is the unscheduled PrimFunc: it computes what the workload means
    inputs = workload.make_inputs()
    np.testing.assert_allclose(workload.reference(inputs), (inputs[0] ** 2).sum(axis=1) * 0.5, rtol=1e-5)
    store.close()
    # re-measured here, each kernel checked against that reference
    assert main(["validate", str(record.id), "--db", str(db), "--repeats", "3", "--top", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "error" not in json.dumps(report).lower() or report, report
    # exported as a schedule file that rebuilds the best record's schedule
    store = Store(db)
    ok = [t for t in store.trials(record.id) if t.status == "ok"]
    best = min(ok, key=lambda t: (t.latency_ms, t.id))
    written = export_trial(store, record.id, out_dir=tmp_path / "export", formats=("schedule",))
    _, exported_sch = schedule_from_file(written["schedule"], trust_custom=True)
    assert tvm_ffi.structural_equal(exported_sch.mod, space.schedule(best.config).mod)
    store.close()
    # not tuned further: one line, nothing stored
    from tunelab.core.errors import TunelabError
    from tunelab.core.session.loop import TuningSession

    before = [(s.id, s.n_trials, s.status) for s in Store(db).sessions()]
    for args in (["tune", "tir", "--trials", "4"], ["tune", "--resume", str(record.id)]):
        code = main([*args, "--db", str(db)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
    assert "not tuned further" in main_err(["tune", "tir", "--trials", "4", "--db", str(db)], capsys)
    store = Store(db)
    with pytest.raises(TunelabError, match="not tuned further"):
        TuningSession(store, record.id)
    store.close()
    assert [(s.id, s.n_trials, s.status) for s in Store(db).sessions()] == before


def main_err(args, capsys):
    assert main(args) == 2
    return capsys.readouterr().err


def test_a_schedule_measured_twice_is_two_trials(exported, tmp_path, capsys):
    _, _, folders = exported
    twice = _copy(next(iter(folders.values())), tmp_path / "twice")
    text = (twice / "database_tuning_record.json").read_text()
    (twice / "database_tuning_record.json").write_text(text + text)
    db = tmp_path / "twice.sqlite"
    assert main(["import", str(twice), "--db", str(db), "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    store = Store(db)
    first, second = store.trials(printed["id"])
    assert (first.number, second.number) == (1, 2) and first.config == second.config
    assert first.latency_ms == second.latency_ms
    store.close()


def test_a_record_of_a_failed_run_is_a_failed_trial(exported, tmp_path, capsys):
    _, _, folders = exported
    failed = _copy(next(iter(folders.values())), tmp_path / "failed")
    (line,) = _lines(failed, "database_tuning_record.json")
    line[1][1] = [1e10]  # what MetaSchedule records for a candidate that did not build or run
    (failed / "database_tuning_record.json").write_text(json.dumps(line) + "\n")
    db = tmp_path / "failed.sqlite"
    assert main(["import", str(failed), "--db", str(db), "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    store = Store(db)
    (trial,) = store.trials(printed["id"])
    assert trial.status == "run_error" and trial.latency_ms is None and store.samples(trial.id) == []
    assert "1e10" in trial.error
    assert store.session(printed["id"]).n_failed == 1
    store.close()


TUNE_RELAX = (
    MS_TUNE_OPTIONS
    + """
from tvm import relax

bb = relax.BlockBuilder()
x = relax.Var("x", relax.TensorType((32, 64), "float32"))
w = relax.Var("w", relax.TensorType((64, 48), "float32"))
with bb.function("main", [x, w]):
    with bb.dataflow():
        y = bb.emit(relax.op.matmul(x, w))
        z = bb.emit(relax.op.nn.relu(y))
        out = bb.emit_output(bb.emit(relax.op.sum(z, axis=[1])))
    bb.emit_func_output(out)
ms.relax_integration.tune_relax(relax.transform.LegalizeOps()(bb.get()), {}, max_trials_global=12, **OPTIONS)
"""
)


@pytest.fixture(scope="module")
def tune_relax_dir(tmp_path_factory):
    """A real `tune_relax` work folder of a three-operator Relax model (matmul, relu, row sum), legalized
    into three PrimFuncs: three workloads, 12 trials shared by MetaSchedule's task scheduler."""
    import subprocess
    import sys

    work_dir = tmp_path_factory.mktemp("relax")
    subprocess.run([sys.executable, "-c", TUNE_RELAX, str(work_dir)], check=True, timeout=900)
    return work_dir


def test_a_tune_relax_folder_of_several_workloads_becomes_one_session_each(tune_relax_dir, tmp_path, capsys):
    db = tmp_path / "t.sqlite"
    assert main(["import", str(tune_relax_dir), "--db", str(db), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    workloads = _lines(tune_relax_dir, "database_workload.json")
    records = _lines(tune_relax_dir, "database_tuning_record.json")
    assert len(workloads) == 3 and len(printed) == 3
    # each record belongs to the session of its workload (a record's first field is its workload's line)
    per_workload = [sum(1 for r in records if r[0] == i) for i in range(len(workloads))]
    assert sorted(p["trials"] for p in printed) == sorted(per_workload) and sum(per_workload) == len(records)
    # named after each PrimFunc's main block (the legalized matmul's, relu's "compute", the sum's)
    assert {p["name"].split(" ")[1] for p in printed} == {"matmul", "compute", "lv1_red"}
    store = Store(db)
    for p in printed:
        record = store.session(p["id"])
        assert record.space_kind == "records" and record.status == "finished"
        trials = store.trials(record.id)
        assert len(trials) == p["trials"] and any(t.ok for t in trials)
        assert record.best_ms == pytest.approx(min(t.latency_ms for t in trials if t.ok))
    store.close()
    # the same folder again: refused in one line, nothing more stored
    err = _bad(capsys, tune_relax_dir, "--db", db)
    assert "already in the store as session" in err, err
    assert len(Store(db).sessions()) == 3

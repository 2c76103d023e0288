"""tests/benchmarks/tuners_on_auto.py's side experiments (issue 28): a tuner named with options
(``ucb:split=share``) is a session of its own beside the plain tuner, scored under that name, and the
flags that would mix an experiment into the main result files are refused in one line."""

from __future__ import annotations

import pytest
from benchmarks.tuners_on_auto import main, result_name, score, session_name, store_path, tuner_spec
from stores import add_session, new_trial

from tunelab.core.records import SessionSpec
from tunelab.core.store import Store


def test_a_spec_is_a_tuner_and_its_options():
    assert tuner_spec("ucb") == ("ucb", [])
    assert tuner_spec("ucb:split=share:c=0.5") == ("ucb", ["split=share", "c=0.5"])
    assert result_name("gemm1024", 64) == "auto_tuners_gemm1024_64.json"
    assert (
        result_name("gemm1024", 64, "ucbsplit", "_remeasured")
        == "auto_tuners_gemm1024_64_ucbsplit_remeasured.json"
    )


def test_two_specs_of_one_tuner_are_scored_apart(tmp_path):
    """Both sessions record tuner "ucb"; each is scored under the name --tuners gave it."""
    planted = {
        "random": [4.0, 3.0, 5.0, 3.5],
        "ucb": [4.0, 2.0, 3.0, 2.5],
        "ucb:split=share": [3.0, 1.5, 2.0, 1.0],
    }
    db = store_path(tmp_path, "gemm1024", 4, 0)
    with Store(db) as store:
        for spec, latencies in planted.items():
            spec_of = SessionSpec(
                workload="gemm",
                shape={"M": 8, "N": 8, "K": 8},
                tuner=spec.split(":")[0],
                name=session_name(spec, 0),
            )
            sid = add_session(store, spec_of)
            for i, ms in enumerate(latencies):
                store.add_trial(sid, new_trial({"i": i}, (ms,)), f"k{i}")
            store.set_status(sid, "finished")
    doc = score("gemm1024", 1, 4, tmp_path, list(planted), {})
    best = {r["tuner"]: r["best_ms"] for r in doc["per_seed"]}
    assert best == {"random": 3.0, "ucb": 2.0, "ucb:split=share": 1.0}


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--tuners", "random,ucb"], "--tuners needs --label"),
        (["--tuners", "xgb,ucb", "--label", "x"], "random must be among them"),
        (
            ["--tuners", "random,annealing:c=1", "--label", "x"],
            "--tuners: not a tuner of auto spaces here: annealing",
        ),
    ],
)
def test_side_experiment_flags_refused_in_one_line(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--problem", "gemm1024", *argv])
    assert stop.value.code == 2
    assert said in capsys.readouterr().err

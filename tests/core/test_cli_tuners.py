"""`tunelab tuners`: every registered tuner, its one line, its space kinds, and whether it loads here."""

from __future__ import annotations

import json
import subprocess

from cli_runs import run_tunelab

from tunelab.core.search.tuners.registry import (
    recommendation_words,
    tuner_description,
    tuner_names,
    tuner_space_kinds,
    tuner_unavailable,
)


def tunelab(*args: str) -> subprocess.CompletedProcess:
    return run_tunelab(*args, timeout=300)


def test_tuners_json_lists_every_tuner():
    proc = tunelab("tuners", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [t["name"] for t in doc] == tuner_names()
    for t in doc:
        assert t["description"] == tuner_description(t["name"])
        assert t["spaces"] == list(tuner_space_kinds(t["name"]))
        assert t["unavailable"] == tuner_unavailable(t["name"])
    by_name = {t["name"]: t for t in doc}
    assert by_name["tpe"]["spaces"] == ["template"] and by_name["tpe"]["unavailable"] is None
    assert by_name["evolutionary"]["spaces"] == ["template", "auto"]


def test_tuners_table_says_why_one_does_not_load():
    proc = tunelab("tuners")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["tuner", "spaces", "loads", "what", "it", "does"]
    for name in tuner_names():
        row = next(line for line in lines[1:] if line.split()[0] == name)
        assert tuner_description(name) in row
        assert (" yes " in row) == (tuner_unavailable(name) is None)
        if tuner_unavailable(name) is not None:  # gp without PyTorch: the reason, on its own line
            assert f"{name}: {tuner_unavailable(name)}" in lines
    # then what `tunelab tune` runs without --tuner, per space kind
    assert lines[-3:] == [
        "recommended (what tune runs without --tuner):",
        *[f"  {w}" for w in recommendation_words()],
    ]


def test_tuners_takes_no_positional_argument():
    proc = tunelab("tuners", "xgb")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "unrecognized arguments: xgb" in proc.stderr

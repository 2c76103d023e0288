"""SessionSpec as JSON (what `tunelab tune --spec FILE` reads and the desktop app writes)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from specs import CHANGED_MEASURE

from tunelab.core.errors import TunelabError
from tunelab.core.records import MeasureOptions, SessionSpec

FULL = SessionSpec(
    workload="custom",
    shape={"M": 32, "N": 16, "K": 8},
    dtype="float16",
    target='{"kind": "llvm"}',
    space_kind="auto",
    space={"sketches": [1, 2], "tile_i": [[4, 8]], "nested": {"a": None}},
    tuner="genetic",
    tuner_options={"pop_size": 16, "mutation": 0.25, "names": ["x"]},
    trials=12,
    batch=3,
    early_stop=5,
    seed=7,
    measure=MeasureOptions(**CHANGED_MEASURE),
    name="a name — with unicode ³",
    custom_source="import tvm\n# the TE compute\n",
    shapes=({"M": 16, "N": 16, "K": 8}, {"M": 64, "N": 16, "K": 8}),
)


@pytest.mark.parametrize(
    "spec", [FULL, SessionSpec(workload="gemm", shape={"M": 8})], ids=["full", "defaults"]
)
def test_round_trip_is_exact(spec):
    text = json.dumps(spec.to_json())  # plain JSON
    again = SessionSpec.from_json(json.loads(text))
    assert again == spec
    assert isinstance(again.shapes, tuple) and isinstance(again.measure, MeasureOptions)
    assert again.measure == spec.measure and again.custom_source == spec.custom_source
    assert json.dumps(again.to_json()) == text


def test_to_json_is_a_copy():
    data = FULL.to_json()
    data["shape"]["M"] = 1
    data["space"]["tile_i"].append([1])
    data["shapes"][0]["M"] = 1
    assert FULL.shape["M"] == 32 and FULL.space["tile_i"] == [[4, 8]] and FULL.shapes[0]["M"] == 16


def test_every_field_is_written():
    data = FULL.to_json()
    assert set(data) == {f.name for f in fields(SessionSpec)}
    assert set(data["measure"]) == {f.name for f in fields(MeasureOptions)}


def test_missing_keys_take_the_defaults_and_shapes_may_be_cli_text():
    spec = SessionSpec.from_json(
        {"workload": "gemm", "shape": "M=64,N=64", "shapes": ["M=32"], "measure": {"timeout_s": 10}}
    )
    assert spec == SessionSpec(
        workload="gemm",
        shape="M=64,N=64",
        shapes=("M=32",),  # type: ignore[arg-type]
        measure=MeasureOptions(timeout_s=10.0),
    )
    assert isinstance(spec.measure.timeout_s, float)


BAD = [
    ([1, 2], "session spec must be a JSON object, not a list"),
    ({"shape": {}}, "session spec lacks 'workload'"),
    ({"workload": "gemm", "shape": {}, "trails": 4}, "unknown key 'trails'"),
    ({"workload": "gemm", "shape": {}, "measure": {"numbr": 1}}, "'measure' has unknown key 'numbr'"),
    ({"workload": "gemm", "shape": {}, "trials": "4"}, "'trials' must be an integer, not a string"),
    ({"workload": "gemm", "shape": {}, "trials": 4.0}, "'trials' must be an integer, not a number"),
    ({"workload": "gemm", "shape": {}, "seed": True}, "'seed' must be an integer"),
    ({"workload": 3, "shape": {}}, "'workload' must be a string"),
    ({"workload": "gemm", "shape": {"M": "32"}}, "'shape' must be an object of integers"),
    ({"workload": "gemm", "shape": {}, "shapes": {"M": 8}}, "'shapes' must be a list"),
    ({"workload": "gemm", "shape": {}, "shapes": [{"M": 1.5}]}, "'shapes'[0] must be an object of integers"),
    ({"workload": "gemm", "shape": {}, "space": []}, "'space' must be an object or null"),
    ({"workload": "gemm", "shape": {}, "tuner_options": None}, "'tuner_options' must be an object, not null"),
    ({"workload": "gemm", "shape": {}, "early_stop": "never"}, "'early_stop' must be an integer or null"),
    ({"workload": "gemm", "shape": {}, "measure": None}, "'measure' must be a JSON object, not null"),
    (
        {"workload": "gemm", "shape": {}, "measure": {"cache_flush": "yes"}},
        "'measure.cache_flush' must be true or false",
    ),
    (
        {"workload": "gemm", "shape": {}, "measure": {"timeout_s": "30"}},
        "'measure.timeout_s' must be a number",
    ),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_bad_json_is_one_clear_tunelab_error(data, message):
    with pytest.raises(TunelabError) as info:
        SessionSpec.from_json(data)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_a_spec_file_reads_every_measurement_option():
    """A MeasureOptions field the spec reader does not type would crash `tunelab tune --spec` (the app's
    way of starting every session)."""
    from dataclasses import fields

    from tunelab.core.records import _MEASURE_TYPES, MeasureOptions, SessionSpec

    assert set(_MEASURE_TYPES) == {f.name for f in fields(MeasureOptions)}
    spec = SessionSpec(workload="gemm", shape=None, measure=MeasureOptions(l2_flush="on", lock_clocks=True))
    assert SessionSpec.from_json(spec.to_json()) == spec

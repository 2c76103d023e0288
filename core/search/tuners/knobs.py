"""A template space's knobs as index choices, for tuners that model each knob on its own (Optuna's
samplers, the RL agents).

A config is a vector of candidate indices, one per knob. Only template spaces have knobs a tuner can
name; an auto space's decisions are MetaSchedule's sketch traces, which these tuners do not drive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunelab.core.errors import TunerError
from tunelab.core.records import Config, config_key
from tunelab.core.search.space.base import SearchSpace


@dataclass(frozen=True)
class Knob:
    name: str
    candidates: tuple[Any, ...]
    ordered: bool  # numbers (or lists of numbers): neighbouring indices are similar configs


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float)


def _ordered(candidates: list[Any]) -> bool:
    return all(
        _is_number(c) or (isinstance(c, list | tuple) and all(_is_number(x) for x in c)) for c in candidates
    )


def template_knobs(space: SearchSpace, tuner: str) -> list[Knob]:
    """The space's knobs; TunerError (one line) for a space without named knobs (an auto space)."""
    raw = getattr(space, "knobs", None)
    if space.kind != "template" or raw is None:
        raise TunerError(
            f"tuner {tuner!r} drives a template space's knobs; for an {space.kind} space "
            "choose evolutionary, xgb, genetic or random"
        )
    pairs = list(raw.items()) if isinstance(raw, dict) else [(k["name"], k["candidates"]) for k in raw]
    return [Knob(str(name), tuple(values), _ordered(list(values))) for name, values in pairs]


class KnobCodec:
    """Configs <-> candidate-index vectors."""

    def __init__(self, knobs: list[Knob]) -> None:
        self.knobs = knobs
        # Candidates compared by their canonical JSON: a stored config's lists come back as lists.
        self._index = [{config_key({"v": c}): i for i, c in enumerate(k.candidates)} for k in knobs]

    def encode(self, config: Config) -> list[int] | None:
        """The indices of a config's values; None when a value is not a candidate (a stale config)."""
        out = []
        for knob, index in zip(self.knobs, self._index, strict=True):
            i = index.get(config_key({"v": config.get(knob.name)}))
            if i is None:
                return None
            out.append(i)
        return out

    def decode(self, indices: list[int]) -> Config:
        return {k.name: k.candidates[int(i)] for k, i in zip(self.knobs, indices, strict=True)}

"""A space's choices as index vectors, for tuners that model each choice on its own (Optuna's samplers,
the RL agents).

A template config is a vector of candidate indices, one per knob (:class:`KnobCodec`). An auto space's
config is a sketch and that sketch's sampling decisions (tile sizes, unroll steps, ...), each from a
finite candidate list: :class:`SketchCodec` lays them out as knobs too (the sketch first, then every
sketch's free decisions), and marks those of the sketches not chosen as unused (-1). Optuna's samplers
need one fixed set of named parameters and drive template knobs only.
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


def _candidate_index(knob: Knob) -> dict[str, int]:
    """A knob's candidates by their canonical JSON (a stored config's lists come back as lists)."""
    return {config_key({"v": c}): i for i, c in enumerate(knob.candidates)}


class KnobCodec:
    """Configs <-> candidate-index vectors."""

    def __init__(self, knobs: list[Knob]) -> None:
        self.knobs = knobs
        self._index = [_candidate_index(k) for k in knobs]

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

    def used(self, indices: list[int]) -> list[int]:
        """Every knob of a template config is used."""
        return [int(i) for i in indices]


UNUSED = -1  # a knob the config does not use (another sketch's decision)


class SketchCodec:
    """An auto space's configs <-> index vectors: knob 0 chooses the sketch, then each sketch's free
    decisions (those with more than one candidate) in order; a vector's knobs of other sketches are
    :data:`UNUSED`. Fixed decisions (a compute location MetaSchedule chose, a single candidate) keep
    the sketch's own value."""

    def __init__(self, space: SearchSpace) -> None:
        sketches = getattr(space, "sketches", None)
        if space.kind != "auto" or not sketches:
            raise TunerError(f"a sketch codec needs an auto space, not a {space.kind} one")
        self.space = space
        self.knobs = [Knob("sketch", tuple(range(len(sketches))), False)]
        self._free: list[list[tuple[int, int]]] = []  # per sketch: (decision position, knob index)
        for s, sketch in enumerate(sketches):
            free = []
            for pos, cands in enumerate(sketch.candidates):
                if cands is not None and len(cands) > 1:
                    free.append((pos, len(self.knobs)))
                    self.knobs.append(Knob(f"sketch{s}.d{pos}", tuple(cands), _ordered(list(cands))))
            self._free.append(free)
        self._index = [_candidate_index(k) for k in self.knobs]

    def used(self, indices: list[int]) -> list[int]:
        """``indices`` with the knobs of the sketches not chosen set to :data:`UNUSED`."""
        sketch = int(indices[0])
        keep = {0} | {k for _, k in self._free[sketch]}
        return [int(i) if k in keep else UNUSED for k, i in enumerate(indices)]

    def decode(self, indices: list[int]) -> Config:
        s = int(indices[0])
        sketch = self.space.sketches[s]  # type: ignore[attr-defined]
        decisions = list(sketch.base_decisions)
        for pos, k in self._free[s]:
            decisions[pos] = self.knobs[k].candidates[int(indices[k])]
        return {"sketch": s, "decisions": decisions}

    def encode(self, config: Config) -> list[int] | None:
        """The indices of a config's choices (other sketches' knobs :data:`UNUSED`); None when a decision
        is not a candidate (a stale config)."""
        s = config.get("sketch")
        if not isinstance(s, int) or not 0 <= s < len(self._free):
            return None
        out = [UNUSED] * len(self.knobs)
        out[0] = s
        decisions = config.get("decisions") or []
        for pos, k in self._free[s]:
            if pos >= len(decisions):
                return None
            i = self._index[k].get(config_key({"v": decisions[pos]}))
            if i is None:
                return None
            out[k] = i
        return out


def index_codec(space: SearchSpace, tuner: str) -> KnobCodec | SketchCodec:
    """The codec of a template space's knobs or an auto space's sketch decisions."""
    if space.kind == "auto" and getattr(space, "sketches", None):
        return SketchCodec(space)
    return KnobCodec(template_knobs(space, tuner))

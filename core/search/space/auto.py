"""The auto space: Ansor-style sketches derived from the compute by MetaSchedule's rules.

The space is the set of sketches MetaSchedule's post-order-apply generator produces for the
target with the enabled rules, and, inside each sketch, every random decision the sketch makes
(tile sizes through ``SamplePerfectTile``, unroll steps and the like through ``SampleCategorical``).
Compute-location decisions stay as the sketch sampled them.

The editable data names each rule with ``enabled`` and its main limits, e.g.
``{"name": "MultiLevelTiling", "enabled": true, "params": {"structure": "SSRSRS",
"max_innermost_factor": 64}}``. A config is ``{"sketch": 1, "decisions": [[4, 8, 2, 1], 2, ...]}``:
one value per sampling instruction of that sketch, in program order. A config may also hold
``"parallel": [16]``, the parallel-extent limit of each ``meta_schedule.parallel`` annotation where it
differs from the sketch's: MetaSchedule's ``MutateParallel`` changes that limit, which is an input of
an ``Annotate`` instruction, not a sampling decision, so decisions alone cannot say which schedule it
proposed (without it about 1 conv2d proposal in 80 matched no config and was never measured).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError, shown
from tunelab.core.records import Config, is_auto_config

# The rules and the sketches live in auto_rules and sketch; the names their users import from here stay.
from tunelab.core.search.space.auto_rules import (
    build_rules,
    check_rules,
    default_auto_space,
    default_mutators,
    default_postprocs,
    tensor_core_groups,
)
from tunelab.core.search.space.checks import is_int_in
from tunelab.core.search.space.packing import PackingChoice, choose_packing
from tunelab.core.search.space.scheduled import ScheduledSpace, invalid_schedule, last_line
from tunelab.core.search.space.sketch import (
    MAX_PARALLEL_LIMIT,
    Sketch,
    parallel_limits,
    partitioned_candidates,
    plain_decision,
    tile_candidates,
    trace_signature,
)
from tunelab.core.search.space.tvm_context import (
    InvalidSchedule,
    block_axes,
    find_main_block,
    light_tune_context,
)

__all__ = [
    "AutoSpace",
    "check_rules",
    "default_auto_space",
    "default_postprocs",
    "parallel_limits",
    "partitioned_candidates",
    "tensor_core_groups",
    "tile_candidates",
]

MAX_SKETCHES = 64


def _plain_matmul(prim_func: Any) -> bool:
    """Whether the compute's main block is ``C[i, j] += A[i, k] * B[k, j]``-shaped: two spatial axes and
    one reduction (see :func:`build_rules`)."""
    axes = block_axes(prim_func, find_main_block(prim_func))
    return [kind for _, _, kind in axes] == ["spatial", "spatial", "reduce"]


def _postproc_name(postproc: Any) -> str:
    """A postprocessor's name for a rejection; the one Python postprocessor (space/mma.py) comes back from
    TVM as a generic ``_PyPostproc``."""
    name = type(postproc).__name__
    return "PermutedLayoutCheck (an MMA tile's staged rows)" if name == "_PyPostproc" else name


def _packing_choice(
    rules: list[dict[str, Any]], workload: Any, shape: dict[str, int]
) -> PackingChoice | None:
    """What the CPU MultiLevelTiling rule's ``pack_inputs`` means for this problem (None: no such limit)."""
    for rule in rules:
        if rule["name"] == "MultiLevelTiling" and "pack_inputs" in rule["params"]:
            return choose_packing(rule["params"]["pack_inputs"], workload, shape)
    return None


def _resolved(rules: list[dict[str, Any]], packing: PackingChoice | None) -> list[dict[str, Any]]:
    """The rules with ``pack_inputs`` as the boolean it resolved to (the stored rules keep "auto")."""
    if packing is None:
        return rules
    return [
        {**r, "params": {**r["params"], "pack_inputs": packing.packs}}
        if r["name"] == "MultiLevelTiling"
        else r
        for r in rules
    ]


def _with_parallel_of(source: Config, config: Config) -> Config:
    """``config`` with ``source``'s parallel-extent limits, where it has its own."""
    return {**config, "parallel": list(source["parallel"])} if "parallel" in source else config


class AutoSpace(ScheduledSpace):
    kind = "auto"

    def _derive(self, data: dict[str, Any] | None) -> None:
        """The sketches MetaSchedule derives with the checked rules (``data``; None: the defaults)."""
        import tvm
        from tvm.s_tir import meta_schedule as ms

        target = self.target
        self.rules = check_rules(data if data is not None else default_auto_space(target.kind), target.kind)
        self.mod = tvm.IRModule({"main": self.workload.prim_func(self.shape, self.dtype)})
        arch = target.json.get("arch") if target.kind == "cuda" else None
        self.packing = _packing_choice(self.rules, self.workload, self.shape)
        sch_rules = build_rules(
            _resolved(self.rules, self.packing),
            target.kind,
            self.dtype,
            arch,
            _plain_matmul(self.mod["main"]),
        )
        self.tensor_core = any(type(r).__name__ == "MultiLevelTilingTensorCore" for r in sch_rules)
        self.space_generator = ms.space_generator.PostOrderApply(
            sch_rules=sch_rules,
            postprocs=default_postprocs(target.kind, self.tensor_core),
            mutator_probs=default_mutators(target.kind),
        )
        self.context = light_tune_context(self.mod, target.tvm_target(), space_generator=self.space_generator)
        try:
            spaces = self.context.generate_design_space()
        except Exception as exc:  # noqa: BLE001 - MetaSchedule's rules raise TVMError or Python errors alike
            raise SpaceError(
                f"MetaSchedule could not derive sketches with these rules: {last_line(exc)}"
            ) from None
        if not spaces:
            raise SpaceError("the enabled rules derive no sketch for this compute")
        self.sketches = [Sketch(s.trace) for s in spaces[:MAX_SKETCHES]]
        self.postprocs = list(self.space_generator.postprocs)
        self._max_knobs = max(
            sum(len(c) if isinstance(c, list) else 1 for c in s.base_decisions if c is not None)
            for s in self.sketches
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "auto",
            "target_kind": self.target.kind,
            "rules": self.rules,
            "sketches": [{"size": s.size, "decisions": len(s.insts)} for s in self.sketches],
            **({"packing": self.packing.to_json()} if self.packing else {}),
        }

    @property
    def size(self) -> int:
        return sum(s.size for s in self.sketches)

    def point(self, index: int) -> Config:
        self.check_index(index)
        sketch_index = 0
        while index >= self.sketches[sketch_index].size:
            index -= self.sketches[sketch_index].size
            sketch_index += 1
        sketch = self.sketches[sketch_index]
        decisions = list(sketch.base_decisions)
        for pos in reversed(range(len(decisions))):
            cands = sketch.candidates[pos]
            if cands is None:
                continue
            index, k = divmod(index, len(cands))
            decisions[pos] = cands[k]
        return {"sketch": sketch_index, "decisions": decisions}

    def sample(self, rng: np.random.Generator) -> Config:
        weights = np.array([float(s.size) for s in self.sketches])
        i = int(rng.choice(len(self.sketches), p=weights / weights.sum())) if len(self.sketches) > 1 else 0
        sketch = self.sketches[i]
        decisions = [
            c[int(rng.integers(len(c)))] if c is not None else d
            for c, d in zip(sketch.candidates, sketch.base_decisions, strict=True)
        ]
        return {"sketch": i, "decisions": decisions}

    def mutate(self, config: Config, rng: np.random.Generator) -> Config:
        sketch = self.sketches[config["sketch"]]
        free = [p for p, c in enumerate(sketch.candidates) if c is not None and len(c) > 1]
        if not free:
            return _with_parallel_of(
                config, {"sketch": config["sketch"], "decisions": list(config["decisions"])}
            )
        pos = free[int(rng.integers(len(free)))]
        cands = sketch.candidates[pos] or ()  # free positions have candidates
        choices = [c for c in cands if c != config["decisions"][pos]]
        decisions = list(config["decisions"])
        decisions[pos] = choices[int(rng.integers(len(choices)))]
        return _with_parallel_of(config, {"sketch": config["sketch"], "decisions": decisions})

    def crossover(self, a: Config, b: Config, rng: np.random.Generator) -> Config:
        if a["sketch"] != b["sketch"]:
            return _with_parallel_of(a, {"sketch": a["sketch"], "decisions": list(a["decisions"])})
        mixed = [x if rng.random() < 0.5 else y for x, y in zip(a["decisions"], b["decisions"], strict=True)]
        return _with_parallel_of(a, {"sketch": a["sketch"], "decisions": mixed})

    def region(self, config: Config) -> int:
        return int(config["sketch"])  # a mutation or crossover keeps its sketch

    def knob_vector(self, config: Config) -> np.ndarray:
        values = [float(config["sketch"])]
        for d in config["decisions"]:
            if isinstance(d, list):
                values.extend(math.log2(max(f, 1)) for f in d)
            elif d is not None:
                values.append(float(d))
        values += [0.0] * (self._max_knobs + 1 - len(values))
        return np.asarray(values[: self._max_knobs + 1], dtype=np.float64)

    def check_config(self, config: Config) -> None:
        if not isinstance(config, dict) or not is_auto_config(config):
            raise SpaceError(
                'an auto-space config is {"sketch": i, "decisions": [...]} (and optionally "parallel": [...])'
            )
        i = config["sketch"]
        if not isinstance(i, int) or not 0 <= i < len(self.sketches):
            raise SpaceError(
                f"sketch {shown(i)} does not exist; the space has {len(self.sketches)} sketch(es)"
            )
        sketch = self.sketches[i]
        decisions = config["decisions"]
        if not isinstance(decisions, list) or len(decisions) != len(sketch.insts):
            raise SpaceError(f"sketch {i} takes {len(sketch.insts)} decisions")
        for pos, (value, cands) in enumerate(zip(decisions, sketch.candidates, strict=True)):
            if cands is not None and value not in cands:
                raise SpaceError(
                    f"sketch {i}, decision {pos} ({sketch.insts[pos].kind.name}): {shown(value)} is not allowed"
                )
        if "parallel" in config:
            limits = config["parallel"]
            if (
                not isinstance(limits, list)
                or len(limits) != len(sketch.base_parallel)
                or not all(is_int_in(v, 1, MAX_PARALLEL_LIMIT) for v in limits)
            ):
                raise SpaceError(
                    f'sketch {i}\'s "parallel" is {len(sketch.base_parallel)} parallel-extent limit(s), '
                    f"each an integer from 1 to {MAX_PARALLEL_LIMIT}; got {shown(limits)}"
                )

    def schedule(self, config: Config) -> Any:
        self.check_config(config)
        return self.replay(config["sketch"], config["decisions"], config.get("parallel"))

    def replay(self, sketch_index: int, decisions: list[Any], parallel: list[int] | None = None) -> Any:
        from tvm.s_tir import Schedule

        sketch = self.sketches[sketch_index]
        trace = sketch.trace_with(parallel)
        order = iter(decisions)  # the provider sees the sampling instructions in program order

        def provide(inst: Any, _inputs: Any, _attrs: Any, decision: Any) -> Any:
            if inst.kind.name.startswith("Sample"):
                value = next(order)
                return decision if value is None else value
            return decision

        sch = Schedule(self.mod)
        try:
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provide)
            sch.enter_postproc()
            for postproc in self.postprocs:
                if not postproc.apply(sch):
                    raise InvalidSchedule(f"postprocessor {_postproc_name(postproc)} rejected the schedule")
        except InvalidSchedule:
            raise
        except Exception as exc:  # noqa: BLE001 - a postprocessor or trace replay failing in any way: an invalid schedule
            raise invalid_schedule(exc) from None
        return sch

    def ir_module(self) -> Any:
        return self.mod

    def design_space_generator(self) -> Any:
        return self.space_generator

    def decode(self, trace: Any, mod: Any = None) -> Config | None:
        """The config of a schedule MetaSchedule proposed (its sampling decisions), or None if no
        sketch fits. MetaSchedule simplifies the traces it evolves, so with `mod` (the proposed
        schedule's IR) the sketch is the one whose replay gives exactly that IR."""
        import tvm_ffi

        insts = [i for i in trace.insts if i.kind.name.startswith("Sample")]
        decisions = [plain_decision(trace.get_decision(i)) for i in insts]
        kinds = [i.kind.name for i in insts]
        signature = trace_signature(trace)
        parallel = parallel_limits(trace)
        fits: list[Config] = []
        for index, sketch in enumerate(self.sketches):
            if [i.kind.name for i in sketch.insts] != kinds:
                continue
            config: Config = {"sketch": index, "decisions": decisions}
            if parallel != sketch.base_parallel:
                config["parallel"] = parallel
            try:
                self.check_config(config)
            except SpaceError:
                continue
            fits.append(config)
        for config in fits:
            if mod is None:
                if self.sketches[config["sketch"]].signature == signature:
                    return config
                continue
            try:
                if tvm_ffi.structural_equal(self.schedule(config).mod, mod):
                    return config
            except InvalidSchedule:
                continue
        return None

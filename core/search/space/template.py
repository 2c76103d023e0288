"""The template space: AutoTVM-style knobs over the workload's main reduction block, held as data.

A template is JSON the editor can change: each knob has a name, a type and its candidate values.

- ``split`` knobs tile one loop axis. A candidate lists the inner factors (``parts - 1`` of them,
  innermost last); the outermost factor is whatever is left of the extent. On the CPU every axis
  splits in two (outer, inner); on CUDA spatial axes split in three (block, thread, inner).
- ``order`` picks where the reduction loops go relative to the spatial inner loops.
- ``unroll`` is the auto-unroll step (``pragma_auto_unroll_max_step``).
- ``vectorize`` and ``parallel`` (CPU), ``shared`` (CUDA: stage inputs in shared memory with a
  cooperative fetch) and ``local`` (CUDA: accumulate in registers) are on/off knobs.
- ``tensor_core``, ``wmma_i``, ``wmma_j`` and ``wmma_k`` (CUDA, a float16 matrix multiply on sm_70 or
  later): the kernel on WMMA tensor-core fragments and its warp and fragment tiles
  (tunelab.core.search.space.wmma).

A config maps each knob name to one of its candidates, e.g.
``{"tile_i": [8], "tile_j": [16], "tile_k": [4], "order": "ro,ri,si", "unroll": 64,
"vectorize": true, "parallel": true}``.

Every split is recorded through ``sample_perfect_tile`` and the unroll through
``sample_categorical`` (with the decision fixed), so the schedule's trace replays exactly and
MetaSchedule's evolutionary search can mutate the same decisions.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError, shown
from tunelab.core.records import Config
from tunelab.core.search.space.scheduled import ScheduledSpace

# The knobs and the schedule building live in template_knobs and template_schedule; their names stay importable.
from tunelab.core.search.space.template_knobs import Axis, _default_knobs, check_template
from tunelab.core.search.space.template_schedule import apply_template, apply_template_to
from tunelab.core.search.space.tvm_context import InvalidSchedule, block_axes, find_main_block
from tunelab.core.search.space.wmma import KNOB_NAMES as WMMA_KNOBS
from tunelab.core.search.space.wmma import inert_knobs, wmma_axes, wmma_knobs

__all__ = ["Axis", "TemplateSpace", "apply_template", "apply_template_to", "check_template"]

SKETCH_ANNOTATION = "tunelab.sketch"


class TemplateSpace(ScheduledSpace):
    kind = "template"

    def _derive(self, data: dict[str, Any] | None) -> None:
        """The main block's axes and the checked knobs (``data``; None: the defaults for those axes)."""
        target = self.target
        self.prim_func = self.workload.prim_func(self.shape, self.dtype)
        self.block_name = find_main_block(self.prim_func, getattr(self.workload, "main_block", None))
        self.axes = [Axis(n, e, k) for n, e, k in block_axes(self.prim_func, self.block_name)]
        self.wmma = wmma_axes(self.axes, self.dtype, target)  # None: no tensor-core kernel for this problem
        if data is None:
            data = self._as_json(
                _default_knobs(self.axes, target.kind) + (wmma_knobs(self.wmma) if self.wmma else [])
            )
        self.knobs: list[dict[str, Any]] = check_template(data, self.axes, target.kind, self.wmma)
        self._by_name = {k["name"]: k for k in self.knobs}

    # ---- data -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return self._as_json([dict(k) for k in self.knobs])

    def _as_json(self, knobs: list[dict[str, Any]]) -> dict[str, Any]:
        """The template as data: its block, that block's axes and these knobs."""
        return {
            "kind": "template",
            "target_kind": self.target.kind,
            "block": self.block_name,
            "axes": [a.__dict__ for a in self.axes],
            "knobs": knobs,
        }

    @property
    def size(self) -> int:
        return math.prod(len(k["candidates"]) for k in self.knobs)

    def point(self, index: int) -> Config:
        self.check_index(index)
        config: Config = {}
        for knob in reversed(self.knobs):  # last knob varies fastest
            index, pos = divmod(index, len(knob["candidates"]))
            config[knob["name"]] = knob["candidates"][pos]
        return {k["name"]: config[k["name"]] for k in self.knobs}

    def sample(self, rng: np.random.Generator) -> Config:
        return {k["name"]: k["candidates"][int(rng.integers(len(k["candidates"])))] for k in self.knobs}

    def mutate(self, config: Config, rng: np.random.Generator) -> Config:
        mutable = [k for k in self.knobs if len(k["candidates"]) > 1]
        if not mutable:
            return dict(config)
        knob = mutable[int(rng.integers(len(mutable)))]
        cands = knob["candidates"]
        current = cands.index(config[knob["name"]]) if config[knob["name"]] in cands else 0
        # Neighbouring candidates first (tiles are ordered): a local step, as AutoTVM's SA walk.
        step = int(rng.choice([-2, -1, 1, 2]))
        new = min(max(current + step, 0), len(cands) - 1)
        if new == current:
            new = (current + 1) % len(cands)
        return {**config, knob["name"]: cands[new]}

    def crossover(self, a: Config, b: Config, rng: np.random.Generator) -> Config:
        return {k["name"]: (a if rng.random() < 0.5 else b)[k["name"]] for k in self.knobs}

    def key(self, config: Config) -> str:
        """The config's identity: knobs its kernel does not use (the plain kernel's with ``tensor_core`` on,
        the ``wmma_*`` with it off) count as their first candidate, so two configs of one kernel share a key."""
        inert = inert_knobs(config, list(self._by_name))
        if not inert:
            return super().key(config)
        return super().key({**config, **{n: self._by_name[n]["candidates"][0] for n in inert}})

    def knob_vector(self, config: Config) -> np.ndarray:
        values: list[float] = []
        for knob in self.knobs:
            value = config[knob["name"]]
            if knob["type"] == "split":
                values.extend(math.log2(f) for f in value)
            elif knob["type"] == "order":
                values.append(float(knob["candidates"].index(value)))
            else:
                values.append(float(value))
        return np.asarray(values, dtype=np.float64)

    def check_config(self, config: Config) -> None:
        if not isinstance(config, dict):
            raise SpaceError("a config must be a JSON object of knob values")
        unknown = set(config) - set(self._by_name)
        if unknown:
            raise SpaceError(
                f"unknown knob(s) {sorted(unknown)}; knobs are {[k['name'] for k in self.knobs]}"
            )
        for knob in self.knobs:
            name = knob["name"]
            if name not in config:
                raise SpaceError(f"config has no value for knob {name!r}")
            if config[name] not in knob["candidates"]:
                raise SpaceError(f"knob {name!r}: {shown(config[name])} is not one of its candidates")

    # ---- TVM --------------------------------------------------------------------------------
    def schedule(self, config: Config) -> Any:
        self.check_config(config)
        sch = apply_template(self.prim_func, self.block_name, self.axes, config, self.target, self.dtype)
        if self.target.kind == "cuda" and not self._gpu_verifier().apply(sch):
            # tvm.compile accepts e.g. 4096 threads per block; the GPU would not (TVM_NOTES 3).
            raise InvalidSchedule(
                "VerifyGPUCode: the kernel exceeds the GPU's thread or shared-memory limits"
            )
        return sch

    def _gpu_verifier(self) -> Any:
        if getattr(self, "_verifier", None) is None:
            import tvm
            from tvm.s_tir import meta_schedule as ms

            from tunelab.core.search.space.tvm_context import light_tune_context

            verifier = ms.postproc.VerifyGPUCode()
            ctx = light_tune_context(tvm.IRModule({"main": self.prim_func}), self.target.tvm_target())
            verifier._initialize_with_tune_context(ctx)
            self._verifier = verifier
        return self._verifier

    # ---- MetaSchedule's evolutionary search over this template ------------------------------------
    def static_combos(self) -> list[Config]:
        """Values of the knobs MetaSchedule cannot mutate (they are Python branches): one sketch each."""
        static = [k for k in self.knobs if k["type"] != "split" and k["name"] != "unroll"]
        combos: list[Config] = []
        for values in itertools.product(*[k["candidates"] for k in static]):
            combo = dict(zip([k["name"] for k in static], values, strict=True))
            # knobs the combination's kernel does not use: one sketch, not one per unused value
            combo.update({n: self._by_name[n]["candidates"][0] for n in inert_knobs(combo, list(combo))})
            if combo not in combos:
                combos.append(combo)
        return combos

    def ir_module(self) -> Any:
        import tvm

        return tvm.IRModule({"main": self.prim_func})

    def design_space_generator(self) -> Any:
        """The template as MetaSchedule sees it: a ScheduleFn with one sketch per static combination, whose
        tiles and unroll MetaSchedule's mutators change; only the checks a built kernel needs as postprocs."""
        from tvm.s_tir import meta_schedule as ms

        from tunelab.core.search.space.auto_rules import default_postprocs

        postprocs = [
            p
            for p in default_postprocs(self.target.kind)
            if type(p).__name__ in ("VerifyGPUCode", "DisallowDynamicLoop")
        ]
        return ms.space_generator.ScheduleFn(
            self.sketch_fn(),
            sch_rules=[],
            postprocs=postprocs,
            mutator_probs={ms.mutator.MutateTileSize(): 0.9, ms.mutator.MutateUnroll(): 0.1},
        )

    def sketch_fn(self) -> Any:
        """A ScheduleFn body returning one sketch per static combination, tiles and unroll sampled."""
        combos = self.static_combos()

        def make_sketches(sch: Any) -> list[Any]:
            sketches = []
            for index, combo in enumerate(combos):
                s = sch.copy()
                try:
                    apply_template_to(
                        s, self.block_name, self.axes, combo, self.target, self._by_name, self.dtype
                    )
                except Exception:  # noqa: BLE001 - an illegal static combination has no sketch
                    continue
                s.annotate(s.get_sblock("root"), SKETCH_ANNOTATION, index)
                sketches.append(s)
            return sketches

        return make_sketches

    def decode(self, trace: Any, mod: Any = None) -> Config | None:
        """The config of a schedule the evolutionary search proposed, or None when it left the space."""
        combos = self.static_combos()
        tiles, unroll_index, sketch = [], None, None
        for inst in trace.insts:
            kind = inst.kind.name
            if kind == "SamplePerfectTile":
                tiles.append([int(f) for f in trace.get_decision(inst)])
            elif kind == "SampleCategorical":
                unroll_index = int(trace.get_decision(inst))
            elif kind == "Annotate" and str(inst.attrs[0]) == SKETCH_ANNOTATION:
                sketch = int(inst.inputs[1])
        if sketch is None or unroll_index is None or sketch >= len(combos):
            return None
        config: Config = {}
        if combos[sketch].get("tensor_core"):  # its tiles are the wmma knobs'; the plain tiles are not used
            if len(tiles) != len(WMMA_KNOBS) - 1:
                return None
            for name, factors in zip(WMMA_KNOBS[1:], tiles, strict=True):
                config[name] = factors[1:]
            for axis in self.axes:
                config[f"tile_{axis.name}"] = self._by_name[f"tile_{axis.name}"]["candidates"][0]
        else:
            if len(tiles) != len(self.axes):
                return None
            for axis, factors in zip(self.axes, tiles, strict=True):
                config[f"tile_{axis.name}"] = factors[1:]
            for name in WMMA_KNOBS[1:]:
                if name in self._by_name:
                    config[name] = self._by_name[name]["candidates"][0]
        config.update(combos[sketch])
        config["unroll"] = self._by_name["unroll"]["candidates"][unroll_index]
        config = {k["name"]: config[k["name"]] for k in self.knobs}
        try:
            self.check_config(config)
        except SpaceError:
            return None
        return config

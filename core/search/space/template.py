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
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.core.errors import SpaceError, shown
from tunelab.core.records import Config
from tunelab.core.search.space.base import SearchSpace, divisors
from tunelab.core.search.space.checks import entry_list, is_int_in
from tunelab.core.search.space.tvm_context import (
    InvalidSchedule,
    block_axes,
    find_main_block,
    schedule_features,
)
from tunelab.core.search.space.wmma import KNOB_NAMES as WMMA_KNOBS
from tunelab.core.search.space.wmma import apply_wmma, inert_knobs, wmma_axes, wmma_knobs
from tunelab.core.target.info import TargetInfo

# Reduction inner loops never go outside their outer loops (that only re-walks memory).
ORDERS_CPU: tuple[str, ...] = ("ro,si,ri", "ro,ri,si", "si,ro,ri")
ORDERS_CUDA: tuple[str, ...] = ("ro,ri,si", "ro,si,ri")
UNROLL_STEPS = (0, 16, 64, 512)
CPU_MAX_INNER = 64
CUDA_MAX_THREAD = 64
CUDA_MAX_INNER = 8
SPLIT_LIMIT = 4096
SKETCH_ANNOTATION = "tunelab.sketch"  # candidates beyond this per knob make a space nobody can edit


@dataclass(frozen=True)
class Axis:
    name: str
    extent: int
    kind: str  # "spatial" | "reduce"


def _default_knobs(axes: list[Axis], target_kind: str) -> list[dict[str, Any]]:
    knobs: list[dict[str, Any]] = []
    for axis in axes:
        if target_kind == "cuda" and axis.kind == "spatial":
            cands = [
                [t, i]
                for t in divisors(axis.extent)
                if t <= CUDA_MAX_THREAD
                for i in divisors(axis.extent // t)
                if i <= CUDA_MAX_INNER
            ]
            knobs.append(
                {
                    "name": f"tile_{axis.name}",
                    "type": "split",
                    "axis": axis.name,
                    "parts": 3,
                    "candidates": cands,
                }
            )
        else:
            limit = CPU_MAX_INNER if target_kind == "llvm" else CUDA_MAX_INNER * 4
            cands = [[d] for d in divisors(axis.extent) if d <= limit]
            knobs.append(
                {
                    "name": f"tile_{axis.name}",
                    "type": "split",
                    "axis": axis.name,
                    "parts": 2,
                    "candidates": cands,
                }
            )
    orders = ORDERS_CPU if target_kind == "llvm" else ORDERS_CUDA
    if not any(axis.kind == "reduce" for axis in axes):
        orders = ("ro,ri,si",)  # nothing to reorder (an elementwise compute): spatial inner loops last
    knobs.append({"name": "order", "type": "order", "candidates": list(orders)})
    knobs.append({"name": "unroll", "type": "choice", "candidates": list(UNROLL_STEPS)})
    if target_kind == "llvm":
        knobs.append({"name": "vectorize", "type": "choice", "candidates": [True, False]})
        knobs.append({"name": "parallel", "type": "choice", "candidates": [True, False]})
    else:
        knobs.append({"name": "shared", "type": "choice", "candidates": [True, False]})
        knobs.append({"name": "local", "type": "choice", "candidates": [True, False]})
    return knobs


class TemplateSpace(SearchSpace):
    kind = "template"

    def __init__(
        self,
        workload: Any,
        shape: dict[str, int],
        dtype: str,
        target: TargetInfo,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.workload = workload
        self.shape = dict(shape)
        self.dtype = dtype
        self.target = target
        self.prim_func = workload.prim_func(shape, dtype)
        self.block_name = find_main_block(self.prim_func, getattr(workload, "main_block", None))
        self.axes = [Axis(n, e, k) for n, e, k in block_axes(self.prim_func, self.block_name)]
        self.wmma = wmma_axes(self.axes, dtype, target)  # None: no tensor-core kernel for this problem
        if data is None:
            data = {
                "kind": "template",
                "target_kind": target.kind,
                "block": self.block_name,
                "axes": [a.__dict__ for a in self.axes],
                "knobs": _default_knobs(self.axes, target.kind)
                + (wmma_knobs(self.wmma) if self.wmma else []),
            }
        self.knobs: list[dict[str, Any]] = check_template(data, self.axes, target.kind, self.wmma)
        self._by_name = {k["name"]: k for k in self.knobs}
        self._features_cache: dict[str, np.ndarray] = {}

    # ---- data -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "template",
            "target_kind": self.target.kind,
            "block": self.block_name,
            "axes": [a.__dict__ for a in self.axes],
            "knobs": [dict(k) for k in self.knobs],
        }

    @property
    def size(self) -> int:
        return math.prod(len(k["candidates"]) for k in self.knobs)

    def point(self, index: int) -> Config:
        if not 0 <= index < self.size:
            raise SpaceError(f"grid index {index} is outside the space (size {self.size})")
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

    def features(self, configs: list[Config]) -> np.ndarray:
        rows = []
        for config in configs:
            key = self.key(config)
            if key not in self._features_cache:
                try:
                    sched = self.schedule(config)
                    ir = schedule_features(sched, self.target)
                except InvalidSchedule:
                    ir = np.zeros(328)
                self._features_cache[key] = np.concatenate([ir, self.knob_vector(config)])
            rows.append(self._features_cache[key])
        return np.stack(rows) if rows else np.zeros((0, 0))

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

        from tunelab.core.search.space.auto import default_postprocs

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


def check_template(
    data: dict[str, Any], axes: list[Axis], target_kind: str, wmma: tuple[Axis, Axis, Axis] | None = None
) -> list[dict[str, Any]]:
    """Check an edited template against the axes; return its knobs or raise SpaceError with the reason.
    ``wmma``: the (i, j, k) axes a tensor-core kernel fits (tunelab.core.search.space.wmma.wmma_axes), or
    None, when the template may not have the tensor-core knobs."""
    knobs = entry_list(data, "knobs", "a template space")
    by_axis = {a.name: a for a in axes}
    names = [k["name"] for k in knobs if isinstance(k, dict) and isinstance(k.get("name"), str)]
    if len(names) != len(knobs):
        raise SpaceError("every knob must be a JSON object with a name (a string)")
    required = {f"tile_{a.name}" for a in axes} | {"order", "unroll"}
    required |= {"vectorize", "parallel"} if target_kind == "llvm" else {"shared", "local"}
    if set(WMMA_KNOBS) & set(names):
        if wmma is None:
            raise SpaceError(
                "the tensor-core knobs (tensor_core, wmma_i, wmma_j, wmma_k) need a float16 matrix multiply "
                "whose i, j and k are multiples of 16, on a CUDA GPU of sm_70 or later"
            )
        required |= set(WMMA_KNOBS)
    if set(names) != required or len(set(names)) != len(names):
        missing, extra = sorted(required - set(names)), sorted(set(names) - required)
        raise SpaceError(
            f"template knobs must be exactly {sorted(required)} (missing {missing}, unexpected {shown(extra, 120)})"
        )
    cleaned = []
    wmma_axis = dict(zip(WMMA_KNOBS[1:], wmma or (), strict=False))
    for knob in knobs:
        name, cands = knob["name"], knob.get("candidates")
        if not isinstance(cands, list) or not cands:
            raise SpaceError(f"knob {name!r} needs a non-empty list of candidates")
        if len(cands) > SPLIT_LIMIT:
            raise SpaceError(f"knob {name!r} has {len(cands)} candidates; at most {SPLIT_LIMIT} are allowed")
        if any(cands.count(c) > 1 for c in cands):
            raise SpaceError(f"knob {name!r} lists a candidate twice")
        if name in wmma_axis:
            cleaned.append(_check_wmma_knob(name, cands, wmma_axis[name]))
        elif name.startswith("tile_"):
            axis = by_axis[name[5:]]
            parts = 3 if (target_kind == "cuda" and axis.kind == "spatial") else 2
            for cand in cands:
                if (
                    not isinstance(cand, list)
                    or len(cand) != parts - 1
                    or not all(is_int_in(f, 1) for f in cand)
                ):
                    raise SpaceError(
                        f"knob {name!r}: candidate {shown(cand)} must be a list of {parts - 1} "
                        f"positive integer factor(s)"
                    )
                if axis.extent % math.prod(cand) != 0:
                    raise SpaceError(
                        f"knob {name!r}: factors {shown(cand)} do not divide axis {axis.name} of extent {axis.extent}"
                    )
            cleaned.append(
                {"name": name, "type": "split", "axis": axis.name, "parts": parts, "candidates": cands}
            )
        elif name == "order":
            allowed = ORDERS_CPU if target_kind == "llvm" else ORDERS_CUDA
            bad = [c for c in cands if c not in allowed]
            if bad:
                raise SpaceError(
                    f"knob 'order': {shown(bad[0])} is not a loop order; choose from {list(allowed)}"
                )
            cleaned.append({"name": name, "type": "order", "candidates": cands})
        elif name == "unroll":
            bad = [c for c in cands if not is_int_in(c, 0, 4096)]
            if bad:
                raise SpaceError(f"knob 'unroll': {shown(bad[0])} is not an unroll step between 0 and 4096")
            cleaned.append({"name": name, "type": "choice", "candidates": cands})
        else:
            bad = [c for c in cands if not isinstance(c, bool)]
            if bad:
                raise SpaceError(f"knob {name!r}: {shown(bad[0])} is not true or false")
            cleaned.append({"name": name, "type": "choice", "candidates": cands})
    return cleaned


def _check_wmma_knob(name: str, cands: list[Any], axis: Axis) -> dict[str, Any]:
    """A wmma_i / wmma_j ([warps, fragments]) or wmma_k ([fragments]) knob, in 16-element fragments."""
    from tunelab.core.search.space.wmma import FRAGMENT

    parts = 2 if name == "wmma_k" else 3
    fragments = axis.extent // FRAGMENT
    for cand in cands:
        if not isinstance(cand, list) or len(cand) != parts - 1 or not all(is_int_in(f, 1) for f in cand):
            raise SpaceError(
                f"knob {name!r}: candidate {shown(cand)} must be a list of {parts - 1} positive integer factor(s)"
            )
        if fragments % math.prod(cand) != 0:
            raise SpaceError(
                f"knob {name!r}: factors {shown(cand)} do not divide the {fragments} fragments of 16 along "
                f"axis {axis.name} (extent {axis.extent})"
            )
    return {
        "name": name,
        "type": "split",
        "axis": axis.name,
        "parts": parts,
        "fragment": FRAGMENT,
        "candidates": cands,
    }


def _split(
    sch: Any, loop: Any, extent: int, inner: list[int] | None, knob: dict[str, Any] | None = None
) -> list[Any]:
    """Split through sample_perfect_tile: with `inner` the decision is fixed; without it (the
    evolutionary search's sketches) MetaSchedule samples it, bounded by the knob's candidates."""
    if inner is None:
        assert knob is not None
        max_inner = max(c[-1] for c in knob["candidates"])
        decision = sch.sample_perfect_tile(loop, n=knob["parts"], max_innermost_factor=max_inner)
    else:
        factors = [extent // math.prod(inner), *inner]
        decision = sch.sample_perfect_tile(
            loop, n=len(factors), max_innermost_factor=max(factors[-1], 1), decision=factors
        )
    return list(sch.split(loop, decision))


def apply_template(
    prim_func: Any, block_name: str, axes: list[Axis], config: Config, target: TargetInfo, dtype: str = ""
) -> Any:
    """Build the schedule for one config; InvalidSchedule when TVM rejects the combination."""
    from tvm.s_tir import Schedule

    try:
        sch = Schedule(prim_func)
        apply_template_to(sch, block_name, axes, config, target, dtype=dtype)
        return sch
    except InvalidSchedule:
        raise
    except Exception as exc:  # noqa: BLE001 - TVM's ScheduleError: this knob combination is not a legal schedule
        raise InvalidSchedule(str(exc).strip().splitlines()[-1][:300]) from None


def apply_template_to(
    sch: Any,
    block_name: str,
    axes: list[Axis],
    config: Config,
    target: TargetInfo,
    knobs: dict[str, dict[str, Any]] | None = None,
    dtype: str = "",
) -> None:
    """Apply a config to `sch`. With `knobs`, tile and unroll values missing from `config` are
    left for MetaSchedule to sample (the evolutionary search's sketches)."""
    main = sch.get_sblock(block_name)
    epilogue = _inline_others(sch, block_name)
    if config.get("tensor_core"):
        if epilogue:
            raise InvalidSchedule(
                "the tensor-core kernel writes its fragments straight to the output: no epilogue"
            )
        grid = apply_wmma(sch, main, axes, config, dtype, knobs, _split)
        _annotate_unroll(sch, grid, config, knobs)
        return
    loops = sch.get_loops(main)
    outer_s, inner_s, outer_r, inner_r, thread_s = [], [], [], [], []
    for axis, loop in zip(axes, loops, strict=True):
        name = f"tile_{axis.name}"
        inner = list(config[name]) if name in config else None
        parts = _split(sch, loop, axis.extent, inner, (knobs or {}).get(name))
        if axis.kind == "reduce":
            outer_r.append(parts[0])
            inner_r.append(parts[1])
        elif len(parts) == 3:
            outer_s.append(parts[0])
            thread_s.append(parts[1])
            inner_s.append(parts[2])
        else:
            outer_s.append(parts[0])
            inner_s.append(parts[1])
    groups = {"ro": outer_r, "ri": inner_r, "si": inner_s}
    ordered = [groups[g] for g in config["order"].split(",")]
    if target.kind == "cuda":
        _cuda(sch, main, epilogue, outer_s, thread_s, ordered, outer_r, config)
    else:
        _cpu(sch, main, epilogue, outer_s, ordered, config)
    _annotate_unroll(sch, sch.get_loops(main)[0], config, knobs)


def _annotate_unroll(sch: Any, anchor: Any, config: Config, knobs: dict[str, dict[str, Any]] | None) -> None:
    """The auto-unroll step on the kernel's outermost loop, recorded through sample_categorical."""
    steps = list((knobs or {}).get("unroll", {}).get("candidates", UNROLL_STEPS))
    if "unroll" not in config:
        step = sch.sample_categorical(candidates=steps, probs=[1 / len(steps)] * len(steps))
    elif config["unroll"] in steps:
        step = sch.sample_categorical(
            candidates=steps, probs=[1 / len(steps)] * len(steps), decision=steps.index(config["unroll"])
        )
    else:
        step = config["unroll"]
    sch.annotate(anchor, "pragma_auto_unroll_max_step", step)
    sch.annotate(anchor, "pragma_unroll_explicit", 1)


def _inline_others(sch: Any, block_name: str) -> list[Any]:
    """Inline every block but the main one (padding, bias add); return the output epilogue blocks left."""
    root = sch.get_sblock("root")
    left = []
    for block in sch.get_child_blocks(root):
        if sch.get(block).name_hint == block_name:
            continue
        try:
            sch.compute_inline(block)
        except Exception:  # noqa: BLE001 - an output block cannot be inlined into its consumers: it's the epilogue
            left.append(block)
    return left


def _cpu(
    sch: Any, main: Any, epilogue: list[Any], outer_s: list[Any], ordered: list[list[Any]], config: Config
) -> None:
    sch.reorder(*outer_s, *itertools.chain.from_iterable(ordered))
    if config["parallel"]:
        anchor = sch.fuse(*outer_s) if len(outer_s) > 1 else outer_s[0]
        sch.parallel(anchor)
    else:
        anchor = outer_s[-1]
    for block in epilogue:
        sch.reverse_compute_at(block, anchor)
    last_group = config["order"].split(",")[-1]
    if config["vectorize"] and last_group == "si" and ordered[-1]:
        sch.vectorize(ordered[-1][-1])
    _decompose(sch, main, ordered, config)


def _decompose(sch: Any, main: Any, ordered: list[list[Any]], config: Config) -> None:
    """Split the reduction's init out above its first reduction loop; an elementwise block has none."""
    reduce_loops = ordered_group(ordered, config, ("ro", "ri"))
    if reduce_loops:
        sch.decompose_reduction(main, reduce_loops[0])


def ordered_group(ordered: list[list[Any]], config: Config, names: tuple[str, ...]) -> list[Any]:
    groups = config["order"].split(",")
    return [loop for g, loops in zip(groups, ordered, strict=True) if g in names for loop in loops]


def _cuda(
    sch: Any,
    main: Any,
    epilogue: list[Any],
    outer_s: list[Any],
    thread_s: list[Any],
    ordered: list[list[Any]],
    outer_r: list[Any],
    config: Config,
) -> None:
    sch.reorder(*outer_s, *thread_s, *itertools.chain.from_iterable(ordered))
    bx = sch.fuse(*outer_s)
    tx = sch.fuse(*thread_s)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    n_threads = int(sch.get(tx).extent)
    if config["shared"] and outer_r:
        n_reads = len(sch.get(main).reads)
        for index in range(n_reads):
            staged = sch.cache_read(main, index, "shared")
            sch.compute_at(staged, outer_r[-1])
            anchor = sch.get(outer_r[-1])
            depth = 1 + next(d for d, loop in enumerate(sch.get_loops(main)) if sch.get(loop).same_as(anchor))
            copy_loops = sch.get_loops(staged)[depth:]
            fused = sch.fuse(*copy_loops)
            _, fetch = sch.split(fused, [None, n_threads])
            sch.bind(fetch, "threadIdx.x")
    # An epilogue (bias, ReLU) reading the result through global memory would need a global
    # scratch buffer, which CUDA kernels cannot allocate: with an epilogue the accumulator always
    # lives in registers and the epilogue is fused into the write-back.
    if config["local"] or epilogue:
        write_back = sch.cache_write(main, 0, "local")
        for block in epilogue:
            sch.reverse_compute_inline(block)
        sch.reverse_compute_at(write_back, tx)
    _decompose(sch, main, ordered, config)

"""Cost models against each other on the recorded exhaustive spaces (issue 13 part 5).

For each recorded space (tests/core/data/*_grid_llvm.json: real CPU measurements of every config) and
each registered cost model:

- ranking quality out of sample: fit on a random sample of ``TRAIN`` measured configs, predict every
  other config of the space, and score the prediction by Spearman's rank correlation and top-k recall
  (k = ``BATCH``: of the k configs the model ranks fastest, how many are among the k truly fastest),
  over ``SEEDS`` samples;
- the tuner it drives: the xgb tuner steered by that model, replayed on the space to ``BUDGET`` trials,
  its best-so-far curve scored as Willemsen et al. score tuners (mean P over the budget: 1 = the optimum
  at once, 0 = random search, calculated exactly), over the same seeds.

    QT_QPA_PLATFORM=offscreen python -m pytest tests/benchmarks/test_model_scores.py -q -s

It writes model-scores.json and model-scores.md into ``$TUNELAB_BENCH_OUT`` or
``<tmp>/tunelab-bench/model-scores``.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from recorded_spaces import load_recorded, recording_names
from test_tuner_scores import machine

from tunelab.core.search.costmodel import spearman, topk_recall
from tunelab.core.search.models import cost_model_names, make_cost_model
from tunelab.core.search.scoring import exhaustive_baseline, score_runs
from tunelab.core.search.tuners.registry import make_tuner
from tunelab.core.session.replay import ReplayRunner, replay_tune

SEEDS = 5
TRAIN = 32  # measured configs a model learns from before it ranks the rest
BATCH = 8
BUDGET = 64


def write_results(stem: str, doc: dict, lines: list[str]) -> Path:
    """``<stem>.json`` and ``<stem>.md`` (the table) into ``$TUNELAB_BENCH_OUT`` or
    ``<tmp>/tunelab-bench/model-scores``; the folder."""
    folder = Path(
        os.environ.get("TUNELAB_BENCH_OUT") or Path(tempfile.gettempdir()) / "tunelab-bench" / "model-scores"
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    (folder / f"{stem}.md").write_text("\n".join(lines) + "\n")
    return folder


def ranking(rec, name: str, X: np.ndarray, y: np.ndarray) -> dict[str, float | None]:
    rhos, recalls, fit_s = [], [], 0.0
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(y))
        train, rest = order[:TRAIN], order[TRAIN:]
        model = make_cost_model(name, seed=seed, space=rec.space)
        t0 = time.perf_counter()
        model.fit(X[train], y[train])
        fit_s += time.perf_counter() - t0
        pred = model.predict(X[rest])
        if pred is None:
            continue
        rhos.append(spearman(pred, y[rest]))
        recalls.append(topk_recall(pred, y[rest], BATCH))
    ok_rho = [r for r in rhos if r is not None]
    ok_recall = [r for r in recalls if r is not None]
    return {
        "spearman": float(np.mean(ok_rho)) if ok_rho else None,
        "spearman_std": float(np.std(ok_rho)) if ok_rho else None,
        "topk_recall": float(np.mean(ok_recall)) if ok_recall else None,
        "fit_s": round(fit_s / SEEDS, 4),
    }


def tuner_score(rec, name: str, baseline) -> dict[str, float]:
    runs = []
    for seed in range(SEEDS):
        tuner = make_tuner("xgb", rec.space, seed=seed, model=name, pool_size=64)
        try:
            history = replay_tune(tuner, ReplayRunner(rec.space, rec.table), BUDGET, batch=BATCH)
        finally:
            tuner.close()
        runs.append([o.latency_ms for o in history])
    score = score_runs(f"xgb[{name}]", runs, baseline, BUDGET)
    return {"mean": score.mean, "std": score.std}


def test_model_scores():
    started = time.perf_counter()
    doc: dict = {
        "machine": machine(),
        "seeds": SEEDS,
        "train": TRAIN,
        "k": BATCH,
        "budget": BUDGET,
        "spaces": {},
    }
    lines = [
        "| space | model | Spearman (out of sample) | top-8 recall | fit s | xgb tuner steered by it: mean P to 64 |",
        "|---|---|---|---|---|---|",
    ]
    for space_name in recording_names():
        rec = load_recorded(space_name)
        keys = [k for k, v in rec.table.items() if v is not None]
        configs = {rec.space.key(c): c for c in (rec.space.point(i) for i in range(rec.space.size))}
        X = np.asarray(rec.space.features([configs[k] for k in keys]), dtype=np.float64)
        y = np.array([rec.table[k] for k in keys], dtype=np.float64)
        baseline = exhaustive_baseline(list(rec.table.values()), BUDGET)
        doc["spaces"][space_name] = {"configs": len(rec.table), "measured": len(keys), "models": {}}
        for name in cost_model_names():
            rank = ranking(rec, name, X, y)
            steer = tuner_score(rec, name, baseline)
            doc["spaces"][space_name]["models"][name] = {**rank, "tuner": steer}
            rho = "–" if rank["spearman"] is None else f"{rank['spearman']:+.2f} ± {rank['spearman_std']:.2f}"
            recall = "–" if rank["topk_recall"] is None else f"{rank['topk_recall']:.2f}"
            lines.append(
                f"| {space_name} ({len(rec.table)} configs) | {name} | {rho} | {recall} | {rank['fit_s']:.3f} | "
                f"{steer['mean']:+.2f} ± {steer['std']:.2f} |"
            )
            print(lines[-1], flush=True)
    doc["date"] = datetime.date.today().isoformat()
    doc["seconds"] = round(time.perf_counter() - started, 1)
    folder = write_results("model-scores", doc, lines)
    print("\n" + "\n".join(lines) + f"\nwritten to {folder} in {doc['seconds']} s")
    assert all(m["spearman"] is not None for s in doc["spaces"].values() for m in s["models"].values())


REAL = (
    ("gemm", {"M": 256, "N": 256, "K": 256}),
    ("conv2d_nchw", {"N": 1, "C": 32, "H": 28, "W": 28, "K": 32, "R": 3, "S": 3, "stride": 1, "pad": 1, "dilation": 1}),
    ("gemm", {"M": 16, "N": 1024, "K": 1024}),  # a skinny shape
)  # fmt: skip


def test_models_on_real_sessions(tmp_path):
    """Three real sessions (random search, so that no model steered what was measured), each model refit
    on them in time order and judged on the rounds it did not see (tunelab models)."""
    from tunelab.core.records import MeasureOptions, SessionSpec
    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store
    from tunelab.core.usecases.model_compare import compare_models

    store = Store(tmp_path / "real.sqlite")
    lines = [
        "| session | model | Spearman (out of sample) | top-k recall | bias (median trial) | rounds |",
        "|---|---|---|---|---|---|",
    ]
    doc = {}
    for workload, shape in REAL:
        spec = SessionSpec(
            workload=workload, shape=shape, target="llvm", space_kind="template", tuner="random",
            trials=48, batch=BATCH, seed=0, measure=MeasureOptions(confirm_runs=0, cooldown_s=0.0),
        )  # fmt: skip
        session = create_session(store, spec)
        list(session.run())
        label = f"{workload} " + ",".join(f"{k}={v}" for k, v in shape.items() if k in "MNKCHW")
        for score in compare_models(store, [session.session_id]):
            doc.setdefault(label, {})[score.model] = {
                "spearman": score.spearman, "topk_recall": score.topk_recall, "bias": score.bias,
                "rounds": score.rounds,
            }  # fmt: skip
            lines.append(
                f"| {label} | {score.model} | {score.spearman:+.2f} | {score.topk_recall:.2f} | "
                f"{score.bias:+.0%} | {score.rounds} |"
            )
            print(lines[-1], flush=True)
    store.close()
    write_results("model-real", doc, lines)
    print("\n" + "\n".join(lines))
    assert all(len(models) == len(cost_model_names()) for models in doc.values())


STEER_SEEDS = (0, 1)


def _label(workload: str, shape: dict[str, int]) -> str:
    return f"{workload} " + ",".join(f"{k}={v}" for k, v in shape.items() if k in "MNKCHW")


def test_tuners_steered_by_each_model_on_real_sessions(tmp_path):
    """The xgb tuner steered by each model, at one budget, on the three real problems: each session scored
    (mean P over the budget, Willemsen et al.) against a random-search session of the same seed measured
    in the same run, as the Compare view scores sessions of one workload."""
    from tunelab.core.records import MeasureOptions, SessionSpec
    from tunelab.core.session.loop import create_session
    from tunelab.core.store import Store
    from tunelab.core.usecases.compare_scores import compare_scores

    budget = int(os.environ.get("TUNELAB_STEER_TRIALS", "48"))
    seeds = tuple(
        int(s) for s in os.environ.get("TUNELAB_STEER_SEEDS", ",".join(map(str, STEER_SEEDS))).split(",")
    )
    problems = REAL[: int(os.environ.get("TUNELAB_STEER_PROBLEMS", str(len(REAL))))]
    store = Store(tmp_path / "steered.sqlite")
    started = time.perf_counter()
    doc: dict = {"machine": machine(), "budget": budget, "batch": BATCH, "seeds": list(seeds), "problems": {}}
    lines = [
        f"| problem | model steering xgb | mean P to {budget} (per seed) | best ms (median over seeds) | wall s |",
        "|---|---|---|---|---|",
    ]

    def run(workload, shape, tuner, options, seed):
        spec = SessionSpec(
            workload=workload, shape=shape, target="llvm", space_kind="template", tuner=tuner,
            tuner_options=options, trials=budget, batch=BATCH, seed=seed,
            measure=MeasureOptions(confirm_runs=0, cooldown_s=0.0),
        )  # fmt: skip
        t0 = time.perf_counter()
        session = create_session(store, spec)
        list(session.run())
        return store.session(session.session_id), time.perf_counter() - t0

    for workload, shape in problems:
        label = _label(workload, shape)
        per_model: dict[str, dict] = {
            name: {"scores": [], "best_ms": [], "wall_s": []} for name in cost_model_names()
        }
        for seed in seeds:
            # Interleaved seed by seed, so that a change of load falls on every model alike.
            reference, _ = run(workload, shape, "random", {}, seed)
            steered = {}
            for name in cost_model_names():
                steered[name], wall = run(workload, shape, "xgb", {"model": name}, seed)
                per_model[name]["wall_s"].append(round(wall, 1))
                best = min(
                    (t.latency_ms for t in store.trials(steered[name].id) if t.ok and t.latency_ms),
                    default=None,
                )
                per_model[name]["best_ms"].append(best)
            scored = compare_scores(store, [reference, *steered.values()])
            assert scored.reason is None, scored.reason
            for name, score in zip(steered, scored.scores[1:], strict=True):
                per_model[name]["scores"].append(score)
        doc["problems"][label] = per_model
        for name, row in per_model.items():
            ok = [s for s in row["scores"] if s is not None]
            bests = [b for b in row["best_ms"] if b is not None]
            mean = f"{np.mean(ok):+.2f}" if ok else "–"
            seeds_text = ", ".join("–" if s is None else f"{s:+.2f}" for s in row["scores"])
            best = f"{np.median(bests):.3f}" if bests else "–"
            lines.append(f"| {label} | {name} | {mean} ({seeds_text}) | {best} | {sum(row['wall_s']):.0f} |")
            print(lines[-1], flush=True)
    store.close()
    doc["date"] = datetime.date.today().isoformat()
    doc["seconds"] = round(time.perf_counter() - started, 1)
    folder = write_results("model-steered", doc, lines)
    print("\n" + "\n".join(lines) + f"\nwritten to {folder} in {doc['seconds']} s")
    assert all(len(r["scores"]) == len(seeds) for p in doc["problems"].values() for r in p.values())

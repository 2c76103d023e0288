"""BENCHMARKS.md's kernel tables, rendered from the suite's JSON (never typed by hand).

Each section sits between ``<!-- suite:NAME:begin -->`` and ``<!-- suite:NAME:end -->`` in the
document; :func:`render_into` replaces what is between them and leaves the rest of the file alone.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

SECTIONS = ("quality", "structures", "vsraw", "overhead")
WALL_GOAL = 1.05  # tunelab's tuning wall time at most 1.05x raw tune_tir's


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _verdict(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "**missed**")


def _shape(case: dict[str, Any]) -> str:
    shape = case["shape"]
    if not shape:
        return f"{case['workload']} (default: ResNet 3x3, N=1, C=K=64, 56x56, pad 1)"
    if case["workload"] == "gemm":
        return f"GEMM {shape['M']}x{shape['N']}x{shape['K']}"
    return f"{case['workload']} " + ",".join(f"{k}={v}" for k, v in shape.items())


def _figure(doc_case: dict[str, Any], tool: str, seed: int, n: str) -> dict[str, Any] | None:
    return doc_case["remeasured"]["figures"].get(f"{tool}_s{seed}_{n}")


def _spread(fig: dict[str, Any]) -> float:
    """How far apart the rounds' medians lie, as a fraction of the figure: the noise of this run."""
    rounds = fig["round_medians_ms"]
    return (max(rounds) - min(rounds)) / fig["median_ms"] if rounds else 0.0


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(doc: dict[str, Any], columns: list[str], rows: list[str], note: str) -> str:
    """One tier's table: the run's header, the column heads, the rows, then what the figures mean."""
    return "\n".join([header(doc), "", _row(columns), "|" + "---|" * len(columns), *rows, "", note])


def header(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    load = "–".join(
        f"{x:.1f}" for x in (m["load_avg_start"][0], m.get("load_avg_end", [None])[0]) if x is not None
    )
    # cases rerun on their own (--case) keep the command that measured them
    commands = list(dict.fromkeys(c.get("command", doc["command"]) for c in doc.get("cases", []))) or [
        doc["command"]
    ]
    said = ", ".join(f"`{c}`" for c in commands)
    # cases re-measured from their stored traces later (--remeasure): what re-measured them, and when
    redone: dict[tuple[str, str], list[float]] = {}  # one command re-measures several cases: said once
    for r in (c["remeasure"] for c in doc.get("cases", []) if c.get("remeasure")):
        redone.setdefault((r["command"], r["date"]), []).extend(r["load_avg"])
    again = [
        f"`{command}` ({date}, load average {min(loads):.1f}–{max(loads):.1f})"
        for (command, date), loads in redone.items()
    ]
    return (
        f"*{doc['tier']} tier*, {said}, {doc['date']}: {m['cores']} cores, {m['cpu_model']} "
        f"({m['target']}), GPU: {m['gpu']}; TVM {m['tvm']}, Python {m['python']}; load average {load}; "
        f"the whole run took {doc.get('suite_wall_s', 0) / 60:.0f} min."
        + (f" Re-measured from the stored traces, nothing tuned again: {', '.join(again)}." if again else "")
    )


def differences(schedule: dict[str, Any], cores: int) -> str:
    """What a BLAS kernel does that this schedule does not (facts, not a measured cause)."""
    notes = []
    # a global read cache of an input at an outer tile loop is a packed panel (the auto space's pack_inputs)
    panels = [r for r in schedule.get("cache_reads", []) if r.endswith("(global)")]
    if not schedule.get("packed") and not panels:
        notes.append("no packing of the inputs into panels (BLAS packs A and B)")
    if not schedule.get("cache_writes"):
        notes.append("accumulates straight into C (no write cache)")
    par = schedule.get("parallel") or []
    if par and any(extent % cores for _, extent in par):
        notes.append(f"parallel extent {par[0][1]} does not divide over {cores} cores")
    if not schedule.get("vectorize"):
        notes.append("nothing vectorized")
    return "; ".join(notes) or "–"


def quality_table(doc: dict[str, Any]) -> str:
    columns = [
        "problem", "budget", "tunelab GFLOP/s", "× vendor", "goal", "spread", "vendor GFLOP/s",
        "best schedule (seed 0)", "differences from a BLAS kernel",
    ]  # fmt: skip
    rows = []
    vendors = []
    for c in doc["cases"]:
        case = c["case"]
        figs = c["remeasured"]["figures"]
        vendor = figs.get("vendor")
        vendors.append(c["remeasured"]["vendor"]["library"])
        tunelab_runs = [r for r in c["runs"] if r["tool"] == "tunelab"]
        for n in case["checkpoints"]:
            key = str(n)
            seeds = [_figure(c, "tunelab", r["seed"], key) for r in tunelab_runs]
            seeds = [f for f in seeds if f]
            gflops = _median([f["gflops"] for f in seeds])
            x_vendor = (
                _median([vendor["median_ms"] / f["median_ms"] for f in seeds]) if vendor and seeds else None
            )
            goal = case["goals"].get(key)
            first = next((r for r in tunelab_runs if key in r["checkpoints"]), None)
            sched = first["checkpoints"][key] if first else None
            wrong = [f for f in seeds if not f["correct"]]
            rows.append(
                _row(
                    [
                        _shape(case) + (f" ({len(seeds)} seeds, median)" if len(seeds) > 1 else ""),
                        str(n),
                        _num(gflops, 1) + (" (**wrong result**)" if wrong else ""),
                        _num(x_vendor),
                        f"≥ {goal:g}: {_verdict(x_vendor >= goal if x_vendor is not None else None)}"
                        if goal
                        else "–",
                        f"{100 * max(_spread(f) for f in seeds):.0f} %" if seeds else "–",
                        _num(vendor["gflops"], 1) if vendor else "–",
                        sched["description"] if sched else "–",
                        differences(sched["schedule"], doc["machine"]["cores"])
                        if sched and x_vendor is not None and x_vendor < 1
                        else "–",
                    ]
                )
            )
    note = (
        "Vendor: " + "; ".join(sorted({v for v in vendors if v})) + ". × vendor = vendor time / tunelab time "
        "(above 1: tunelab's kernel is faster). All kernels of a problem and the vendor were re-measured "
        "side by side in one fresh process, round by round; spread = how far the rounds' medians of "
        "tunelab's kernel lie apart, as a share of its figure."
    )
    return _table(doc, columns, rows, note)


def vsraw_table(doc: dict[str, Any]) -> str:
    columns = [
        "problem", "budget", "seeds", "tunelab ms", "tune_tir ms", "latency ratio (raw / tunelab)",
        "tunelab wall s", "tune_tir wall s", "wall ratio (tunelab / raw)", "goal",
    ]  # fmt: skip
    rows = []
    for c in doc["cases"]:
        case = c["case"]
        if not case["raw"]:
            continue
        for n in case["checkpoints"]:
            key = str(n)
            ours = [_figure(c, "tunelab", s, key) for s in case["seeds"]]
            raws = [_figure(c, "tune_tir", s, key) for s in case["seeds"]]
            ours_ms = _median([f["median_ms"] for f in ours if f])
            raw_ms = _median([f["median_ms"] for f in raws if f])
            ratio = raw_ms / ours_ms if ours_ms and raw_ms else None
            full = n == case["budget"]
            wall_ours = _median([r["wall_s"] for r in c["runs"] if r["tool"] == "tunelab"]) if full else None
            wall_raw = _median([r["wall_s"] for r in c["runs"] if r["tool"] == "tune_tir"]) if full else None
            wall_ratio = wall_ours / wall_raw if wall_ours and wall_raw else None
            met = None if ratio is None else ratio >= 1.0 and (wall_ratio is None or wall_ratio <= WALL_GOAL)
            rows.append(
                f"| {_shape(case)} | {n} | {len(case['seeds'])} | {_num(ours_ms, 3)} | {_num(raw_ms, 3)} | "
                f"{_num(ratio)} | {_num(wall_ours, 0)} | {_num(wall_raw, 0)} | {_num(wall_ratio)} | "
                f"{_verdict(met)} |"
            )
        row = equal_wall_row(c)
        if row:
            rows.append(row)
    note = (
        "Medians over the seeds; the latencies are the side-by-side re-measurement. The goal: latency ratio "
        f"≥ 1 (tunelab never slower) and wall ratio ≤ {WALL_GOAL} (wall time over the whole budget only: a "
        "checkpoint is a prefix of that run). *Equal wall time*: each tool's best among the trials it had "
        "measured when the faster of the two finished its budget (`tune_tir`'s trials stamped by a measure "
        "callback as each batch is committed; its wall time includes its import of the tensor intrinsics); "
        "goal there: tunelab's best faster (ratio > 1). With one seed a ratio is one draw of a search that "
        "varies by tens of percent between seeds."
    )
    return _table(doc, columns, rows, note)


def _equal_wall_pair(c: dict[str, Any], seed: int) -> tuple[float, int, dict | None, dict | None] | None:
    """(seconds, tune_tir's trials by then, tunelab's figure, tune_tir's figure) at one seed's equal wall time.

    The time is the shorter of the two runs' walls. tunelab's figure is its full-budget best when it
    finished first, or when its best trial was in hand by the time ``tune_tir`` finished; otherwise it
    was not built (None)."""
    runs = {r["tool"]: r for r in c["runs"] if r["seed"] == seed}
    ours, raw = runs.get("tunelab"), runs.get("tune_tir")
    if not ours or not raw or not raw.get("equal_wall"):
        return None
    seconds, done = raw["equal_wall"]["seconds"], raw["equal_wall"]["trials"]
    budget = str(c["case"]["budget"])
    best = ours["checkpoints"].get(budget)
    elapsed = ours.get("elapsed_s") or []
    in_time = ours["wall_s"] <= seconds or (
        best is not None and best["trial_index"] < len(elapsed) and elapsed[best["trial_index"]] <= seconds
    )
    ours_fig = _figure(c, "tunelab", seed, budget) if in_time else None
    return seconds, done, ours_fig, _figure(c, "tune_tir", seed, "wall")


def equal_wall_row(c: dict[str, Any]) -> str | None:
    """The vs-raw table's row at an equal wall time (None when the runs carry no time stamps)."""
    case = c["case"]
    pairs = [p for s in case["seeds"] if (p := _equal_wall_pair(c, s))]
    if not pairs:
        return None
    ours_ms = _median([p[2]["median_ms"] for p in pairs if p[2]])
    raw_ms = _median([p[3]["median_ms"] for p in pairs if p[3]])
    ratio = raw_ms / ours_ms if ours_ms and raw_ms else None
    per_seed = [p[3]["median_ms"] / p[2]["median_ms"] for p in pairs if p[2] and p[3]]
    seconds = _median([p[0] for p in pairs])
    trials = _median([float(p[1]) for p in pairs])
    faster = f"; faster in {sum(r > 1 for r in per_seed)} of {len(per_seed)} seeds" if per_seed else ""
    # a seed where tune_tir had measured nothing yet while tunelab had its kernel counts as faster
    unanswered = sum(1 for p in pairs if p[2] and p[1] == 0)
    if unanswered:
        faster += f"; in {unanswered} of {len(pairs)} seeds tune_tir had no trial yet"
    met = ratio > 1.0 if ratio is not None else (True if unanswered == len(pairs) else None)
    return (
        f"| {_shape(case)} | equal wall time: {_num(seconds, 0)} s (tune_tir {_num(trials, 0)} trials) | "
        f"{len(pairs)} | {_num(ours_ms, 3)} | {_num(raw_ms, 3)} | {_num(ratio)} | {_num(seconds, 0)} | "
        f"{_num(seconds, 0)} | 1.00 | {_verdict(met)}{faster} |"
    )


def overhead_table(doc: dict[str, Any]) -> str:
    columns = [
        "problem", "tool", "seed", "trials (ok)", "wall s", "building s", "running s", "rest s",
        "rest per trial ms", "measuring share",
    ]  # fmt: skip
    rows = []
    for c in doc["cases"]:
        for r in c["runs"]:
            rest = r["wall_s"] - r["build_s"] - r["run_s"]
            rows.append(
                f"| {_shape(c['case'])} | {r['tool']} | {r['seed']} | {r['n_trials']} ({r['n_ok']}) | "
                f"{r['wall_s']:.1f} | {r['build_s']:.1f} | {r['run_s']:.1f} | {rest:.1f} | "
                f"{1e3 * rest / max(r['n_trials'], 1):.0f} | {100 * (r['build_s'] + r['run_s']) / r['wall_s']:.0f} % |"
            )
    note = (
        "rest = wall - building - running: the search (tunelab: space, tuner, cost model; tune_tir: its "
        "evolutionary search and XGBoost updates), the store or database, telemetry and the loop. tunelab's "
        "building and running are the sums of its trials' `build_s` and `run_s`; tune_tir's come from "
        "MetaSchedule's Profiler (SendToBuilder; SendToRunner + JoinRunnerFutures). tune_tir's wall time "
        "includes its first TuneContext's import of the tensor intrinsics (about 11 s on an idle machine), "
        "which tunelab's spaces avoid."
    )
    return _table(doc, columns, rows, note)


def structures_table(doc: dict[str, Any]) -> str:
    """Each search structure a case switches on (a space-editor switch) against the default session."""
    columns = [
        "problem", "structure", "budget", "seeds", "default ms", "variant ms", "speed-up (default / variant)",
        "wall s (default, variant)",
    ]  # fmt: skip
    rows = []
    for c in doc["cases"]:
        case = c["case"]
        for variant in case.get("variants", {}):
            tool = f"tunelab+{variant}"
            for n in case["checkpoints"]:
                key = str(n)
                base = [f for s in case["seeds"] if (f := _figure(c, "tunelab", s, key))]
                alt = [f for s in case["seeds"] if (f := _figure(c, tool, s, key))]
                base_ms = _median([f["median_ms"] for f in base])
                alt_ms = _median([f["median_ms"] for f in alt])
                walls = [
                    _median([r["wall_s"] for r in c["runs"] if r["tool"] == t]) for t in ("tunelab", tool)
                ]
                rows.append(
                    f"| {_shape(case)} | {variant} | {n} | {len(case['seeds'])} | {_num(base_ms, 3)} | "
                    f"{_num(alt_ms, 3)} | {_num(base_ms / alt_ms if base_ms and alt_ms else None)} | "
                    f"{_num(walls[0], 0)}, {_num(walls[1], 0)} |"
                )
    if not rows:
        return "No case of this tier switches a structure on."
    note = (
        "Both sessions tune the same problem with the same budget, seed and timing; the variant sets the "
        "auto space's switch its name says (`pack_inputs`: packing on; `unpacked`: off; the space editor's "
        'MultiLevelTiling limits), the default session leaves it at the default (`pack_inputs` "auto" since '
        "2026-12-03, off before). Latencies from the side-by-side re-measurement."
    )
    return _table(doc, columns, rows, note)


RENDERERS = {
    "quality": quality_table,
    "structures": structures_table,
    "vsraw": vsraw_table,
    "overhead": overhead_table,
}


def render_section(name: str, docs: dict[str, dict[str, Any]]) -> str:
    """One section's tables for every tier that has results, quick first."""
    parts = [RENDERERS[name](docs[t]) for t in ("quick", "long") if t in docs]
    return "\n\n".join(parts) if parts else "No results yet: run one of the commands above."


def render_text(text: str, docs: dict[str, dict[str, Any]]) -> str:
    """``text`` with each suite section between its markers replaced; a missing marker is an error."""
    for name in SECTIONS:
        begin, end = f"<!-- suite:{name}:begin -->", f"<!-- suite:{name}:end -->"
        if begin not in text or end not in text:
            raise ValueError(f"the document lacks the markers {begin} ... {end}")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{render_section(name, docs)}\n{end}{tail}"
    return text


def render_into(path: Path, docs: dict[str, dict[str, Any]]) -> None:
    path.write_text(render_text(path.read_text(), docs))

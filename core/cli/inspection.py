"""`tunelab workloads`, `tuners`, `sessions`, `show` and `compare`: what the catalog and the store hold, as tables
or JSON."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from tunelab.core.cli.common import (
    _best_text,
    _open_store,
    _print_table,
    _session_json,
    _stated_best,
    _trial_json,
)
from tunelab.core.records import MeasureOptions, SearchTime, figure_text, trial_label


def cmd_workloads(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.listing import list_workloads

    items = list_workloads()
    if args.json:
        print(json.dumps([w.to_json() for w in items]))
        return 0
    for w in items:
        params = ", ".join(f"{p.name}={p.default}" for p in w.params)
        print(f"{w.name:18s} {w.title}\n{'':18s} params: {params}; dtypes: {', '.join(w.dtypes)}")
    print("custom             your own TE compute: tunelab tune custom --custom my_op.py")
    return 0


def cmd_tuners(args: argparse.Namespace) -> int:
    """Every registered tuner: its one line, the space kinds it drives, and whether it loads here (a
    tuner whose optional dependency is missing says which)."""
    from tunelab.core.usecases.listing import recommendation_words, tuner_entries

    items: list[dict[str, Any]] = [entry.to_json() for entry in tuner_entries()]
    if args.json:
        print(json.dumps(items))
        return 0
    rows = [
        [t["name"], ", ".join(t["spaces"]), "yes" if t["unavailable"] is None else "no", t["description"]]
        for t in items
    ]
    _print_table(rows, ["tuner", "spaces", "loads", "what it does"])
    for t in items:
        if t["unavailable"] is not None:
            print(f"{t['name']}: {t['unavailable']}")
    print("recommended (what tune runs without --tuner):")
    for line in recommendation_words():
        print(f"  {line}")
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    store = _open_store(args.db, create=False)
    records = store.sessions()
    stated = {r.id: _stated_best(store, r) for r in records}
    if args.json:
        print(json.dumps([_session_json(r, stated[r.id]) for r in records]))
        return 0
    rows = [
        [
            str(r.id),
            r.status,
            r.name,
            r.target_kind,
            r.space_kind,
            r.tuner,
            f"{r.n_trials}/{r.trials_budget}",
            _best_text(stated[r.id]),
            figure_text(stated[r.id].gflops if stated[r.id] else None),
        ]
        for r in records
    ]
    _print_table(rows, ["id", "status", "name", "target", "space", "tuner", "trials", "best ms", "GFLOP/s"])
    print(
        "best: what an export states; confirmed (fresh processes, quiet machine), untrusted, or session's own"
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    store = _open_store(args.db, create=False)
    shown = _SessionShown.read(store, args.session, with_trials=args.trials)
    if args.json:
        print(json.dumps(shown.doc))
    else:
        print("\n".join(shown.words()))
    return 0


@dataclass(frozen=True)
class _SessionShown:
    """What `tunelab show` reads of one session: its JSON document and the records its text is made of."""

    doc: dict[str, Any]
    record: Any  # SessionRecord
    best: Any  # its fastest TrialRecord, or None
    stated: Any  # StatedBest or None
    pick: Any  # ExportPick or None
    search: SearchTime | None
    rhos: list[float]
    measure: MeasureOptions

    @classmethod
    def read(cls, store: Any, session_id: int, *, with_trials: bool) -> _SessionShown:
        from tunelab.core.usecases.export import confirmations, export_pick

        r = store.session(session_id)
        best = store.best_trial(session_id)
        rounds = store.rounds(session_id)
        stated = _stated_best(store, r)
        confirmed = confirmations(store, session_id)
        pick = export_pick(store, session_id, confirmed=confirmed) if best else None
        search = SearchTime.of_rounds(rounds)  # what Store.search_time reads, from the rounds read above
        measure = MeasureOptions.from_json(r.measure)
        doc = _session_json(r, stated)
        doc["tasks"] = [_task_json(t) for t in store.tasks(session_id)]
        doc.update(
            {
                "space_json": r.space,
                "tuner_options": r.tuner_options,
                "measure": r.measure,
                "best_trial": _trial_json(store.trial(best.id)) if best else None,
                "rounds": [_round_json(x) for x in rounds],
                "search_time": search.to_json() if search else None,
                "confirmed": _confirmed_json(store, confirmed),
                "export": _export_json(pick) if pick else None,
                "warm_start_sessions": _warm_start_sessions(store.tuner_state(session_id) or {}),
                "measured_on": f"{measure.rpc_tracker} (key {measure.rpc_key})"
                if measure.remote
                else "this machine",
            }
        )
        if with_trials:
            shadow = store.trial_predictions(session_id)
            doc["trials_list"] = [
                {**_trial_json(t), "shadow_predictions": shadow.get(t.id, {})}
                for t in store.trials(session_id, with_samples=True)
            ]
        rhos = [x.spearman for x in rounds if x.spearman is not None]
        return cls(doc, r, best, stated, pick, search, rhos, measure)

    def words(self) -> list[str]:
        r, doc, best = self.record, self.doc, self.best
        lines = [
            f"session {r.id}: {r.name} [{r.status}]",
            f"  {r.workload} {r.shape} {r.dtype} on {r.target_kind} ({json.dumps(r.target)})",
            f"  {r.space_kind} space, tuner {r.tuner}, {r.n_trials}/{r.trials_budget} trials, {r.n_failed} failed",
        ]
        if self.measure.remote:
            lines.append(f"  measured on the servers of RPC tracker {doc['measured_on']}")
        if doc["warm_start_sessions"]:
            sessions = ", ".join(map(str, doc["warm_start_sessions"]))
            lines.append(f"  warm start: the cost model started from session(s) {sessions}")
        if best:
            best_doc = doc["best_trial"]
            best_name = trial_label(best.number, trial_id=best.id)
            lines.append(
                f"  best: trial {best_name}  median {figure_text(best.latency_ms)} ms "
                f"(CV {figure_text(best_doc['cv'], 2)}, IQR {figure_text(best_doc['iqr_ms'])} ms, "
                f"{best_doc['outliers']} outliers)  "
                f"{figure_text(r.best_gflops)} GFLOP/s\n  config: {json.dumps(best.config)}"
            )
        for c in doc["confirmed"][:3]:
            name = trial_label(c["trial_number"], trial_id=c["trial_id"])
            where = f"fresh sessions on {', '.join(c['devices'])}" if c["devices"] else "fresh processes"
            lines.append(
                f"  confirmed: trial {name}  {figure_text(c['median_ms'])} ms in {c['runs']} {where} "
                f"(session {figure_text(c['session_ms'])} ms)"
                + (f"; noisy: {c['disturbance']}" if c["disturbance"] else "")
            )
        if self.stated is not None:
            lines.append(f"  stated best ({self.stated.kind}): {self.stated.words()}")
        if self.pick is not None:
            lines.append(f"  export states {self.pick.summary()}")
        if len(doc["tasks"]) > 1:
            lines += [
                f"  shape {t['shape']}: {t['trials']} trials, best {figure_text(t['best_ms'])} ms "
                f"({figure_text(t['best_gflops'])} GFLOP/s)"
                for t in doc["tasks"]
            ]
        if self.search is not None:
            lines.append(f"  {self.search.words()}")
        if self.rhos:
            lines.append(
                f"  cost model rank correlation per round: {' '.join(f'{x:.2f}' for x in self.rhos)}"
            )
        if r.error:
            lines.append(f"  error: {r.error}")
        return lines


def _task_json(t: Any) -> dict[str, Any]:
    return {
        "id": t.id,
        "shape": t.shape,
        "flops": t.flops,
        "trials": t.n_trials,
        "failed": t.n_failed,
        "best_ms": t.best_ms,
        "best_gflops": t.best_gflops,
        "best_trial_id": t.best_trial_id,
        "best_trial_number": t.best_trial_number,
    }


def _round_json(x: Any) -> dict[str, Any]:
    return {
        "round": x.round,
        "n": x.n,
        "spearman": x.spearman,
        "best_ms": x.best_ms,
        "search_s": x.search_s,
        "wall_s": x.wall_s,
    }


def _confirmed_json(store: Any, confirmed: dict[int, Any]) -> list[dict[str, Any]]:
    """The confirmed figures (tunelab.core.trust.confirmed), fastest first."""
    numbers = {k: store.trial(k).number for k in confirmed}
    return [
        {
            "trial_id": k,
            "trial_number": numbers[k],
            "median_ms": v.median_ms,
            "session_ms": v.session_ms,
            "runs": v.runs,
            "cv": v.cv,
            "verdict": v.verdict,
            "validation_id": v.validation_id,
            "disturbance": v.disturbance,
            "layout_ms": v.layout_ms,
            "devices": list(v.devices),  # the RPC servers that confirmed it; []: fresh processes here
        }
        for k, v in sorted(confirmed.items(), key=lambda kv: kv[1].median_ms)
    ]


def _export_json(pick: Any) -> dict[str, Any]:
    return {
        "trial_id": pick.trial.id,
        "trial_number": pick.trial.number,
        "stated_ms": pick.stated_ms,
        "ci_ms": list(pick.ci_ms) if pick.ci_ms else None,
        "untrusted_because": pick.untrusted_because,
        "placement": pick.placement.to_json() if pick.placement else None,
        "summary": pick.summary(),
    }


def _warm_start_sessions(state: dict[str, Any]) -> list[int]:
    """The sessions a tuner's cost model started from, in its state or its arms' (ucb)."""
    return sorted(
        {
            i
            for part in (state, *(v for v in state.values() if isinstance(v, dict)))
            for i in part.get("warm_start_sessions", [])
        }
    )


def cmd_compare(args: argparse.Namespace) -> int:
    store = _open_store(args.db, create=False)
    records = [store.session(i) for i in args.sessions]
    docs = []
    for r in records:
        stated = _stated_best(store, r)
        # the configuration of the trial whose figure is stated (an export's pick), not of another
        best = store.trial(stated.trial_id) if stated is not None else None
        doc = _session_json(r, stated)
        doc["best_config"] = best.config if best else None
        docs.append(doc)
    fastest = min((d["best_ms"] for d in docs if d["best_ms"]), default=None)
    for d in docs:
        d["speedup_vs_fastest"] = (d["best_ms"] / fastest) if (fastest and d["best_ms"]) else None
    if args.json:
        print(json.dumps({"sessions": docs, "fastest_ms": fastest}))
        return 0
    rows = [
        [
            str(d["id"]),
            d["name"],
            d["tuner"],
            d["space"],
            str(d["trials"]),
            f"{figure_text(d['best_ms'])} {d['best']['kind']}" if d["best"] else "-",
            figure_text(d["best_gflops"]),
            figure_text(d["speedup_vs_fastest"], 3),
        ]
        for d in docs
    ]
    _print_table(rows, ["id", "name", "tuner", "space", "trials", "best ms", "GFLOP/s", "x fastest"])
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    """What a TVM RPC tracker holds: per key its free servers and pending requests, and every server."""
    from tunelab.core.usecases.listing import tracker_devices

    summary = tracker_devices(args.rpc)
    if args.json:
        print(json.dumps(summary.to_json()))
        return 0
    print(f"tracker {summary.tracker}: {len(summary.servers)} server(s)")
    queues = {q.key: q for q in summary.queues}
    rows = []
    for key in summary.keys:
        q = queues.get(key)
        servers = summary.servers_for(key)
        rows.append(
            [
                key,
                str(len(servers)),
                "-" if q is None else str(q.free),
                "-" if q is None else str(q.pending),
                ", ".join(s.address for s in servers) or "-",
            ]
        )
    if rows:
        _print_table(rows, ["key", "servers", "free", "pending", "addresses"])
    else:
        print("no server has registered (python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY)")
    return 0

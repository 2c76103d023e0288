"""`tunelab export`: a session's best (or a chosen) trial written out as files; `tunelab import`: a MetaSchedule
run (a tune_tir / tune_relax work folder) read in as sessions."""

from __future__ import annotations

import argparse
import json

from tunelab.core.cli.common import EXIT_STORE_FAILURE, _open_store, _session_json, say_error
from tunelab.core.faults import OutOfSpace
from tunelab.core.records import figure_text


def cmd_export(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.export import export_session_trial

    store = _open_store(args.db, create=False)
    try:
        # --trial is the number people see (#N within the session); --trial-id the id scripts read.
        written = export_session_trial(
            store,
            args.session,
            trial_number=args.trial,
            trial_id=args.trial_id,
            out_dir=args.out,
            force=args.force,
            robust=args.robust,
        )
    except OutOfSpace as exc:  # the export's disk filled, not the store's: said as it is, exit 3
        return say_error(args.events, str(exc), EXIT_STORE_FAILURE)
    if args.json:
        print(json.dumps(written))
    else:
        for kind, path in written.items():
            print(f"{kind:10s} {path}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from tunelab.core.usecases.ms_import import read_work_dir, store_imported

    imported = read_work_dir(args.work_dir)  # checked before the store is opened: bad input creates no file
    store = _open_store(args.db, create=True, write=True)
    session_ids = store_imported(store, imported, args.work_dir)
    records = [store.session(session_id) for session_id in session_ids]
    if args.json:
        print(json.dumps([_session_json(r) for r in records]))
    else:
        for r in records:
            print(
                f"session {r.id}: {r.name} ({r.n_trials} trials, {r.n_failed} failed, best {figure_text(r.best_ms)} ms)"
            )
    return 0

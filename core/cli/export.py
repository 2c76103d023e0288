"""`tunelab export`: a session's best (or a chosen) trial written out as files."""

from __future__ import annotations

import argparse
import json

from tunelab.core.cli.common import _open_store


def cmd_export(args: argparse.Namespace) -> int:
    from tunelab.core.export.files import export_trial

    store = _open_store(args.db, create=False)
    # --trial is the number people see (#N within the session); --trial-id the id scripts read.
    trial_id = args.trial_id if args.trial is None else store.trial_id_of(args.session, args.trial)
    written = export_trial(
        store, args.session, trial_id, out_dir=args.out, force=args.force, robust=args.robust
    )
    if args.json:
        print(json.dumps(written))
    else:
        for kind, path in written.items():
            print(f"{kind:10s} {path}")
    return 0

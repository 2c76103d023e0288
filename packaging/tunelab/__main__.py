"""`tunelab` and `python -m tunelab`: the desktop app with no command (or `gui`), else the command line.

The one place that chooses between the two, so that the command line never imports the GUI.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from tunelab.core.measure.threads import use_every_core

    use_every_core()  # before TVM starts its thread pool, in this process and the ones it starts
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] == "gui" or (args[0] == "--db" and len(args) == 2):
        from tunelab.app.main import main as gui_main

        return gui_main(argv=args[1:] if args and args[0] == "gui" else args)
    from tunelab.core.cli.main import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())

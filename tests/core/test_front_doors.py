"""The app and the command line reach the engine only through its front doors (scripts/import_graph.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# grimp finds a package through the import system: in a fresh interpreter, so that the tunelab this test
# process imported is not the one it reads.
EDGES = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import import_graph
view = import_graph.installed_view(Path(sys.argv[2]))
for rel, text in json.loads(sys.argv[3]).items():
    (view / rel).write_text(text)
edges = import_graph.past_front_doors(view)
print(json.dumps({"edges": edges, "lines": import_graph.front_door_failures(edges)}))
"""


def past_doors(tmp_path: Path, planted: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", EDGES, str(ROOT / "scripts"), str(tmp_path), json.dumps(planted)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout)


def test_the_tree_keeps_to_the_front_doors(tmp_path):
    assert past_doors(tmp_path, {}) == {"edges": [], "lines": []}


def test_an_import_past_the_doors_fails_inside_a_function_too(tmp_path):
    found = past_doors(
        tmp_path,
        {
            "tunelab/app/planted_view.py": '"""A view that reaches past the use cases."""\n\n\ndef check(spec):\n'
            "    from tunelab.core.session.loop import check_spec\n\n    return check_spec(spec)\n",
            "tunelab/core/cli/planted_command.py": '"""A command that does too."""\n\n'
            "from tunelab.core.trust.bias import bias_report\nfrom tunelab.core.usecases.bias import session_bias\n",
        },
    )
    assert found["edges"] == [
        ["tunelab.app.planted_view", "tunelab.core.session.loop"],
        ["tunelab.core.cli.planted_command", "tunelab.core.trust.bias"],
    ]
    assert found["lines"][0] == (
        "tunelab.app.planted_view imports tunelab.core.session.loop: reach it through a use case "
        "(tunelab.core.usecases)"
    )

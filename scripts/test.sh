#!/usr/bin/env bash
# Set up a virtual environment with tunelab and its test tools, then run lint and the test suite.
# This is the README's test command; .ci/run calls it on a clean clone.
#   bash scripts/test.sh            the whole suite (CI)
#   bash scripts/test.sh --fast     lint, contracts, mypy and the tests not marked slow: for every change
# Other arguments go to pytest, in both lanes (below; a -m of your own replaces the lanes' and runs twice).
set -euo pipefail
cd "$(dirname "$0")/.."
only=""  # the tier: every test, or (--fast) "not slow and " before each lane's marker expression
if [ "${1:-}" = "--fast" ]; then
  shift
  only="not slow and "
fi
# Qt (even offscreen) links against a few system libraries a slim Debian may lack.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=""
  for pkg in libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
  done
  if [ -n "$missing" ]; then
    (apt-get update -qq && apt-get install -y -qq $missing >/dev/null) || echo "warning: could not install$missing" >&2
  fi
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# What the desktop app's own check (app/system_libs.py) finds missing for Qt's xcb plugin: the
# app's tests start it on that platform too, and a fresh Debian lacks a few of them.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  xcb_missing="$(.venv/bin/python -c 'from tunelab.app.system_libs import missing_packages; print(*missing_packages())')"
  if [ -n "$xcb_missing" ]; then
    (apt-get update -qq && apt-get install -y -qq $xcb_missing >/dev/null) || echo "warning: could not install $xcb_missing" >&2
  fi
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python scripts/import_graph.py  # import-linter contracts, zero import cycles, the front doors
.venv/bin/python scripts/module_map.py    # docs/ARCHITECTURE.md lists every module by its job
.venv/bin/python scripts/typecheck.py    # mypy on tunelab.core and tunelab.app ([tool.mypy] in pyproject.toml)
export QT_QPA_PLATFORM=offscreen
# Two lanes: the tests marked serial (they time kernels against what they planted) alone first, then the
# rest on one pytest-xdist worker per core (up to 4), work-stealing so that neither waits at the end.
# Most tests wait on child processes (TVM's import, builds, the app), so one lane leaves a core idle.
workers="$(nproc 2>/dev/null || echo 2)"
if [ "$workers" -gt 4 ]; then workers=4; fi
lane() {
  set +e
  .venv/bin/python -m pytest -q "$@"
  local rc=$?
  set -e
  # pytest's "no tests collected" (5) is not a failure of the project: a lane may hold none of those asked.
  if [ "$rc" = 5 ]; then rc=0; fi
  return "$rc"
}
rc=0
lane -m "${only}serial" -p no:xdist "${@}" || rc=$?
lane -m "${only}not serial" -n "$workers" --dist worksteal "${@}" || rc=$?
exit "$rc"

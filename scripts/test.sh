#!/usr/bin/env bash
# Set up a virtual environment with tunelab and its test tools, then run lint and the test suite.
# This is the README's test command; .ci/run calls it on a clean clone.
#   bash scripts/test.sh            the whole suite (CI)
#   bash scripts/test.sh --fast     lint, contracts, mypy and the tests not marked slow: for every change
# Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=()
if [ "${1:-}" = "--fast" ]; then
  shift
  tier=(-m "not slow")
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
set +e
.venv/bin/python -m pytest -q ${tier[@]+"${tier[@]}"} "$@"
rc=$?
set -e
# pytest's "no tests collected" (5) is not a failure of the project.
if [ "$rc" = 5 ]; then rc=0; fi
exit "$rc"

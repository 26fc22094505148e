#!/usr/bin/env bash
# Prints the path of a Python with aioapns installed, making a venv under .build on first use
# (PyPI is used for test tooling only). Usage: "$(scripts/bench/aioapns_env.sh)" script.py ...
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.build/aioapns-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import aioapns" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q aioapns >&2
fi
echo "$PWD/$venv/bin/python"

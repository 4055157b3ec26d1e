#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exits non-zero on any failure,
# including pytest's "no tests collected" (exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Two workers (pytest-xdist): the tests of Ray clusters, launchers and process groups run in one
# of them, one after another (tests/conftest.py groups them); the rest share both. They spend much
# of their time waiting on processes they start, which the other worker's tests fill.
exec .venv/bin/python -m pytest -q -n 2 --dist loadgroup "$@"

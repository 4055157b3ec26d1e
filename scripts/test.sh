#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exits non-zero on any failure,
# including pytest's "no tests collected" (exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"

#!/usr/bin/env bash
# Create .venv with plait and its exact, pinned dependencies (constraints.txt).
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade "pip>=24" 2>&1 | grep -v '^WARNING: Location' || true
# torch first and alone, pinned: an unpinned resolve could pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt "torch==2.13.0" 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]" 2>&1 | grep -v -e '^WARNING: Location' -e 'BuildBackendWarning' || true
.venv/bin/python -c "import plait, torch, pyarrow; print(f'plait {plait.__version__} ready (torch {torch.__version__})')"

#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exits non-zero on any failure,
# including pytest's "no tests collected" (exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Two pytest processes at once: the tests marked `cluster` (Ray clusters, launchers, process
# groups: tests/conftest.py) in one, one after another as ever, and the rest in the other. The
# cluster tests spend much of their time waiting on the processes they start, which the other
# half fills. Each half's output goes to its log, printed when both are done.
logs=$(mktemp -d)
mkdir "$logs/ray"
.venv/bin/python -m pytest -q -m cluster "$@" >"$logs/cluster.log" 2>&1 &
cluster=$!
# The other half never joins the cluster half's Ray (plait finds a running cluster through the
# address file in Ray's temp folder): it gets a temp folder of its own.
RAY_TMPDIR="$logs/ray" .venv/bin/python -m pytest -q -m "not cluster" "$@" >"$logs/rest.log" 2>&1 &
rest=$!
status=0
wait "$cluster" || cluster_status=$?
wait "$rest" || rest_status=$?
cluster_status=${cluster_status:-0} rest_status=${rest_status:-0}
echo "== the cluster tests (pytest -m cluster)"; cat "$logs/cluster.log"
echo "== the other tests (pytest -m 'not cluster')"; cat "$logs/rest.log"
# Exit 5 is "no tests collected": fine for one half when the other ran tests (a selection of
# files may hold only one kind), a failure when neither did.
for code in "$cluster_status" "$rest_status"; do
  if [ "$code" != 0 ] && [ "$code" != 5 ]; then status=$code; fi
done
if [ "$cluster_status" = 5 ] && [ "$rest_status" = 5 ]; then status=5; fi
rm -rf "$logs"
exit "$status"

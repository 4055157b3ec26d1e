#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. Exits non-zero on any failure,
# including pytest's "no tests collected" (exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Three pytest processes at once (the marks are set in tests/conftest.py): the tests of the
# session's Ray cluster, the tests that start clusters, launchers or process groups of their own,
# and the rest. The first two spend much of their time waiting on the processes they start, which
# the others fill. Each process's output goes to its log, printed when all are done.
logs=$(mktemp -d)
declare -A selection=([cluster]="cluster" [processes]="processes" [rest]="not cluster and not processes")
# The machine's CPUs are all busy while the three run, so who waits matters: Ray starts its
# workers at nice 15, where they get a few percent of a CPU beside any process at nice 0, and
# the cluster tests (the longest part) did little until the others had ended. So Ray's workers
# run at nice 0 here, and the rest, which fills what the others leave, at nice 2 (at 5 it ended last).
export RAY_worker_niceness=0
declare -A niceness=([cluster]=0 [processes]=0 [rest]=2)
declare -A pids
for part in cluster processes rest; do
  # Each process has a Ray temp folder of its own: plait finds a running cluster through the
  # address file there, and only the first process's tests may join the session's cluster.
  mkdir "$logs/ray-$part"
  RAY_TMPDIR="$logs/ray-$part" nice -n "${niceness[$part]}" .venv/bin/python -m pytest -q -m "${selection[$part]}" "$@" \
    >"$logs/$part.log" 2>&1 &
  pids[$part]=$!
done
status=0 collected=0
for part in cluster processes rest; do
  code=0
  wait "${pids[$part]}" || code=$?
  echo "== $part (pytest -m '${selection[$part]}'): exit $code"; cat "$logs/$part.log"
  # Exit 5 is "no tests collected": fine for a part when another ran tests (a selection of
  # files may hold only one kind), a failure when none did.
  if [ "$code" = 5 ]; then continue; fi
  collected=1
  if [ "$code" != 0 ]; then status=$code; fi
done
if [ "$collected" = 0 ]; then status=5; fi
rm -rf "$logs"
exit "$status"

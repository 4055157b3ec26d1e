"""Where the test suite's CPU time goes: runs scripts/test.sh under a poller of /proc, with this
module loaded into each pytest process as a plugin, and prints the CPU-seconds of each part, of
the costliest tests and of each kind of process (Ray's workers and actors included).

    .venv/bin/python scripts/profile_suite.py [pytest arguments ...]

The figures go to benchmarks/out/suite_profile.json as well. The suite's wall time is bounded by
its CPU time on this machine (its cores are busy the whole run), so a test's cost is the CPU its
part's processes used while it ran: the pytest process, the Ray cluster it started or joined, and
every process started under either. A test of the ``cluster`` part is charged for the session
cluster's work during it; the parts run at once, each test of a part after the other.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "suite_profile.json"
TICK = os.sysconf("SC_CLK_TCK")
PERIOD_S = 0.5
LOG_ENV = "PLAIT_SUITE_PROFILE_LOG"
_TASK_ID = re.compile(r"-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$")


# ---- the pytest plugin (loaded with -p profile_suite in each of test.sh's processes) -------------

def _part() -> str:
    """test.sh gives each part a Ray temporary folder named ray-<part>."""
    return Path(os.environ.get("RAY_TMPDIR", "ray-?")).name.removeprefix("ray-")


def _log(record: dict) -> None:
    if LOG_ENV in os.environ:
        with open(os.environ[LOG_ENV], "a") as log:
            log.write(json.dumps(record) + "\n")


def pytest_sessionstart(session) -> None:
    _log({"part": _part(), "pid": os.getpid()})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.time()
    try:
        return (yield)
    finally:
        _log({"part": _part(), "test": item.nodeid, "start": start, "end": time.time()})


# ---- the poller -------------------------------------------------------------------------------

def _stat(pid: str) -> tuple[int, int, int] | None:
    """(parent pid, start time, CPU ticks so far) of a process, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name, in parentheses, may hold spaces
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12])


def _busy_s() -> float:
    """The machine's busy CPU-seconds since boot (all cores), from /proc/stat."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK  # less idle and iowait


def _kind(pid: str) -> str:
    """A short name for what a process is: Ray's title (ray::RayTrainWorker) or its program."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    if not words:
        return "?"
    if words[0].startswith("ray::"):  # a Dask task's title ends in its key's id: one kind, not one per task
        return _TASK_ID.sub("", words[0].split()[0].split(".")[0])
    program = Path(words[0]).name
    if program.startswith("python") and len(words) > 1:
        rest = words[2] if words[1] == "-m" and len(words) > 2 else Path(words[1]).name
        return f"python {rest}"
    return program


class Poller:
    """Samples every process's CPU ticks and charges each new tick to a part of the suite: the
    part whose pytest process the process descends from."""

    def __init__(self, log: Path):
        self.log = log
        self.roots: dict[int, str] = {}  # pytest pid -> part
        self.log_read = 0  # bytes of the log read so far: each sample reads only what is new
        self.seen: dict[str, tuple[int, int]] = {}  # pid -> (start time, ticks counted)
        self.parents: dict[int, int] = {}
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.by_kind: dict[str, float] = defaultdict(float)

    def _read_roots(self) -> None:
        if not self.log.exists():
            return
        with open(self.log, "rb") as log:
            log.seek(self.log_read)
            new = log.read()
        whole = new[: new.rfind(b"\n") + 1]  # a line being written is read at the next sample
        self.log_read += len(whole)
        for line in whole.decode().splitlines():
            record = json.loads(line)
            if "pid" in record:
                self.roots[record["pid"]] = record["part"]

    def _part_of(self, pid: int) -> str:
        for _ in range(64):
            if pid in self.roots:
                return self.roots[pid]
            if pid not in self.parents or pid <= 1:
                return "other"
            pid = self.parents[pid]
        return "other"

    def sample(self) -> None:
        self._read_roots()
        stats = {pid: s for pid in os.listdir("/proc") if pid.isdigit() and (s := _stat(pid))}
        self.parents.update({int(pid): s[0] for pid, s in stats.items()})
        used: dict[str, float] = defaultdict(float)
        for pid, (_, started, ticks) in stats.items():
            before = self.seen.get(pid)
            counted = before[1] if before and before[0] == started else 0
            self.seen[pid] = (started, ticks)
            if ticks > counted:
                seconds, part = (ticks - counted) / TICK, self._part_of(int(pid))
                used[part] += seconds
                if part != "other":  # read again each time: Ray retitles a worker when it takes work
                    self.by_kind[_kind(pid)] += seconds
        self.samples.append((time.time(), dict(used)))


def _charge(samples, tests) -> list[dict]:
    """Each test's wall time and its part's CPU-seconds during it."""
    rows = []
    for test in tests:
        cpu = sum(used.get(test["part"], 0.0) for t, used in samples if test["start"] < t <= test["end"] + PERIOD_S)
        rows.append({"test": test["test"], "part": test["part"], "wall_s": round(test["end"] - test["start"], 2),
                     "cpu_s": round(cpu, 1)})
    return sorted(rows, key=lambda row: -row["cpu_s"])


def main(pytest_args: list[str]) -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    log = OUT.with_suffix(".tests.jsonl")
    log.unlink(missing_ok=True)
    env = dict(os.environ, **{LOG_ENV: str(log)})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "scripts"), env.get("PYTHONPATH")]))
    poller = Poller(log)
    poller.sample()  # what the processes running now have used so far is not the suite's
    poller.samples.clear()
    poller.by_kind.clear()
    start, busy = time.time(), _busy_s()
    suite = subprocess.Popen(["bash", str(ROOT / "scripts" / "test.sh"), "-p", "profile_suite", *pytest_args],
                             cwd=ROOT, env=env)
    while suite.poll() is None:
        time.sleep(PERIOD_S)
        poller.sample()
    wall, busy = time.time() - start, _busy_s() - busy
    tests = [r for r in map(json.loads, log.read_text().splitlines()) if "test" in r]
    parts: dict[str, float] = defaultdict(float)
    for _, used in poller.samples:
        for part, seconds in used.items():
            parts[part] += seconds
    rows = _charge(poller.samples, tests)
    report = {"exit": suite.returncode, "wall_s": round(wall, 1), "machine_busy_cpu_s": round(busy),
              "cpu_s_by_part": dict(parts),
              "cpu_s_by_kind": dict(sorted(poller.by_kind.items(), key=lambda kv: -kv[1])), "tests": rows}
    OUT.write_text(json.dumps(report, indent=1))
    print(f"\nsuite: exit {suite.returncode}, {wall:.0f} s wall, the machine busy {busy:.0f} CPU-s; by part",
          "(processes seen at a sample):", ", ".join(f"{p} {s:.0f}" for p, s in sorted(parts.items())))
    print("costliest tests (CPU-s of their part while they ran, wall s):")
    for row in rows[:40]:
        print(f"  {row['cpu_s']:7.1f} {row['wall_s']:7.1f}  [{row['part']}] {row['test']}")
    print("CPU-s by kind of process:")
    for kind, seconds in list(report["cpu_s_by_kind"].items())[:25]:
        print(f"  {seconds:7.1f}  {kind}")
    print(f"written: {OUT}")
    return suite.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

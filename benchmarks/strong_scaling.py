"""Strong scaling on one many-core machine: the local backend on one node's cores against Ray
over 1, 2 and 4 "nodes", each a separate Ray node pinned to its own cores.

    .venv/bin/python benchmarks/strong_scaling.py                                   # 16 cores: 4 nodes of 4, 5M rows
    .venv/bin/python benchmarks/strong_scaling.py --nodes 1 2 --cores-per-node 1 --rows 50000 --train-rows 50000   # a smoke test

What it does, for each workload (preprocessing, DDP training, batch prediction):

* local: the local backend in a process pinned (``sched_setaffinity``, inherited by its
  children) to the first node's cores; torch and Arrow size their thread pools from that.
* Ray on ``n`` nodes, for each ``n`` of ``--nodes``: ``n`` Ray nodes started with
  ``taskset -c <cores> ray start --num-cpus <cores per node> --temp-dir <own folder>``, the first
  as the head, each pinned to its own cores (node ``i`` on cores ``first + i*c .. first + i*c + c - 1``),
  with its own ports, object store size and temp folder; the driver runs pinned to the head
  node's cores and joins through ``RAY_ADDRESS``. The same runs as ``ray_overhead.py``:
  ``preprocess.py``'s cold run (Dask-on-Ray), ``predict.py``'s ``write_predictions``, and
  ``train.py``'s training with one DDP worker per node (each reserving more than half a node's
  CPUs, so no two share a node; torch in a worker uses the node's cores but one), the global batch
  of 256 split over the workers.

Ray's start-up is left out of every figure (as those scripts leave it out). The cluster is
torn down after each ``n`` by ending only the processes whose command line names its own temp
folder: never ``ray stop``, which would end every Ray instance of this user on the machine.
The address file of a node started with ``--temp-dir`` lies in that folder, so a ``ray.init()``
elsewhere on the machine does not join this cluster by accident.

Speed-up = Ray on ``n`` nodes / Ray on 1 node; vs local = Ray / local. The issue's target is 4
nodes at least 3x one node for preprocessing and prediction. Results are printed and written
to ``benchmarks/out/strong_scaling.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import preprocess  # noqa: E402  (benchmarks/preprocess.py)
import ray_overhead  # noqa: E402  (benchmarks/ray_overhead.py: one run per workload and backend)

OUT_DIR = preprocess.OUT_DIR
WORKLOADS = ("preprocess", "train", "predict")
TARGET_SPEEDUP_4 = 3.0


# Pinning -----------------------------------------------------------------------------------------

def node_cores(node: int, cores_per_node: int, first_core: int) -> list[int]:
    start = first_core + node * cores_per_node
    return list(range(start, start + cores_per_node))


@contextlib.contextmanager
def pinned(cores: list[int]):
    """This process (and so every child it starts meanwhile) on ``cores`` only."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# A Ray cluster of pinned nodes ------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PinnedCluster:
    """``nodes`` Ray nodes on this machine, each started by ``ray start`` under ``taskset`` on its
    own cores, with its own temp folder, ports and object store."""

    def __init__(self, nodes: int, cores_per_node: int, first_core: int, object_store_bytes: int):
        self.nodes, self.cores, self.first = nodes, cores_per_node, first_core
        self.store = object_store_bytes
        self.folder = Path(tempfile.mkdtemp(prefix="plait-ss-"))  # short: Ray's socket paths must fit 107 bytes
        self.address: str | None = None

    def start(self) -> float:
        """Start every node; returns the seconds it took."""
        started = time.perf_counter()
        for node in range(self.nodes):
            self._start_node(node)
        return time.perf_counter() - started

    def _start_node(self, node: int) -> None:
        cores = node_cores(node, self.cores, self.first)
        ray = str(Path(sys.executable).parent / "ray")
        command = ["taskset", "-c", ",".join(map(str, cores)), ray, "start", "--num-cpus", str(self.cores),
                   "--temp-dir", str(self.folder / f"n{node}"), "--object-store-memory", str(self.store),
                   "--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port()),
                   "--min-worker-port", str(20_000 + node * 1_000), "--max-worker-port", str(20_999 + node * 1_000),
                   "--disable-usage-stats"]
        if node == 0:
            port = free_port()
            command += ["--head", "--port", str(port), "--include-dashboard=false"]
            self.address = f"127.0.0.1:{port}"
        else:
            command += ["--address", self.address]
        # plait's clients run with Ray's token authentication off unless told otherwise
        # (plait.backends.environment); nodes started here must agree with them.
        env = {"RAY_AUTH_MODE": "disabled", **os.environ}
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            self.stop()
            raise SystemExit(f"ray start of node {node} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")

    def own_processes(self) -> list[int]:
        """The processes whose command line names this cluster's folder (raylets, GCS, agents,
        workers): this cluster's, and no other Ray's."""
        mine = str(self.folder).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if mine in (entry / "cmdline").read_bytes():
                        found.append(int(entry.name))
        return [pid for pid in found if pid != os.getpid()]

    def stop(self) -> None:
        """End this cluster's processes by id (TERM, then KILL what is left), then its folder."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.own_processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            for _ in range(50):
                if not self.own_processes():
                    break
                time.sleep(0.1)
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def joined(address: str):
    """Children started meanwhile join the cluster at ``address``."""
    before = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = address
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = before


# Runs ------------------------------------------------------------------------------------------------

def run_workload(name: str, backend: str, args, nodes: int = 1) -> dict:
    """One run of ``ray_overhead.py``'s for the workload; training with a worker per node."""
    if name == "preprocess":
        return ray_overhead.preprocess_run(backend, args.rows)
    if name == "predict":
        return ray_overhead.predict_run(backend, args.rows)
    more = {}
    if backend == "ray":
        more = {"workers": nodes, "cpus_per_worker": max(args.cores_per_node / 2 + 0.1, args.cores_per_node - 1)}
    return ray_overhead.train_run(backend, args.train_rows, args.epochs, **more)


def measure_local(args) -> dict:
    with pinned(node_cores(0, args.cores_per_node, args.first_core)):
        return {name: [run_workload(name, "local", args) for _ in range(args.repeat)] for name in args.workloads}


def measure_ray(nodes: int, args) -> dict:
    """Every workload on a fresh cluster of ``nodes`` pinned nodes, torn down afterwards."""
    cluster = PinnedCluster(nodes, args.cores_per_node, args.first_core, args.object_store_gib << 30)
    try:
        start = cluster.start()
        print(f"  {nodes} node(s) up in {start:.1f} s at {cluster.address}", flush=True)
        with pinned(node_cores(0, args.cores_per_node, args.first_core)), joined(cluster.address):
            runs = {name: [run_workload(name, "ray", args, nodes) for _ in range(args.repeat)] for name in args.workloads}
    finally:
        cluster.stop()
    return {"cluster_start_seconds": start, **runs}


def best(runs: list[dict]) -> float:
    return max(r["rows_per_s"] for r in runs)


def summarize(local: dict, ray: dict, args) -> dict:
    table = {}
    for name in args.workloads:
        base, one = best(local[name]), best(ray[min(ray)][name])
        table[name] = {"local_rows_per_s": base, "ray": {
            n: {"rows_per_s": best(r[name]), "speedup_vs_1_node": best(r[name]) / one, "vs_local": best(r[name]) / base}
            for n, r in ray.items()}}
    return table


def print_table(table: dict, args) -> None:
    print(f"\nrows/s (best of {args.repeat}); nodes of {args.cores_per_node} cores; local on one node's cores")
    print(f"  {'workload':11} {'local':>10} " + " ".join(f"{f'ray {n} node(s)':>26}" for n in args.nodes))
    for name, row in table.items():
        cells = " ".join(f"{r['rows_per_s']:>10,.0f} ({r['speedup_vs_1_node']:.2f}x, {r['vs_local']:.2f}L)"
                         for r in row["ray"].values())
        print(f"  {name:11} {row['local_rows_per_s']:>10,.0f} {cells}")
    print("  (Nx: against Ray on 1 node; NL: against local)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4], help="Ray node counts (default 1 2 4)")
    parser.add_argument("--cores-per-node", type=int, default=4, help="cores of each node (default 4)")
    parser.add_argument("--first-core", type=int, default=0, help="the first core used (default 0)")
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows to preprocess and predict (default 5,000,000)")
    parser.add_argument("--train-rows", type=int, default=5_000_000, help="rows to train on (default 5,000,000)")
    parser.add_argument("--epochs", type=int, default=2, help="training epochs; the first is left out as warm-up (default 2)")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--repeat", type=int, default=1, help="runs of each; the best counts (default 1)")
    parser.add_argument("--object-store-gib", type=int, default=4, help="object store of each node, GiB (default 4)")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "strong_scaling.json")
    args = parser.parse_args(argv)
    needed = args.first_core + max(args.nodes) * args.cores_per_node
    usable = sorted(os.sched_getaffinity(0))
    if not set(range(args.first_core, needed)) <= set(usable):
        parser.error(f"{max(args.nodes)} nodes of {args.cores_per_node} cores from core {args.first_core} need cores "
                     f"{args.first_core}-{needed - 1}; this process may use {usable}")
    if shutil.which("taskset") is None:
        parser.error("taskset (util-linux) is needed to pin the Ray nodes")

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    ray_overhead.private_ray_tmpdir()  # besides RAY_ADDRESS: a stray ray.init() finds no other cluster
    load_before = os.getloadavg()
    print("local", flush=True)
    local = measure_local(args)
    ray = {}
    for n in sorted(args.nodes):
        print(f"ray, {n} node(s)", flush=True)
        ray[n] = measure_ray(n, args)
    table = summarize(local, ray, args)
    print_table(table, args)
    report = {"benchmark": "strong_scaling", "parameters": {k: v for k, v in vars(args).items() if k != "out"},
              "table": table, "local": local, "ray": ray, "target_4_nodes_speedup": TARGET_SPEEDUP_4,
              "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "load_average": {"before": load_before, "after": os.getloadavg()}, "machine": preprocess.machine()}
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

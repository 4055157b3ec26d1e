"""A Ray cluster of several nodes on this machine (``ray.cluster_utils.Cluster``: a head and
worker nodes, each its own raylet with its own resources), and the runs that the multi-node
tests check, run in a process of their own: a driver joins one Ray cluster only, and the test
session's driver has joined the shared one.

Usage: ``python multinode_cluster.py WORKDIR S3_ENDPOINT BUCKET``: one cluster (a Ray start
costs seconds on two cores), every scenario in turn, their outcomes in ``WORKDIR/result.json``
for the tests to read.

Worker nodes carry a custom resource, ``trainer``, that training workers ask for, so that they
run on worker nodes (never the head, which a node failure must spare: it holds the driver).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import ray
from ray.cluster_utils import Cluster

NODE = {"num_cpus": 2, "resources": {"trainer": 2}, "object_store_memory": 200 * 2**20}
EPOCHS = 16
HOLD_S = 240
"""The longest a group is held at an evaluation (see ``HoldTheGroup``)."""
ADDED: list = []
"""Nodes started with ``ray start`` (stopped at the end)."""


START_TIMEOUT_S = "5"
"""Ray Train's wait for a worker group's placement group (``RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S``;
plait's elastic default is 20 s, and leaves a value set here alone). Just after the node is
removed, Ray Train may still count it and ask for a group of two, which waits this long before
it decides again: 20 s of the scenario bought nothing. The wait covers the placement group only
(bundles committed in under 0.2 s on a loaded machine; worker processes start after it), and a
timeout is a controller retry with no limit, so 5 s is a wide margin and too short a value would
cost a retry, not the run."""

# A lost node is noticed in about 3 s rather than Ray's default of about 30.
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_timeout_ms": 1000, "health_check_failure_threshold": 3}


def start_cluster(worker_nodes: int) -> tuple[Cluster, list]:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": 300 * 2**20,
                                                            "_system_config": HEALTH_CHECKS})
    nodes = [cluster.add_node(**NODE) for _ in range(worker_nodes)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster, nodes


def rule_data(rows: int = 1200) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    x = rng.normal(size=rows)
    return pd.DataFrame({"x": x, "c": rng.choice(list("abcd"), rows), "y": x > 0})


def config(workdir: Path, trainer: dict, epochs: int, **backend) -> dict:
    return {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
            "output_features": [{"name": "y", "type": "binary"}],
            "trainer": {"epochs": epochs, "batch_size": 32, "early_stop": -1, "learning_rate": 0.01},
            "backend": {"type": "ray", "cache_dir": str(workdir / "cache"),
                        "trainer": {"resources_per_worker": {"CPU": 1, "trainer": 1}, **trainer}, **backend}}


def worker_nodes_of(run_logs: dict[str, str], world_size: int) -> dict[int, str]:
    """{rank: node id} of the workers of a group of ``world_size``, from the workers' logs (each
    says where it runs; a log appended across restarts says it once per start)."""
    placed = {}
    for text in run_logs.values():
        for line in text.splitlines():
            words = line.split()
            if "worker" in words and "rank" in words and f"of {world_size} on node" in line:
                placed.setdefault(int(words[words.index("rank") + 1]), words[words.index("node") + 1])
    return placed


class HoldTheGroup:
    """The trainer's evaluation hook, on every worker: it holds a group at an evaluation (after
    its checkpoint) until the scenario has done what the group must see, so that the epochs
    cannot run out first however fast they go: the first group of two, once the node it loses
    has its checkpoint, until that node is gone; the group of one until Ray Train replaces it by a
    group of two (on the added node). The watcher marks each event with a file in ``flags``."""

    def __init__(self, flags: Path):
        self.flags = flags

    def __call__(self, record: dict, strategy) -> None:
        if strategy.world_size == 2 and (self.flags / "noticed").exists():
            self._until(lambda: (self.flags / "removed").exists())
        elif strategy.world_size == 1:
            self._until(lambda: False)  # Ray Train stops this group to start a larger one

    @staticmethod
    def _until(done) -> None:
        deadline = time.monotonic() + HOLD_S
        while time.monotonic() < deadline and not done():
            time.sleep(0.2)


def lose_and_regain_a_node(workdir: Path, cluster: Cluster, nodes: list, endpoint: str, bucket: str) -> dict:
    """An elastic group ([1, 2], SPREAD) whose run directory is a bucket: one worker node is
    removed (its raylet and workers killed) after the first checkpoint, and a new one added once
    the group has gone on without it."""
    import s3fs

    from plait import Model

    credentials = {"key": "plait-test-key", "secret": "plait-test-secret-value", "endpoint_url": endpoint}
    fs = s3fs.S3FileSystem(key=credentials["key"], secret=credentials["secret"], client_kwargs={"endpoint_url": endpoint})
    run = f"s3://{bucket}/runs/elastic"
    trainer = {"num_workers": [1, 2], "placement_strategy": "SPREAD", "elastic_resize_interval_s": 2,
               "resources_per_worker": {"CPU": 1, "trainer": 2}}  # one worker per node
    events: list = []
    flags = workdir / "flags"
    flags.mkdir()
    watcher = threading.Thread(target=_remove_then_add,
                               args=(cluster, nodes[-1], fs, f"{bucket}/runs/elastic", events, flags), daemon=True)
    watcher.start()
    model = Model(config(workdir, trainer, epochs=EPOCHS, artifacts_credentials=credentials))
    result = model.train(dataset=rule_data(), run_dir=run, progress_bar=False, on_evaluation=HoldTheGroup(flags))
    events.append(("trained", time.monotonic()))
    watcher.join(timeout=5)
    fs.invalidate_cache()
    rank0 = fs.cat(f"{bucket}/runs/elastic/logs/rank-0.log").decode()
    logs = {p: fs.cat(p).decode() for p in fs.find(f"{bucket}/runs/elastic/logs")}
    first_group = {rank: node for rank, node in worker_nodes_of(logs, world_size=2).items()}
    return {"first_group_nodes": first_group, "events": [(what, round(when - events[0][1], 1)) for what, when in events], "restarts": result.restarts, "epochs": [r["epoch"] for r in result.training_statistics],
            "rank0_log": rank0, "local_run_dir": str(Path("runs").exists()),
            "accuracy": model.evaluate(rule_data(), split="test")["y"]["accuracy"]}


def _remove_then_add(cluster: Cluster, node, fs, run: str, events: list, flags: Path) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not fs.exists(f"{run}/checkpoints/latest.json"):
        time.sleep(0.2)
        fs.invalidate_cache()
    events.append(("checkpoint seen", time.monotonic()))
    _drain_for_preemption(cluster, node)
    events.append(("drained", time.monotonic()))
    _wait_for_line(fs, f"{run}/logs/rank-0.log", b"A checkpoint was asked for", deadline)
    events.append(("checkpoint on notice", time.monotonic()))
    (flags / "noticed").touch()
    cluster.remove_node(node, allow_graceful=False)
    events.append(("removed", time.monotonic()))
    (flags / "removed").touch()
    _wait_for_line(fs, f"{run}/logs/rank-0.log", b"2 worker(s); 1 now", deadline)  # it went on without it
    events.append(("went on without it", time.monotonic()))
    # A node of its own process (`ray start --block`): Cluster.add_node sets signal handlers,
    # which only the main thread may, and this thread is not it.
    node = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "ray"), "start", "--block", f"--address={cluster.address}", "--num-cpus=2",
                             f"--resources={json.dumps(NODE['resources'])}", f"--object-store-memory={NODE['object_store_memory']}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ADDED.append(node)
    events.append(("added", time.monotonic()))


def _drain_for_preemption(cluster: Cluster, node) -> None:
    """Ray's preemption notice for ``node`` (what a cloud's spot reclaim turns into), with a
    deadline a minute away."""
    from ray.core.generated import autoscaler_pb2

    gcs = ray._raylet.GcsClient(address=cluster.address)
    reason = autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION")
    accepted, _ = gcs.drain_node(node.node_id, reason, "spot instance reclaimed", int(time.time() * 1000) + 60_000)
    assert accepted, "the drain request was rejected"


def _wait_for_line(fs, path: str, text: bytes, deadline: float) -> None:
    while time.monotonic() < deadline:
        fs.invalidate_cache()
        if fs.exists(path) and text in fs.cat(path):
            return
        time.sleep(0.3)
    raise TimeoutError(f"{text!r} never appeared in {path}")


def preprocess_and_predict(workdir: Path, cluster: Cluster, nodes: list, endpoint: str, bucket: str) -> dict:
    """Preprocessing with Dask tasks on several nodes, and a Ray Data prediction job, against
    the local backend on the same data: the cache's bytes and the predictions."""
    from plait import Model

    path = workdir / "data.parquet"
    rule_data(4000).to_parquet(path)
    local = Model({**config(workdir, {}, epochs=1), "backend": {"type": "local", "cache_dir": str(workdir / "local")}})
    on_ray = Model({**config(workdir, {}, epochs=1), "backend": {"type": "ray", "cache_dir": str(workdir / "ray"),
                                                                "processor": {"type": "dask", "parallelism": 8}}})
    caches = {name: _split_bytes(model.preprocess(str(path))) for name, model in (("local", local), ("ray", on_ray))}
    local.train(dataset=str(path), progress_bar=False)
    saved = local.save(workdir / "model")
    ray_predictions = Model.load(saved, backend="ray").predict(str(path))
    local_predictions = Model.load(saved, backend="local").predict(str(path))
    return {"same_cache": caches["local"] == caches["ray"], "cache_files": len(caches["ray"]),
            "same_predictions": ray_predictions.equals(local_predictions), "rows": len(ray_predictions),
            "nodes": sum(1 for n in ray.nodes() if n["Alive"])}


def _split_bytes(preprocessed) -> list[bytes]:
    """The contents of the cache's split files, in order (the cache folders differ, not the names)."""
    files = sorted((f for s in ("training", "validation", "test") for f in preprocessed.split_files(s)),
                   key=lambda f: Path(f).name)
    return [_read_bytes(preprocessed.fs, f) for f in files]


def _read_bytes(fs, path: str) -> bytes:
    with fs.open(path, "rb") as handle:
        return handle.read()


SCENARIOS = {"preprocess_and_predict": preprocess_and_predict,
             "lose_and_regain_a_node": lose_and_regain_a_node}  # last: it changes the cluster

if __name__ == "__main__":
    workdir, endpoint, bucket = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.environ.setdefault("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", START_TIMEOUT_S)
    started = time.monotonic()
    cluster, nodes = start_cluster(worker_nodes=2)
    outcomes = {"cluster_start_s": time.monotonic() - started}
    for name, scenario in SCENARIOS.items():
        began = time.monotonic()
        folder = workdir / name
        folder.mkdir()
        outcomes[name] = scenario(folder, cluster, nodes, endpoint, bucket)
        outcomes[name]["seconds"] = time.monotonic() - began
    (workdir / "result.json").write_text(json.dumps(outcomes))
    ray.shutdown()
    for process in ADDED:
        process.terminate()
        process.wait(timeout=30)
    cluster.shutdown()

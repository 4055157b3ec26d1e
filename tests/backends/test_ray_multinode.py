"""A Ray cluster of several nodes on this machine (each node its own raylet and resources),
started for each test in a process of its own (see ``multinode_cluster.py``): workers spread
over nodes, a node lost mid-training, and preprocessing and prediction with tasks on several
nodes against the local backend."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("multinode_cluster.py")
EPOCHS = 16
"""The elastic run's epochs (``multinode_cluster.EPOCHS``)."""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, s3_server):
    """Every scenario, run once on one cluster of a head and two worker nodes."""
    import boto3

    workdir = tmp_path_factory.mktemp("multinode")
    bucket = "plait-multinode"
    boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="plait-test-key",
                 aws_secret_access_key="plait-test-secret-value", region_name="us-east-1").create_bucket(Bucket=bucket)
    # RAY_ADDRESS unset: the script starts its own cluster and must not join the session's. A
    # temporary folder of its own (short: Ray's socket paths live there): the cluster's address
    # file must not point later runs on this machine at it. Ray Train's preemption watcher on, as
    # users have it (the session cluster's tests turn it off: tests/conftest.py).
    session_only = ("RAY_ADDRESS", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER")
    env = {k: v for k, v in os.environ.items() if k not in session_only}
    env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="plait-mn-", dir="/tmp")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(SCRIPT), str(workdir), s3_server, bucket], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads((workdir / "result.json").read_text())


def test_spread_places_the_workers_on_different_nodes(outcomes):
    placed = outcomes["lose_and_regain_a_node"]["first_group_nodes"]
    assert sorted(placed) == ["0", "1"] and len(set(placed.values())) == 2, placed


def test_a_lost_node_leaves_an_elastic_group_training_and_a_new_one_grows_it(outcomes):
    """No shared filesystem: the run directory is a bucket. After its first checkpoint the group
    of two gets a preemption notice for one of its nodes and saves a checkpoint; the node is
    then removed, the group goes on with one worker from the checkpoint in the bucket, and grows
    back to two when a node is added; the run finishes every epoch once."""
    outcome = outcomes["lose_and_regain_a_node"]
    assert [event for event, _ in outcome["events"]] == ["checkpoint seen", "drained", "checkpoint on notice", "removed",
                                                         "went on without it", "added", "trained"], outcome["events"]
    assert outcome["epochs"] == list(range(1, EPOCHS + 1)), "every epoch recorded once: resumed, not restarted"
    log = outcome["rank0_log"]
    # Who restarts the smaller group varies: plait's driver (a worker died), or Ray Train itself
    # (it saw the drain and counts the loss as a preemption). Either way it resumes from a checkpoint.
    assert all(restart["resumed_from_step"] for restart in outcome["restarts"]), outcome["restarts"]
    resumed = [line for line in log.splitlines() if "Resumed from s3://" in line]
    assert resumed and all(" step 0)" not in line for line in resumed), log[-3000:]
    assert "saved by 2 worker(s); 1 now" in log, log[-3000:]
    assert "saved by 1 worker(s); 2 now" in log, log[-3000:]
    assert outcome["accuracy"] > 0.9


def test_preprocessing_and_prediction_on_several_nodes_match_the_local_backend(outcomes):
    outcome = outcomes["preprocess_and_predict"]
    assert outcome["nodes"] == 3
    assert outcome["same_cache"], "the cache's split files differ from the local backend's"
    assert outcome["cache_files"] >= 3
    assert outcome["same_predictions"] and outcome["rows"] == 4000

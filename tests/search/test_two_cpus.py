"""On a 2-CPU Ray cluster, a search whose trials are 2-worker DDP groups finishes, reports every
evaluation, and its whole search directory is on object storage.

A trial's driver and worker holding both CPUs would leave none for the Ray Data read tasks
that feed the worker, and the search would hang (Ludwig #1441, #2465, #2709). The search runs in
a process of its own that starts its own 2-CPU Ray (the session's cluster has 4), with S3
credentials in its environment (the only way a search takes them: Tune saves the filesystem it
is given into the bucket), against the session's S3 server on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """
import json, logging, sys
import ray
logging.getLogger("plait").addHandler(logging.StreamHandler())
logging.getLogger("plait").setLevel(logging.INFO)
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
import plait
result = plait.hyperopt(json.loads(sys.argv[1]), sys.argv[2], output_directory=sys.argv[3])
print(json.dumps({"statuses": [t["status"] for t in result.trials], "model": result.best["model_path"],
                  "epochs": [h["epoch"] for h in result.trials[0]["history"]], "score": result.trials[0]["metric_score"],
                  "scores": [h["metric_score"] for h in result.trials[0]["history"]]}))
"""


def test_a_worker_group_search_on_two_cpus_finishes_in_a_bucket(search_config, table, s3_bucket, env_s3fs):
    import s3fs

    bucket, credentials = s3_bucket
    config = search_config({"trainer.learning_rate": {"space": "grid_search", "values": [0.01]}},
                           trainer={"epochs": 2}, backend={"type": "ray", "trainer": {"num_workers": 2,
                                                                                      "strategy": "ddp"}})
    ray_tmp = tempfile.mkdtemp(prefix="plait-2cpu-", dir="/tmp")  # no address file pointing at the session's Ray
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=ray_tmp, RAY_AUTH_MODE="disabled", AWS_ACCESS_KEY_ID=credentials["key"],
               AWS_SECRET_ACCESS_KEY=credentials["secret"], AWS_ENDPOINT_URL=credentials["endpoint_url"],
               AWS_DEFAULT_REGION="us-east-1")
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(config), table, f"s3://{bucket}/results"],
                              env=env, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["statuses"] == ["completed"] and outcome["epochs"] == [1, 2]  # a report per evaluation
    assert outcome["score"] == max(outcome["scores"])  # its best evaluation
    assert "each trial drives a Ray Train group of 2 worker(s) x (0.5 CPU) from a driver (0.5 CPU)" in done.stderr

    fs = s3fs.S3FileSystem(key=credentials["key"], secret=credentials["secret"],
                           client_kwargs={"endpoint_url": credentials["endpoint_url"]})
    search = f"{bucket}/results/hyperopt_run_0"
    assert outcome["model"].startswith(f"s3://{search}/trials/")
    files = fs.find(search)
    assert f"{search}/hyperopt_statistics.json" in files
    assert any("/logs/rank-0.log" in f for f in files) and any("/logs/rank-1.log" in f for f in files)
    assert not any(credentials["secret"].encode() in fs.cat(f) for f in files)  # tuner.pkl included

"""The multi-node scenarios (``multinode_cluster.py``), started in the background.

They take about three minutes, most of it waiting on Ray: a node's start, a lost node's
detection, a worker group's restart. Started with the first test of this folder, when
``test_ray_multinode.py`` is among the tests to run, they overlap the tests before it instead of
adding their time to the session's; its tests wait for the outcome.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("multinode_cluster.py")
BUCKET = "plait-multinode"
TIMEOUT_S = 600


class MultinodeRun:
    """The scenarios' process: its own Ray cluster (RAY_ADDRESS unset: it must not join the
    session's), in a temporary folder of its own (short: Ray's socket paths live there), so that
    its address file points no later run on this machine at it."""

    def __init__(self, workdir: Path, s3_endpoint: str):
        import boto3

        boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="plait-test-key",
                     aws_secret_access_key="plait-test-secret-value", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        self.workdir = workdir
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env["RAY_TMPDIR"] = self.ray_tmp = tempfile.mkdtemp(prefix="plait-mn-", dir="/tmp")
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]), env.get("PYTHONPATH", "")])
        self.log = open(workdir / "script.log", "w")  # noqa: SIM115 (open while the process runs)
        self.process = subprocess.Popen([sys.executable, str(SCRIPT), str(workdir), s3_endpoint, BUCKET], cwd=workdir,
                                        env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def outcomes(self) -> dict:
        """The scenarios' outcomes, once the process has ended."""
        returncode = self.process.wait(timeout=TIMEOUT_S)
        self.log.flush()
        assert returncode == 0, (self.workdir / "script.log").read_text()[-6000:]
        return json.loads((self.workdir / "result.json").read_text())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.ray_tmp, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def multinode_run(request, tmp_path_factory):
    if not any(item.path.name == "test_ray_multinode.py" for item in request.session.items):
        yield None
        return
    run = MultinodeRun(tmp_path_factory.mktemp("multinode"), request.getfixturevalue("s3_server"))
    yield run
    run.stop()

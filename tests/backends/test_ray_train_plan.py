"""The Ray Train plan (workers, resources, GPU use) and the checks made on the driver before
any worker starts: pure functions of the settings and the cluster's resources."""

from __future__ import annotations

import pytest

from plait.backends.ray.train import _epochs_to_run, plan
from plait.config.backend import DeepSpeedConfig, DistributedTrainerConfig
from plait.config.trainer import TrainerConfig
from plait.errors import BackendError, ConfigError
from plait.training.strategies import check_strategy


def test_a_cpu_cluster_gets_one_worker_that_leaves_a_cpu_for_reads():
    assert plan(DistributedTrainerConfig(), {"CPU": 2}) == {
        "num_workers": 1, "use_gpu": False, "resources_per_worker": {"CPU": 1.0}}
    assert plan(DistributedTrainerConfig(num_workers=2), {"CPU": 2})["resources_per_worker"] == {"CPU": 0.5}


def test_a_gpu_cluster_gets_a_worker_per_gpu():
    assert plan(DistributedTrainerConfig(), {"CPU": 16, "GPU": 4}) == {
        "num_workers": 4, "use_gpu": True, "resources_per_worker": {"CPU": 1.0, "GPU": 1.0}}


def test_use_gpu_without_a_gpu_says_what_to_change():
    with pytest.raises(BackendError, match="no GPU; set it to false"):
        plan(DistributedTrainerConfig(use_gpu=True), {"CPU": 8})


def test_a_fraction_of_a_gpu_is_for_one_worker_only():
    settings = {"use_gpu": True, "resources_per_worker": {"CPU": 1, "GPU": 0.5}}
    assert plan(DistributedTrainerConfig(num_workers=1, **settings), {"CPU": 4, "GPU": 1})["num_workers"] == 1
    with pytest.raises(BackendError, match="NCCL refuses"):
        plan(DistributedTrainerConfig(num_workers=2, **settings), {"CPU": 4, "GPU": 1})


def test_deepspeed_settings_are_refused_on_the_driver():
    both = DeepSpeedConfig(fp16={"enabled": True}, bf16={"enabled": True})
    with pytest.raises(ConfigError, match="fp16 and bf16 are both enabled"):
        check_strategy(both, TrainerConfig())
    check_strategy(DeepSpeedConfig(), TrainerConfig())  # the defaults pass


@pytest.mark.parametrize(("trainer", "batches", "epochs"), [
    ({"epochs": 7}, 10, 7),
    ({"train_steps": 25}, 10, 3),
    ({"train_steps": 25, "gradient_accumulation_steps": 4}, 10, 9),  # 3 steps per epoch
])
def test_epochs_the_loader_reads_ahead_for(trainer, batches, epochs):
    assert _epochs_to_run(TrainerConfig(**trainer), batches) == epochs

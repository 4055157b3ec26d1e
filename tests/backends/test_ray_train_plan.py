"""The Ray Train plan (workers, resources, GPU use) and the checks made on the driver before
any worker starts: pure functions of the settings and the cluster's resources."""

from __future__ import annotations

import os

import pytest

from plait.backends.ray.cluster import Unschedulable, room_for
from plait.backends.ray.train import plan
from plait.config.backend import DeepSpeedConfig, DistributedTrainerConfig
from plait.config.trainer import TrainerConfig
from plait.errors import BackendError, ConfigError
from plait.training.sizes import TrainingSizes
from plait.training.strategies import StepPlan, check_strategy


def test_a_cpu_cluster_gets_one_worker_that_leaves_a_cpu_for_reads():
    assert plan(DistributedTrainerConfig(), {"CPU": 2}) == {
        "num_workers": 1, "min_workers": 1, "use_gpu": False, "resources_per_worker": {"CPU": 1.0},
        "placement_strategy": "PACK"}
    assert plan(DistributedTrainerConfig(num_workers=2), {"CPU": 2})["resources_per_worker"] == {"CPU": 0.5}


def test_a_gpu_cluster_gets_a_worker_per_gpu():
    assert plan(DistributedTrainerConfig(), {"CPU": 16, "GPU": 4}) == {
        "num_workers": 4, "min_workers": 4, "use_gpu": True, "resources_per_worker": {"CPU": 1.0, "GPU": 1.0},
        "placement_strategy": "PACK"}


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
        check_strategy(both, StepPlan(batch_size=4))
    check_strategy(DeepSpeedConfig(), StepPlan(batch_size=4))  # the defaults pass


@pytest.mark.parametrize(("trainer", "batches", "epochs"), [
    ({"epochs": 7}, 10, 7),
    ({"train_steps": 25}, 10, 3),
    ({"train_steps": 25, "gradient_accumulation_steps": 4}, 10, 9),  # 3 steps per epoch
])
def test_epochs_the_loader_reads_ahead_for(trainer, batches, epochs):
    sizes = TrainingSizes.of(TrainerConfig(batch_size=10, **trainer), training_rows=10 * batches)
    assert sizes.epochs_to_run(workers=1) == epochs


# ---- room on the cluster: a group Ray could never place is refused before Ray Train waits on it ----

def test_a_group_larger_than_the_cluster_is_refused_with_what_was_asked_and_what_exists():
    settings = DistributedTrainerConfig(num_workers=8, resources_per_worker={"CPU": 1})
    with pytest.raises(Unschedulable) as info:
        plan(settings, {"CPU": 4}, nodes=[{"CPU": 4.0, "memory": 1e9}])
    assert str(info.value) == (
        "backend.trainer: the worker group needs 8 x (1 CPU), but this Ray cluster has room for 4: a worker runs "
        "on one node, and the cluster has 1 node with 4 CPU. Lower backend.trainer.num_workers or "
        "backend.trainer.resources_per_worker, or add nodes")


def test_a_worker_must_fit_on_one_node_not_in_the_cluster_total():
    settings = DistributedTrainerConfig(num_workers=1, resources_per_worker={"CPU": 4})
    two_small_nodes = [{"CPU": 2.0}, {"CPU": 2.0}]
    with pytest.raises(Unschedulable, match="has room for 0: .* 2 nodes with 2 CPU. Lower backend.trainer.resources_per"):
        plan(settings, {"CPU": 4}, nodes=two_small_nodes)
    assert plan(settings, {"CPU": 6}, nodes=[*two_small_nodes, {"CPU": 4.0}])["num_workers"] == 1


def test_workers_spread_over_nodes_and_fractions_add_up():
    spread = DistributedTrainerConfig(num_workers=3, resources_per_worker={"CPU": 2})
    assert plan(spread, {"CPU": 7}, nodes=[{"CPU": 3.0}, {"CPU": 4.0}])["num_workers"] == 3  # 1 + 2
    tenths = DistributedTrainerConfig(num_workers=10, resources_per_worker={"CPU": 0.1})
    assert plan(tenths, {"CPU": 1}, nodes=[{"CPU": 1.0}])["num_workers"] == 10


def test_the_defaults_fit_a_small_cluster_and_a_huge_group_does_not():
    assert plan(DistributedTrainerConfig(num_workers=8), {"CPU": 4}, nodes=[{"CPU": 4.0}])["num_workers"] == 8
    with pytest.raises(Unschedulable, match=r"needs 100 x \(0.1 CPU\)"):  # 0.1 CPU is the least a worker gets
        plan(DistributedTrainerConfig(num_workers=100), {"CPU": 4}, nodes=[{"CPU": 4.0}])


def test_a_custom_resource_no_node_has_is_named():
    settings = DistributedTrainerConfig(num_workers=1, resources_per_worker={"CPU": 1, "TPU": 1})
    with pytest.raises(Unschedulable, match="1 node with 8 CPU, 0 TPU"):
        plan(settings, {"CPU": 8}, nodes=[{"CPU": 8.0}])


def test_room_counts_whole_workers_per_node():
    assert room_for({"CPU": 1, "GPU": 1}, [{"CPU": 8.0, "GPU": 2.0}, {"CPU": 1.0, "GPU": 4.0}, {"CPU": 4.0}]) == 3
    assert room_for({"CPU": 0}, []) >= 1_000_000  # a worker that asks for nothing fits anywhere


def test_an_elastic_group_is_refused_only_when_its_minimum_does_not_fit():
    nodes = [{"CPU": 2.0}, {"CPU": 2.0}]
    settings = DistributedTrainerConfig(num_workers=[2, 8], resources_per_worker={"CPU": 2}, placement_strategy="SPREAD")
    scaling = plan(settings, {"CPU": 4}, nodes)
    assert (scaling["min_workers"], scaling["num_workers"], scaling["placement_strategy"]) == (2, 8, "SPREAD")
    with pytest.raises(Unschedulable):
        plan(DistributedTrainerConfig(num_workers=[3, 8], resources_per_worker={"CPU": 2}), {"CPU": 4}, nodes)


@pytest.mark.parametrize("workers", [(2, 2), (1, 2)])
def test_ray_trains_controller_settings_hold_for_the_run_and_yield_to_the_users(monkeypatch, workers):
    from plait.backends.ray.train import _controller_settings

    monkeypatch.delenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", raising=False)
    monkeypatch.setenv("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", "90")
    with _controller_settings({"min_workers": workers[0], "num_workers": workers[1]}):
        assert os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.5"
        assert os.environ["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] == "90", "the user's setting"
    assert "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S" not in os.environ
    assert os.environ["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] == "90"
    monkeypatch.delenv("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S")
    with _controller_settings({"min_workers": workers[0], "num_workers": workers[1]}):
        elastic = workers[0] != workers[1]
        assert os.environ.get("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S") == ("20" if elastic else None)
    assert "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S" not in os.environ

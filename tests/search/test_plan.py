"""Sizing trials to the cluster: no search may wait forever on its own resources."""

import pytest

from plait.config import load_config
from plait.errors import ConfigError
from plait.search.plan import DATA_CPUS, plan_trials, plan_trials_now

LR = {"trainer.learning_rate": {"space": "uniform", "lower": 0.01, "upper": 0.1}}


def config(backend: dict | None = None, **executor):
    return load_config({"input_features": [{"name": "x", "type": "number"}],
                        "output_features": [{"name": "y", "type": "binary"}],
                        "backend": backend or {"type": "local"},
                        "hyperopt": {"parameters": LR, "executor": executor}})


def test_one_process_trials_fill_the_cluster():
    plan = plan_trials(config(cpu_resources_per_trial=2), [{"CPU": 4}, {"CPU": 5}])
    assert (plan.worker_group, plan.trial_resources, plan.max_concurrent) == (False, {"CPU": 2.0, "GPU": 0.0}, 4)


def test_a_worker_group_trial_on_two_cpus_leaves_room_for_data_loading():
    plan = plan_trials(config({"type": "ray", "trainer": {"num_workers": 1}}), [{"CPU": 2}])
    assert plan.worker_group and plan.trial_resources == {"CPU": 0.5} and plan.worker_resources == {"CPU": 1.0}
    assert plan.max_concurrent == 1
    used = plan.trial_resources["CPU"] + plan.num_workers * plan.worker_resources["CPU"]
    assert 2 - used == DATA_CPUS


def test_two_worker_trials_on_eight_cpus():
    plan = plan_trials(config({"type": "ray", "trainer": {"num_workers": 2}}), [{"CPU": 8}])
    assert (plan.trial_resources, plan.worker_resources, plan.max_concurrent) == ({"CPU": 1.0}, {"CPU": 1.0}, 2)


def test_more_concurrent_worker_group_trials_than_fit_are_refused_with_the_number_that_fits():
    with pytest.raises(ConfigError, match="max_concurrent_trials: got 3, but this Ray cluster holds 2 trial"):
        plan_trials(config({"type": "ray", "trainer": {"num_workers": 2}}, max_concurrent_trials=3), [{"CPU": 8}])


def test_a_trial_no_node_can_hold_is_refused():
    with pytest.raises(ConfigError, match="a trial needs 64 CPU, but no node of this Ray cluster has room"):
        plan_trials(config(cpu_resources_per_trial=64), [{"CPU": 4}])
    with pytest.raises(ConfigError, match="one trial needs a driver"):
        plan_trials(config({"type": "ray", "trainer": {"num_workers": 4, "resources_per_worker": {"CPU": 1}}}),
                    [{"CPU": 4}])


def test_gpus_on_a_cluster_without_any_are_refused():
    with pytest.raises(ConfigError, match="gpu_resources_per_trial: got 1, but this Ray cluster has no GPU"):
        plan_trials(config(gpu_resources_per_trial=1), [{"CPU": 4}])


def test_trials_are_sized_by_what_is_free_now_and_wait_for_other_work(monkeypatch):
    import plait.search.plan as plan_module

    monkeypatch.setattr(plan_module, "FREE_WAIT_S", 0.5)
    monkeypatch.setattr(plan_module, "FREE_POLL_S", 0.01)
    total = [{"CPU": 8}]
    busy = config(cpu_resources_per_trial=2)
    assert plan_trials_now(busy, lambda: total, lambda: [{"CPU": 4}]).max_concurrent == 2  # 4 CPUs held elsewhere
    frees = iter([[{"CPU": 1}], [{"CPU": 1}], [{"CPU": 8}]])  # the other work ends while the search waits
    assert plan_trials_now(busy, lambda: total, lambda: next(frees)).max_concurrent == 4
    with pytest.raises(ConfigError, match=r"other work on this Ray cluster holds 7 CPU of it now: `ray status`"):
        plan_trials_now(busy, lambda: total, lambda: [{"CPU": 1}])

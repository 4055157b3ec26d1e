"""The backend section: one variant per type, each taking only the settings it uses, and the
type chosen on the command line or in the API overriding the file's."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest
import yaml

from plait import ConfigError, Model
from plait.cli import main
from plait.config import load_config, with_backend_type, with_command_line
from plait.config.render import resolved_dict

from small_config import FEATURES  # a module beside this file

RAY_SETTINGS = {"processor": {"type": "modin"}, "trainer": {"num_workers": 2, "strategy": "fsdp"},
                "loader": {"fully_executed": False}}


@pytest.mark.parametrize(("backend", "problem"), [
    ({"type": "local", "processor": {"type": "dask"}},
     "backend.processor: only used by type ray; remove it, or set backend.type to ray (or auto)"),
    ({"type": "local", "loader": {"fully_executed": True}},
     "backend.loader: only used by type ray; remove it, or set backend.type to ray (or auto)"),
    ({"type": "local", "trainer": {"num_workers": 2}},
     "backend.trainer: only used by types ray, torchrun, horovod, deepspeed; remove it, or set backend.type to one "
     "of them (or auto)"),
    ({"type": "torchrun", "processor": {"type": "dask"}},
     "backend.processor: only used by type ray; remove it, or set backend.type to ray (or auto)"),
    ({"type": "horovod", "loader": {}},
     "backend.loader: only used by type ray; remove it, or set backend.type to ray (or auto)"),
])
def test_a_setting_the_backend_type_ignores_is_refused_with_the_types_that_use_it(refused, backend, problem):
    assert refused(backend=backend) == problem


@pytest.mark.parametrize("backend", [
    {"type": "local", "cache_dir": "/tmp/c", "cache_credentials": "~/creds.json"},
    {"type": "ray", **RAY_SETTINGS},
    {"type": "deepspeed", "trainer": {"strategy": "deepspeed", "num_workers": 2}},
    {**RAY_SETTINGS},  # no type: auto, which may become ray or a launcher, takes every setting
])
def test_each_type_takes_its_own_settings(validate, backend):
    code, out, err = validate(backend=backend)
    assert code == 0, err
    shown = yaml.safe_load(out)["backend"]
    assert shown["type"] == backend.get("type", "auto")
    assert {k: shown[k] for k in backend if k in ("processor", "loader")} == {
        k: {**shown[k], **v} for k, v in backend.items() if k in ("processor", "loader")}


def test_a_local_backend_shows_only_its_settings(validate):
    code, out, err = validate(backend={"type": "local", "cache_dir": "/tmp/c"})
    assert code == 0, err
    assert yaml.safe_load(out)["backend"] == {"type": "local", "cache_dir": "/tmp/c", "cache_credentials": None,
                                              "artifacts_credentials": None}


def test_the_backend_may_be_given_by_name():
    assert load_config({**FEATURES, "backend": "ray"}).backend.type == "ray"


def test_a_backend_that_is_neither_a_name_nor_a_section_lists_the_types(refused):
    assert refused(backend=5) == ("backend: got 5; give a backend type (auto, local, ray, torchrun, horovod, deepspeed) "
                                  "or a section with a type and its settings")


def test_an_unknown_backend_type_suggests_the_right_one(refused):
    assert refused(backend={"type": "rayy"}) == "backend.type: unknown type 'rayy'; did you mean ray?"


def test_an_unknown_backend_setting_still_suggests_the_right_one(refused):
    assert refused(backend={"type": "local", "cache_dri": "/c"}) == "backend.cache_dri: unknown field; did you mean cache_dir?"


def test_backend_range_checks(refused):
    assert refused(backend={"type": "ray", "trainer": {"resources_per_worker": {"GPU": -1}}}) == (
        "backend.trainer.resources_per_worker.GPU: Input should be greater than or equal to 0 (got -1)")
    assert refused(backend={"type": "ray", "trainer": {"num_workers": 0}}).startswith("backend.trainer.num_workers: ")


# ---- overriding the type -----------------------------------------------------------------------

CREDENTIALS = {"key": "K-1", "secret": "S-2"}


def ray_config() -> dict:
    return {**FEATURES, "backend": {"type": "ray", "cache_dir": "s3://b/c", "cache_credentials": CREDENTIALS, **RAY_SETTINGS}}


def test_switching_to_local_drops_the_ray_settings_and_keeps_the_cache(caplog):
    with caplog.at_level(logging.DEBUG, logger="plait"):
        config = with_backend_type(load_config(ray_config()), "local")
    assert config.backend.type == "local"
    assert config.backend.cache_credentials == CREDENTIALS  # the real ones, not the hidden ***
    assert resolved_dict(config)["backend"] == {"type": "local", "cache_dir": "s3://b/c",
                                                "cache_credentials": {"key": "***", "secret": "***"},
                                                "artifacts_credentials": None}
    assert "backend.type local (was ray): ignoring backend.loader, backend.processor, backend.trainer" in caplog.text


def test_the_command_line_backend_and_cache_dir_are_validated_with_the_config():
    """--backend and --cache-dir go into the raw config, which is then validated once: the new
    type's unused settings dropped, as with_backend_type drops them."""
    source = ray_config()
    overridden = with_command_line(source, "local", cache_dir="/tmp/elsewhere")
    config = load_config(overridden)
    assert (config.backend.type, config.backend.cache_dir) == ("local", "/tmp/elsewhere")
    assert config.backend.cache_credentials == CREDENTIALS and source == ray_config()  # the source is left as it was
    assert with_command_line(source) is source
    with pytest.raises(ConfigError, match="unknown backend type 'rey'; valid types are"):
        with_command_line(source, "rey")


def test_switching_to_a_launcher_keeps_the_trainer_section():
    config = with_backend_type(load_config(ray_config()), "torchrun")
    assert (config.backend.type, config.backend.trainer.num_workers, config.backend.trainer.strategy.type) == (
        "torchrun", 2, "fsdp")
    assert not hasattr(config.backend, "processor")


def test_an_unknown_backend_in_the_api_names_the_valid_types():
    with pytest.raises(ConfigError) as info:
        Model(ray_config(), backend="rayy")
    assert info.value.problems == [
        "backend.type: unknown backend type 'rayy'; valid types are: auto, local, ray, torchrun, horovod, deepspeed"]


def test_the_command_line_backend_trains_a_config_with_ray_settings(write_config, make_dataset, tmp_path, capsys):
    rows = {"age": list(range(40)), "city": ["a", "b"] * 20, "bought": [i % 3 == 0 for i in range(40)]}
    config = {**ray_config(), "trainer": {"epochs": 1, "batch_size": 8}}
    config["backend"] = {**config["backend"], "cache_dir": str(tmp_path / "cache"), "cache_credentials": None}
    code = main(["train", "--config", write_config(config), "--dataset", make_dataset(rows), "--backend", "local",
                 "--output-directory", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    run_dir = tmp_path / "out" / "experiment_run_0"
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["backend"] == {
        "type": "local", "cache_dir": str(tmp_path / "cache"), "cache_credentials": None, "artifacts_credentials": None}
    assert json.loads((run_dir / "training_statistics.json").read_text())["plait"]["epoch"] == [1]  # one epoch


def test_a_model_saved_with_ray_settings_loads_on_the_local_backend(tmp_path):
    """What a Ray prediction actor does with a model trained on Ray."""
    frame = pd.DataFrame({"age": [float(i) for i in range(40)], "city": ["a", "b"] * 20,
                          "bought": [i % 3 == 0 for i in range(40)]})
    config = {**ray_config(), "trainer": {"epochs": 1, "batch_size": 8}}
    config["backend"] = {**config["backend"], "cache_dir": str(tmp_path / "cache"), "cache_credentials": None}
    model = Model(config, backend="local")
    model.train(dataset=frame, progress_bar=False)
    model.config = with_backend_type(model.config, "ray")  # saved as a Ray run saves it
    model.save(tmp_path / "model")
    assert json.loads((tmp_path / "model" / "model_hyperparameters.json").read_text())["backend"]["type"] == "ray"
    loaded = Model.load(tmp_path / "model", backend="local")
    assert loaded.config.backend.type == "local"
    assert len(loaded.predict(frame.drop(columns=["bought"]))) == 40


# ---- Ludwig's backend keys -----------------------------------------------------------------------

@pytest.mark.parametrize(("backend", "shown"), [
    (None, {"type": "auto"}),  # Ludwig renders a config without a backend as backend: null
    ({"type": "ray", "trainer": {"strategy": "auto"}}, {"trainer": {"strategy": {"type": "ddp"}}}),
    ({"type": "ray", "trainer": {"strategy": {"type": "auto"}}}, {"trainer": {"strategy": {"type": "ddp"}}}),
    ({"type": "ray", "trainer": {"strategy": "accelerate"}}, {"trainer": {"strategy": {"type": "ddp"}}}),
    ({"type": "ray", "trainer": {"use_gpu": True, "strategy": {"type": "deepspeed", "zero_optimization": {
        "stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": False}}, "bf16": {"enabled": True}}}},
     {"trainer": {"strategy": {"zero_optimization": {"offload_optimizer": {"device": "cpu", "pin_memory": False}}}}}),
    ({"type": "ray", "preprocessor_kwargs": {}}, {"preprocessor_kwargs": {}}),
    ({"type": "ray", "trainer": {"nics": None, "logdir": "/l", "max_retries": 1}}, {"trainer": {"max_retries": 1}}),
    ({"type": "local", "credentials": {"cache": {"key": "K"}}}, {"cache_credentials": {"key": "***"}}),
    ({"type": "local", "credentials": {"defaults": "~/c.json", "datasets": None}},
     {"cache_credentials": "~/c.json", "artifacts_credentials": "~/c.json"}),
    ({"type": "local", "credentials": {"artifacts": {"key": "K", "secret": "S"}}},
     {"cache_credentials": None, "artifacts_credentials": {"key": "***", "secret": "***"}}),
])
def test_ludwig_backend_keys_are_accepted_with_their_meaning(validate, backend, shown):
    code, out, err = validate(backend=backend)
    assert code == 0, err
    resolved = yaml.safe_load(out)["backend"]
    assert_contains(resolved, shown)
    assert "credentials" not in resolved  # shown under plait's name, cache_credentials


def assert_contains(resolved: dict, shown: dict) -> None:
    for key, value in shown.items():
        if isinstance(value, dict):
            assert_contains(resolved[key], value)
        else:
            assert resolved[key] == value, key


def test_pin_memory_reaches_deepspeed():
    from plait.training.strategies import StepPlan
    from plait.training.strategies.deepspeed import deepspeed_config

    config = load_config({**FEATURES, "backend": {"type": "ray", "trainer": {"strategy": {
        "type": "deepspeed", "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "pin_memory": False}}}}}})
    zero = deepspeed_config(config.backend.trainer.strategy, StepPlan(batch_size=4))["zero_optimization"]
    assert zero["offload_param"] == {"device": "cpu", "pin_memory": False}
    assert zero["offload_optimizer"] == {"device": "none"}  # pinned: DeepSpeed's default


@pytest.mark.parametrize(("backend", "problem"), [
    ({"type": "dask"}, "backend.type: Ludwig's 'dask' is not implemented in plait; Ludwig lists it but has no such "
                       "backend; use type ray, whose processor.type is dask by default"),
    ({"type": "ray", "processor": {"type": "pandas"}},
     "backend.processor.type: Ludwig's pandas processor (preprocessing in the driver) is plait's backend.type local; "
     "on Ray use dask or modin"),
    ({"type": "ray", "preprocessor_kwargs": {"num_cpu": 4}},
     "backend.preprocessor_kwargs: got {'num_cpu': 4}; plait does not implement this Ludwig setting and accepts only "
     "None or {} (what it does anyway): plait does not reserve CPUs for preprocessing (Ludwig's num_cpu placement "
     "group); its Dask or Modin tasks use the cluster's free CPUs, and processor.parallelism bounds the partitions"),
    ({"type": "local", "preprocessor_kwargs": {}},
     "backend.preprocessor_kwargs: only used by type ray; remove it, or set backend.type to ray (or auto)"),
    ({"type": "ray", "trainer": {"nics": ["eth0"]}},
     "backend.trainer.nics: got ['eth0']; plait does not implement this Ludwig setting and accepts only None (what it "
     "does anyway): choose the network interface in the environment: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME (or "
     "horovodrun --network-interface)"),
    ({"type": "ray", "trainer": {"strategy": {"type": "accelerate", "fsdp_config": {}}}},
     "backend.trainer.strategy: strategy 'accelerate' takes no options here (got fsdp_config); name the strategy "
     "instead: {type: fsdp, ...} or {type: deepspeed, zero_optimization: ...}, and mixed precision with "
     "trainer.use_mixed_precision"),
    ({"type": "ray", "trainer": {"strategy": {"type": "deepspeed", "zero_optimization": {"overlap_comm": True}}}},
     "backend.trainer.strategy.zero_optimization.overlap_comm: a DeepSpeed ZeRO tuning setting plait does not pass on "
     "(it sizes ZeRO-3's buckets from the model and keeps DeepSpeed's defaults otherwise); remove it, or set only "
     "stage, offload_optimizer and offload_param"),
    ({"type": "ray", "trainer": {"strategy": {"type": "deepspeed", "zero_optimization": {
        "offload_optimizer": {"device": "nvme"}}}}},
     "backend.trainer.strategy.zero_optimization.offload_optimizer.device: plait offloads to CPU memory only "
     "(DeepSpeed's NVMe offload needs its compiled async-I/O op, which plait does not build); use cpu"),
    ({"type": "ray", "trainer": {"strategy": {"type": "deepspeed", "zero_optimization": {
        "offload_param": {"nvme_path": "/nvme"}}}}},
     "backend.trainer.strategy.zero_optimization.offload_param.nvme_path: a setting of DeepSpeed's NVMe offload, which "
     "plait does not use (device is none or cpu); remove it"),
    ({"type": "ray", "trainer": {"strategy": {"type": "deepspeed", "fp16": {"enabled": True, "loss_scale": 0}}}},
     "backend.trainer.strategy.fp16.loss_scale: a setting of DeepSpeed's fp16/bf16 loss scaling that plait does not "
     "pass on (DeepSpeed's dynamic loss scaling is used); remove it"),
    ({"type": "ray", "trainer": {"strategy": {"type": "deepspeed", "gradient_accumulation_steps": 4}}},
     "backend.trainer.strategy.gradient_accumulation_steps: set in plait's trainer section, not in the DeepSpeed "
     "section: trainer.gradient_accumulation_steps"),
    ({"type": "local", "credentials": {"datasets": {"key": "SECRET-1"}}},
     "backend.credentials.datasets: plait does not use Ludwig's credentials for datasets (only null is accepted): "
     "plait reads datasets with the storage's own credentials: environment variables (AWS_ACCESS_KEY_ID, "
     "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...) or its config files; remove it"),
    ({"type": "local", "credentials": {"cahce": {}}}, "backend.credentials.cahce: unknown use; did you mean cache?"),
    ({"type": "local", "credentials": {"cache": 5}},
     "backend.credentials.cache: expected storage options (a mapping) or a JSON file's path"),
    ({"type": "local", "cache_credentials": {"key": "A"}, "credentials": {"cache": {"key": "B"}}},
     "backend.cache_credentials: differs from credentials.cache (or credentials.defaults); give the cache "
     "credentials once"),
])
def test_ludwig_backend_keys_plait_does_not_implement_are_refused_with_advice(refused, backend, problem):
    assert refused(backend=backend) == problem

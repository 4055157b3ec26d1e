"""What plait chooses when CUDA is present: the device of each strategy, the process group's
backend, the autocast dtype, and the GPUs it asks Ray for (training workers, Ray Data actors,
Serve replicas).

On the device these are read with the real GPU. In the CPU dry-run ``torch.cuda.is_available``
is made to say True around the choices that only ask it (nothing touches a GPU), so the same
code paths run and their answers are checked: a refactoring that loses NCCL or the GPU
resources fails here, on CPU, in CI. The autocast probe trains for real, on the machine's own
device, and records the ``torch.autocast`` plait opens.
"""

from __future__ import annotations

import contextlib
from unittest import mock

from record import Recorder, StepContext

FP16_SETTING = {"use_mixed_precision": True, "mixed_precision_dtype": "float16"}
"""The trainer settings PROPOSED_PLAIT_CHANGES.md proposes for fp16 autocast with a GradScaler."""


class Captured(Exception):
    """Raised in place of creating a process group, with the backend plait asked for."""


def run(recorder: Recorder, context: StepContext) -> None:
    cuda = contextlib.nullcontext if not context.cpu else cuda_present
    found = {}
    for name, probe in (("local_device", local_device), ("launched_device", launched_device),
                        ("process_group", process_group), ("ray_train_plan", ray_train_plan),
                        ("ray_data_plan", ray_data_plan), ("serve_replica", serve_replica)):
        with cuda():
            found[name] = recorder.part(name, probe)
    found["autocast"] = recorder.part("autocast", autocast, context, {"use_mixed_precision": True}, "bfloat16")
    found["fp16"] = recorder.part("fp16", fp16, context)
    failed = [n for n, v in recorder.data["parts"].items() if v["status"] == "failed"]
    fp16_note = "plait fp16: " + ("yes" if (found["fp16"] or {}).get("plait_supports_fp16") else "not yet (proposed)")
    recorder.summary(("all choices as expected" if not failed else f"unexpected: {', '.join(failed)}") + f"; {fp16_note}")


@contextlib.contextmanager
def cuda_present():
    """torch reports one CUDA device; nothing may actually use it."""
    import torch

    with mock.patch.object(torch.cuda, "is_available", lambda: True), \
            mock.patch.object(torch.cuda, "device_count", lambda: 1), \
            mock.patch.object(torch.cuda, "set_device", lambda device: None):
        yield


def expect(got, wanted, what: str) -> dict:
    if got != wanted:
        raise AssertionError(f"{what}: expected {wanted!r}, got {got!r}")
    return {"got": got}


def local_device() -> dict:
    from plait.training.strategies import get_strategy

    return expect(get_strategy("local").device.type, "cuda", "the local strategy's device")


def launched_device() -> dict:
    from plait.backends.environment import Launch, launched_device

    return expect(launched_device(Launch("torchrun", 1, 2, local_rank=1, master_addr="127.0.0.1")), "cuda:1",
                  "a torchrun process's device (local rank 1)")


def process_group() -> dict:
    """The backend ddp and fsdp ask torch.distributed for on a GPU (caught before it is made)."""
    import torch.distributed as dist

    from plait.training.strategies import get_strategy

    def capture(backend=None, *args, **kwargs):
        raise Captured(backend)

    chosen = {}
    for name in ("ddp", "fsdp"):
        with mock.patch.object(dist, "is_initialized", lambda: False), mock.patch.object(dist, "init_process_group", capture):
            try:
                get_strategy(name, device="cuda:0")
                chosen[name] = "no process group made"
            except Captured as asked:
                chosen[name] = asked.args[0]
    return expect(chosen, {"ddp": "nccl", "fsdp": "nccl"}, "the process group's backend on cuda:0")


def ray_train_plan() -> dict:
    """Ray Train's workers on a cluster with a GPU: one GPU each, so Ray makes an NCCL group
    (Ray's TorchConfig picks nccl when its backend is unset and workers hold GPUs)."""
    from ray.train.torch import TorchConfig

    from plait.backends.ray.train import plan
    from plait.config.backend import DistributedTrainerConfig

    scaling = plan(DistributedTrainerConfig(), {"CPU": 16, "GPU": 1})
    got = {"use_gpu": scaling["use_gpu"], "gpu_per_worker": scaling["resources_per_worker"].get("GPU"),
           "torch_config_backend": TorchConfig().backend}
    return expect(got, {"use_gpu": True, "gpu_per_worker": 1.0, "torch_config_backend": None},
                  "Ray Train's plan on 16 CPUs and 1 GPU")


def ray_data_plan() -> dict:
    from plait.backends.ray.batches import actor_plan
    from plait.config.backend import DistributedTrainerConfig

    scaling = actor_plan(DistributedTrainerConfig(), {"CPU": 16, "GPU": 1})
    got = {"use_gpu": scaling["use_gpu"], "gpu_per_actor": scaling["resources_per_worker"].get("GPU")}
    return expect(got, {"use_gpu": True, "gpu_per_actor": 1.0}, "Ray Data's prediction actors on 16 CPUs and 1 GPU")


def serve_replica() -> dict:
    from plait.config.serve import ServeConfig
    from plait.serving.predictors.plait_model import _device
    from plait.serving.ray_serve import deployment_options

    got = {"num_gpus": deployment_options(ServeConfig(gpus_per_replica=1))["ray_actor_options"]["num_gpus"],
           "local_server_device": _device(ServeConfig())}
    return expect(got, {"num_gpus": 1, "local_server_device": "cuda"}, "a Serve replica's GPU and the server's device")


def autocast(context: StepContext, trainer: dict, dtype: str) -> dict:
    """A tiny training with ``trainer``'s settings, recording each ``torch.autocast`` plait opens
    and each gradient scaler it makes."""
    import numpy as np
    import pandas as pd
    import torch

    from plait import Model

    opened, scalers = [], []
    real_autocast, real_scaler = torch.autocast, torch.amp.GradScaler

    class RecordedAutocast(real_autocast):
        def __init__(self, device_type, dtype=None, *args, **kwargs):
            opened.append((device_type, str(dtype).removeprefix("torch.")))
            super().__init__(device_type, dtype, *args, **kwargs)

    class RecordedScaler(real_scaler):
        def __init__(self, *args, **kwargs):
            scalers.append(kwargs.get("enabled", True))
            super().__init__(*args, **kwargs)

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=300), "c": rng.choice(list("abc"), 300)})
    frame["y"] = frame.x > 0
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}], "trainer": {"epochs": 1, "batch_size": 64, **trainer},
              "backend": {"type": "local", "cache_dir": str(context.work / "probe-cache")}}
    with mock.patch.object(torch, "autocast", RecordedAutocast), mock.patch.object(torch.amp, "GradScaler", RecordedScaler):
        Model(config).train(dataset=frame, progress_bar=False)
    device = "cpu" if context.cpu else "cuda"
    kinds = sorted(set(opened))
    expect(kinds, [(device, dtype)], "the autocast plait opens in training and evaluation")
    return {"autocast": kinds, "grad_scalers": scalers}


def fp16(context: StepContext) -> dict:
    """Whether plait takes fp16 autocast (with a gradient scaler); if it does, its training path."""
    from plait.config import load_config
    from plait.errors import ConfigError

    config = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}],
              "trainer": FP16_SETTING}
    try:
        load_config(config)
    except ConfigError as error:
        return {"plait_supports_fp16": False, "refused_with": str(error)[:300],
                "proposal": "benchmarks/device/PROPOSED_PLAIT_CHANGES.md"}
    found = autocast(context, FP16_SETTING, "float16")
    if True not in found["grad_scalers"]:
        raise AssertionError(f"fp16 autocast without an enabled gradient scaler: {found}")
    return {"plait_supports_fp16": True, **found}

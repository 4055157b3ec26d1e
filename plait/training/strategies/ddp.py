"""DistributedDataParallel: one process per worker, gradients averaged by all-reduce (gloo on
CPU, NCCL on GPU).

The process group comes from whoever launched the workers: Ray Train sets it up before the
training function runs; under torchrun this strategy creates it from the environment
(``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``...) and destroys it at the end.
"""

from __future__ import annotations

import gc
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from plait.training.strategies.base import Strategy


class DDPStrategy(Strategy):
    name = "ddp"

    def __init__(self, config=None, trainer=None, device: str | None = None):
        self.find_unused_parameters = bool(config and config.find_unused_parameters)
        self.owns_group = not dist.is_initialized()
        if self.owns_group:
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        if device is None and torch.cuda.is_available():
            device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        self.device = torch.device(device or "cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.model = None

    def prepare(self, model, optimizer):
        model = model.to(self.device)
        if self.world_size == 1:  # nothing to synchronize: the wrapper would only add its hooks' cost
            return model, optimizer
        ids = [self.device.index] if self.device.type == "cuda" else None
        # Rank 0's initial weights are broadcast when wrapping, so every replica starts equal.
        self.model = DistributedDataParallel(model, device_ids=ids, find_unused_parameters=self.find_unused_parameters)
        return self.model, optimizer

    def backward(self, loss, sync=True):
        # DDP's hooks all-reduce the gradients during the backward pass; on accumulation
        # micro-steps they are only summed locally, and exchanged once before the step.
        if sync or self.model is None:
            loss.backward()
        else:
            with self.model.no_sync():
                loss.backward()

    def all_reduce_sum(self, tensor):
        total = tensor.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    def barrier(self):
        dist.barrier()

    def broadcast_object(self, value):
        """``value`` as the coordinator has it, on every worker."""
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def shutdown(self):
        # Releasing the wrapped model before destroying the group avoids gloo's
        # "terminate called without an active exception" at interpreter exit.
        self.model = None
        gc.collect()
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()

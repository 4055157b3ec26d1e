"""DistributedDataParallel: one process per worker, gradients averaged by all-reduce (gloo on
CPU, NCCL on GPU).

The process group: see ``process_group``.
"""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel

from plait.training.strategies.process_group import ProcessGroupStrategy


class DDPStrategy(ProcessGroupStrategy):
    name = "ddp"

    def __init__(self, config=None, device: str | None = None):
        self.find_unused_parameters = bool(config and config.find_unused_parameters)
        self._join_group(device)
        self.model = None

    def prepare(self, model, optimizer, steps):
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

    def release_model(self):
        self.model = None

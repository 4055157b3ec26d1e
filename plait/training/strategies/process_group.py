"""What ddp, fsdp and deepspeed share: one process per worker in a ``torch.distributed`` group.

The group comes from whoever launched the workers: Ray Train (and the deepspeed launcher, and
the tests) make it before the strategy is built; under torchrun the strategy makes it (torch reads
the launcher's ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``...) and destroys it at the end.
"""

from __future__ import annotations

import gc

import torch
import torch.distributed as dist

from plait.training.strategies.base import Strategy


class ProcessGroupStrategy(Strategy):
    owns_group: bool = False

    def _join_group(self, device: str | None) -> None:
        """Train on ``device`` (the backend picks it: the worker's own GPU, or None for the CPU)
        and join the process group (NCCL on GPU, gloo on CPU)."""
        self.device = torch.device(device or "cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.owns_group = not dist.is_initialized()
        if self.owns_group:
            # NCCL is told the worker's GPU: guessed from the rank, it can hang where ranks and
            # GPUs do not line up (the device check saw torch warn of it on an H200).
            on_gpu = self.device.type == "cuda"
            dist.init_process_group("nccl" if on_gpu else "gloo", **({"device_id": self.device} if on_gpu else {}))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def all_reduce_sum(self, tensor):
        total = tensor.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    def barrier(self):
        dist.barrier()

    def broadcast_object(self, value):
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _release(self) -> None:
        """Drop what holds on to the group (a wrapped model, an engine) before it goes."""
        self.release_model()

    def shutdown(self):
        # Released and garbage collected before the group is destroyed: otherwise about a third
        # of gloo runs abort at exit with "terminate called without an active exception".
        self._release()
        gc.collect()
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()

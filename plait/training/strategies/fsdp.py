"""Fully sharded data parallel (FSDP2, ``torch.distributed.fsdp.fully_shard``): each worker keeps
one slice of every parameter, gradient and optimizer state; a layer's full parameters are
gathered just before its forward and backward and freed again after.

The model is sharded in place, in units gathered one at a time: each block a pretrained
transformer declares indivisible (its decoder layers, say), then each direct child module that
holds parameters (looking through ``ModuleDict``/``ModuleList`` containers, which are never
called), and the root takes whatever parameters are left. ``fully_shard`` replaces the module's
parameters with sharded ``DTensor`` ones, so ``prepare`` points the optimizer at the new ones.

Like ``ddp``, the process group comes from whoever launched the workers (Ray Train), or under
torchrun is created here from the environment and destroyed at the end. World size 1 is sharded
too (a one-rank mesh): the same code path, checkpoint format and CPU offload as with many.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor

from plait.training.strategies.process_group import ProcessGroupStrategy
from plait.training.checkpoint import MODEL_FILE
from plait.training.strategies.state import OPTIMIZER_FILE, StateIO

log = logging.getLogger("plait")

SHARDED_DIR = "sharded"
"""The subfolder of a checkpoint where a sharded checkpoint's files (one per rank) go."""

# Gathered on rank 0 and copied to CPU: the full weights need not fit in accelerator memory.
FULL_ON_RANK0 = StateDictOptions(full_state_dict=True, cpu_offload=True)
# Rank 0 alone reads the file; each tensor is broadcast and every rank keeps only its slice, so
# no other rank ever holds the whole model in memory.
FULL_FROM_RANK0 = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)


class FSDPStrategy(ProcessGroupStrategy):
    name = "fsdp"
    forward_is_collective = True  # every sharded unit all-gathers its parameters in forward
    whole_gradients_in_step = False  # each rank holds a shard of each gradient

    def __init__(self, config=None, device: str | None = None):
        self.state_dict_type = config.state_dict_type if config is not None else "full"
        self._join_group(device)
        self.offload_policy = self._offload_policy(bool(config and config.cpu_offload))
        self.mesh = init_device_mesh(self.device.type, (self.world_size,))
        self.model = None

    @property
    def state(self) -> FSDPState:
        return FSDPState(self)  # the weights and optimizer state are sharded: see FSDPState

    def _offload_policy(self, cpu_offload: bool) -> OffloadPolicy:
        # On a CPU device the parameters already live in CPU memory: offloading would only add
        # copies (and pinned memory needs an accelerator), so the option is ignored there.
        if cpu_offload and self.device.type == "cpu":
            log.info("fsdp: cpu_offload has no effect when training on CPU; ignored")
            return OffloadPolicy()
        return CPUOffloadPolicy() if cpu_offload else OffloadPolicy()

    # ---- wrapping ------------------------------------------------------------------------------

    def prepare(self, model, optimizer, steps):
        names = {id(p): name for name, p in model.named_parameters()}  # before fully_shard swaps them
        synced: set[int] = set()
        for unit in [*_shard_units(model), model]:  # children first: the root takes what is left
            self._shard(unit, synced)
        _point_optimizer_at(optimizer, names, dict(model.named_parameters()))
        self.model = model
        return model, optimizer

    def _shard(self, module: nn.Module, synced: set[int]) -> None:
        """Move the unit's tensors not yet handled (``synced``) to the device, set them to rank
        0's values and shard the unit."""
        # One unit at a time: the whole model is never on the accelerator unsharded.
        # (Parameters of units already sharded are DTensors now, new objects not in ``synced``.)
        tensors = [t for t in (*module.parameters(), *module.buffers()) if not isinstance(t, DTensor) and id(t) not in synced]
        synced.update(id(t) for t in tensors)
        with torch.no_grad():
            for tensor in tensors:
                tensor.data = tensor.data.to(self.device)
                # As ddp does: every worker starts from the model rank 0 built, whatever its seed.
                dist.broadcast(tensor.data, src=0)
        fully_shard(module, mesh=self.mesh, offload_policy=self.offload_policy)

    # ---- the step ------------------------------------------------------------------------------

    def backward(self, loss, sync=True):
        # On accumulation micro-steps the unsharded gradients are summed locally; the
        # reduce-scatter runs once, in the backward that precedes the optimizer step.
        if self.model is not None:
            self.model.set_requires_gradient_sync(sync)
        loss.backward()

    def _clip_grad_norm(self, parameters, max_norm):
        norm = self._global_grad_norm([p.grad for p in parameters if p.grad is not None])
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
        return norm.item()

    def _global_grad_norm(self, grads: list[torch.Tensor]) -> torch.Tensor:
        """The 2-norm of all gradients: each rank's slices summed, then added over ranks."""
        # Summed by hand rather than with DTensor ops: under cpu_offload the slices live in CPU
        # memory while the group is NCCL, and DTensor's clip_grad_norm_ then all-reduces a CPU
        # tensor over it (pytorch issue 148532: "No backend type associated with device type
        # cpu"). Here only the one scalar crosses, on the training device.
        sliced = [g.to_local() for g in grads if isinstance(g, DTensor)]
        whole = [g for g in grads if not isinstance(g, DTensor)]  # the same on every rank
        squares = _sum_of_squares(sliced, self.device)
        dist.all_reduce(squares, op=dist.ReduceOp.SUM)
        return (squares + _sum_of_squares(whole, self.device)).sqrt()

    def release_model(self):
        self.model = None

    def _release(self):
        # The sharded model's hooks hold the mesh's group.
        self.release_model()
        self.mesh = None


class FSDPState(StateIO):
    """Sharded state: the full weights are gathered onto rank 0; a checkpoint is either full
    (``state_dict_type: full``: gathered, written by rank 0, read by rank 0 and scattered) or
    sharded (``sharded``: every rank writes and reads its own slices with torch's distributed
    checkpoint)."""

    shards_weights = True

    def full_weights(self, model):
        """The full weights under the plain module's names: complete on rank 0, empty elsewhere.
        (``fully_shard`` changes the module in place: there is no wrapper to remove.)"""
        return get_model_state_dict(model, options=FULL_ON_RANK0)

    def save(self, directory: Path, model, optimizer):
        if self.strategy.state_dict_type == "sharded":
            model_state, optimizer_state = get_state_dict(model, optimizer)
            dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=directory / SHARDED_DIR)
        else:
            self._save_full(directory, model, optimizer)

    def _save_full(self, directory: Path, model, optimizer) -> None:
        from plait.training.checkpoint import save_weights

        # Both gathers are collectives: every rank runs them, rank 0 alone writes.
        weights = self.full_weights(model)
        optimizer_state = get_optimizer_state_dict(model, optimizer, options=FULL_ON_RANK0)
        if self.strategy.is_coordinator:
            save_weights(weights, directory / MODEL_FILE)
            torch.save(optimizer_state, directory / OPTIMIZER_FILE)

    def load(self, directory: Path, model, optimizer):
        # The folder says how it was written, so a run resumes whatever state_dict_type it has now.
        if (directory / SHARDED_DIR).is_dir():
            self._load_sharded(directory / SHARDED_DIR, model, optimizer)
        else:
            self._load_full(directory, model, optimizer)

    def _load_sharded(self, path: Path, model, optimizer) -> None:
        # dcp.load fills the current state dicts in place (each rank reads only its slices, so
        # the checkpoint may come from a different number of workers).
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=path)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])

    def _load_full(self, directory: Path, model, optimizer) -> None:
        from plait.training.checkpoint import load_weights

        coordinator = self.strategy.is_coordinator
        weights = load_weights(directory / MODEL_FILE) if coordinator else {}
        set_model_state_dict(model, weights, options=FULL_FROM_RANK0)
        optimizer_state = torch.load(directory / OPTIMIZER_FILE, weights_only=True) if coordinator else {}
        set_optimizer_state_dict(model, optimizer, optimizer_state, options=FULL_FROM_RANK0)


def _shard_units(module: nn.Module) -> list[nn.Module]:
    """The modules to shard one by one, innermost first: the blocks a pretrained transformer
    declares whole (its ``_no_split_modules``, such as each decoder layer), then each child of
    ``module`` with parameters. A ModuleDict or ModuleList child is looked through: it is never
    called, so FSDP's forward hooks on it would never run.

    A pretrained model is otherwise one child, gathered whole in every forward and backward:
    sharded by layer, a worker holds one layer's full parameters at a time."""
    blocks = _transformer_blocks(module)
    return [*blocks, *(child for child in _children_with_parameters(module) if not any(child is b for b in blocks))]


def _transformer_blocks(module: nn.Module) -> list[nn.Module]:
    names = {name for m in module.modules() for name in (getattr(m, "_no_split_modules", None) or [])}
    # Reversed pre-order: a block inside another block is sharded before it.
    return [m for m in reversed(list(module.modules())) if m is not module and type(m).__name__ in names]


def _children_with_parameters(module: nn.Module) -> list[nn.Module]:
    units = []
    for child in module.children():
        if isinstance(child, (nn.ModuleDict, nn.ModuleList)):
            units.extend(_children_with_parameters(child))
        elif next(child.parameters(), None) is not None:
            units.append(child)
    return units


def _sum_of_squares(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    total = torch.zeros((), dtype=torch.float32, device=device)
    for tensor in tensors:
        total += torch.linalg.vector_norm(tensor, dtype=torch.float32).to(device).square()
    return total


def _point_optimizer_at(optimizer: torch.optim.Optimizer, names: dict[int, str], params: dict[str, nn.Parameter]) -> None:
    """Replace, in the optimizer's groups, each parameter of the model by its sharded successor
    (same name), keeping the groups' settings. The optimizer must not have stepped yet: its state
    would be for the unsharded tensors."""
    if optimizer.state:
        raise ValueError("fsdp: prepare the optimizer before its first step (its state cannot be sharded)")
    for group in optimizer.param_groups:
        group["params"] = [params.get(names.get(id(p)), p) for p in group["params"]]

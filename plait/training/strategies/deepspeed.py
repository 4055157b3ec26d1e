"""DeepSpeed: ZeRO data parallelism. One process per worker; stage 1 shards the optimizer state
over the workers, stage 2 also the gradients, stage 3 also the parameters (then a forward pass is
a collective).

How plait's loop maps onto the DeepSpeed engine:

* The torch optimizer plait built becomes the engine's base optimizer (DeepSpeed's own fused and
  CPU Adam are C++ extensions compiled on first use), also when offloading. ZeRO points that
  optimizer's ``param_groups`` at its flat partitions but keeps the group dicts, so plait's LR
  scheduler, which writes ``lr`` into them, sets the learning rate DeepSpeed steps with.
* Gradient accumulation: the loop already divides each micro-batch's loss by the number of
  accumulation steps and says which backward ends a step; the engine is told the same instead of
  counting micro-steps itself (the last, shorter group of an epoch would confuse its count).
* Gradient clipping by global norm happens inside ``engine.step()``: under ZeRO the engine alone
  sees the partitioned gradients, so ``optimizer_step`` steps first and reports the norm after.
* Checkpoints: the full weights in safetensors (written by the coordinator) and one optimizer file
  per worker (its partition, with the fp32 master weights), loaded with ``weights_only=True``.
  Under ZeRO-3 the weights stay partitioned: no full copy is gathered for a checkpoint.
  Resuming needs the same number of workers, ZeRO stage and precision.
* fp16/bf16: DeepSpeed keeps the module's weights in half precision (fp32 master weights in the
  optimizer); the forward pass runs under autocast and returns float32 (fp16 needs a GPU:
  DeepSpeed's CPU accelerator has none).

The process group comes from whoever launched the workers (Ray Train, or the tests); under
torchrun this strategy creates it from the environment and destroys it at the end, as ddp does.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

import torch

from plait.errors import BackendError, ConfigError
from plait.training.strategies.process_group import ProcessGroupStrategy
from plait.training.checkpoint import MODEL_FILE
from plait.training.strategies.state import StateIO, unwrap

FROZEN_FILE = "frozen.safetensors"
"""Under ZeRO-3, the part of the module's state a checkpoint's optimizer files do not hold:
buffers and frozen parameters (the trainable ones are restored from the fp32 master weights)."""
ZERO3_MIN_BUCKET = 2**20
"""The smallest bucket (in elements) ZeRO-3 is given, whatever the model: see zero3_sizes."""
LAYOUT_FILE = "deepspeed.json"
"""How the optimizer state in a checkpoint is partitioned: loading needs the same layout."""
LAYOUT_SETTINGS = {"world_size": "backend.trainer.num_workers",
                   "zero_stage": "backend.trainer.strategy.zero_optimization.stage",
                   "fp16": "backend.trainer.strategy.fp16.enabled", "bf16": "backend.trainer.strategy.bf16.enabled"}
"""The setting that decides each part of the layout."""


def optimizer_file(rank: int) -> str:
    return f"optimizer-rank{rank}.pt"


class DeepSpeedStrategy(ProcessGroupStrategy):
    name = "deepspeed"
    whole_gradients_in_step = False  # ZeRO partitions them; fp16 is DeepSpeed's own loss scaling

    @staticmethod
    def check(section, steps=None) -> None:
        """Settings DeepSpeed would refuse, refused on the driver before any worker starts."""
        check_supported(section, steps)

    def __init__(self, config=None, device: str | None = None):
        from plait.config.backend import DeepSpeedConfig

        self.config = config or DeepSpeedConfig()
        check_supported(self.config)
        self.stage = self.config.zero_optimization.stage
        self.forward_is_collective = self.stage == 3
        self.whole_parameters_outside_forward = self.stage != 3
        # Imported before the group is made: a missing package then leaves nothing to clean up.
        cuda = device.startswith("cuda") if device else torch.cuda.is_available()
        self.deepspeed = import_deepspeed(torch.device("cuda" if cuda else "cpu"))
        if self.config.fp16.enabled and not self.deepspeed.accelerator.get_accelerator().is_fp16_supported():
            raise ConfigError(f"backend.trainer.strategy.fp16.enabled: DeepSpeed has no fp16 on this device "
                              f"({'cuda' if cuda else 'cpu'}); use bf16.enabled instead")
        self._join_group(device)
        self.ds_config: dict = {}
        self.engine = None
        self.torch_optimizer = None
        self.dtypes: dict[str, torch.dtype] = {}

    # ---- model and optimizer ---------------------------------------------------------------------

    def prepare(self, model, optimizer, steps):
        check_supported(self.config, steps)
        self.ds_config = deepspeed_config(self.config, steps)
        # The dtypes the plain module was built with, for state.full_weights to hand back (bf16/fp16
        # training keeps the module itself in half precision).
        self.dtypes = {name: tensor.dtype for name, tensor in model.state_dict().items()}
        half = self._half_dtype()
        if half is not None:
            run_in_half_precision(model, self.device.type, half)
        if self.stage == 3:
            self.ds_config["zero_optimization"].update(zero3_sizes(model))
        self.engine, *_ = self.deepspeed.initialize(model=model, optimizer=optimizer, config=self.ds_config,
                                                    dist_init_required=False)
        self.torch_optimizer = optimizer
        # The torch optimizer, not the engine's wrapper: the trainer builds its LR scheduler on it.
        return self.engine, optimizer

    @property
    def state(self) -> DeepSpeedState:
        return DeepSpeedState(self)  # the optimizer state is partitioned: see DeepSpeedState

    def _half_dtype(self) -> torch.dtype | None:
        if self.config.bf16.enabled:
            return torch.bfloat16
        return torch.float16 if self.config.fp16.enabled else None

    def backward(self, loss, sync=True):
        # The loop has divided the loss by the accumulation steps already: no second division.
        self.engine.set_gradient_accumulation_boundary(sync)
        self.engine.backward(loss, scale_wrt_gas=False)

    def optimizer_step(self, optimizer, parameters, max_norm=None, scaler=None):
        """DeepSpeed clips inside ``engine.step()`` (at ``gradient_clipping``, set from the step
        plan's ``max_norm`` in ``prepare``): step, then report the norm before clipping. A
        non-finite norm makes DeepSpeed skip the step."""
        clip = self.ds_config["gradient_clipping"]
        if (max_norm or 0.0) != clip:
            raise ValueError(f"optimizer_step(max_norm={max_norm}): DeepSpeed clips at gradient_clipping={clip}, "
                             f"the max_norm of the steps it was prepared for")
        # Without ZeRO or half precision the engine keeps no norm, and would step on a non-finite
        # gradient; the gradients are whole here.
        whole = whole_grad_norm(parameters) if self.engine.optimizer is self.torch_optimizer else None
        if whole is not None and not math.isfinite(whole):
            return whole
        self.engine.step()  # also zeroes the gradients
        if self.config.fp16.enabled and not self._step_applied():
            # An fp16 overflow is how dynamic loss scaling finds its scale: DeepSpeed skipped the
            # step and lowered the scale (it raises itself once the scale can go no lower).
            return 0.0 if max_norm else None
        if not max_norm:
            return None
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else whole

    def _step_applied(self) -> bool:
        applied = getattr(self.engine, "was_step_applied", None)
        return applied() if applied is not None else True

    def release_model(self):
        if self.engine is not None and hasattr(self.engine, "destroy"):
            self.engine.destroy()  # removes ZeRO-3's hooks from the module
        if self.engine is not None and self.engine.optimizer is not self.torch_optimizer:
            drop_zero_buffers(self.engine.optimizer)
        self.engine = self.torch_optimizer = None


class DeepSpeedState(StateIO):
    """The full weights in the dtypes the plain module was built with; each worker's partition
    of the optimizer state in a file of its own, with a layout file that a resume checks against
    the current settings.

    Under ZeRO-3 the weights stay partitioned: the full weights are gathered one module at a
    time and kept by the coordinator alone, and a checkpoint holds no full weights. Each
    worker's optimizer partition carries its fp32 master weights, from which DeepSpeed restores
    the trainable parameters; the rest (buffers, frozen parameters) goes in ``FROZEN_FILE``."""

    @property
    def shards_weights(self) -> bool:
        return self.strategy.stage == 3

    def full_weights(self, model):
        """The full weights, on every worker (under ZeRO-3: on the coordinator alone)."""
        module = unwrap(model)
        if self.shards_weights:
            state = self._gathered_on_coordinator(module, set(module.state_dict()))
        else:
            state = {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}
        dtypes = self.strategy.dtypes
        return {name: tensor.to(dtypes.get(name, tensor.dtype)) for name, tensor in state.items()}

    def _gathered_on_coordinator(self, module, names: set[str]) -> dict:
        """Copies of the tensors of ``module``'s state dict named in ``names`` (on the
        coordinator; empty elsewhere)."""
        keep = self.strategy.is_coordinator
        return {name: tensor.detach().clone() for name, tensor in self._each_gathered(module, names) if keep}

    def save_full_weights(self, model, path: Path) -> None:
        """Under ZeRO-3 each module's parameters are gathered in turn and written straight to
        the file by the coordinator: no worker ever holds the whole model."""
        if not self.shards_weights:
            return super().save_full_weights(model, path)
        from plait.training.checkpoint import save_weights_streamed

        module = unwrap(model)
        names = set(module.state_dict())
        dtypes = self.strategy.dtypes
        layout = {name: (dtypes.get(name, tensor.dtype), tuple(getattr(tensor, "ds_shape", tensor.shape)))
                  for name, tensor in _named_tensors(module, names)}
        tensors = ((name, tensor.to(layout[name][0])) for name, tensor in self._each_gathered(module, names))
        if self.strategy.is_coordinator:
            save_weights_streamed(path, layout, tensors)
        else:
            for _ in tensors:  # the gathers are collectives: every worker runs them
                pass

    def _each_gathered(self, module, names: set[str]):
        """Yield (name, full tensor) for the tensors of ``module``'s state dict named in
        ``names``, one module's parameters gathered at a time (a collective, on every worker;
        each tensor is valid until the next one is asked for)."""
        # An evaluation's forward passes may leave prefetched parameters in flight, which a
        # gather of only some of them cannot release: everything is partitioned again first.
        self.strategy.engine.empty_partition_cache()
        for child_names, tensors in _tensors_by_module(module, names):
            with self.strategy.deepspeed.zero.GatheredParameters(tensors):
                yield from zip(child_names, tensors)

    def save(self, directory: Path, model, optimizer) -> None:
        from plait.training.checkpoint import save_weights

        module = unwrap(model)
        if self.shards_weights:
            trainable = {name for name, p in module.named_parameters(remove_duplicate=False) if p.requires_grad}
            weights = self._gathered_on_coordinator(module, set(module.state_dict()) - trainable)
        else:
            weights = self.full_weights(model)
        if self.strategy.is_coordinator:
            save_weights(weights, directory / (FROZEN_FILE if self.shards_weights else MODEL_FILE))
            (directory / LAYOUT_FILE).write_text(json.dumps(self.layout()))
        # Each worker's partition of the optimizer state, with its fp32 master weights.
        torch.save(self.strategy.engine.optimizer.state_dict(), directory / optimizer_file(self.strategy.rank))

    def load(self, directory: Path, model, optimizer) -> None:
        from plait.training.checkpoint import load_weights

        self.check_layout(directory)
        module = unwrap(model)
        if self.shards_weights:  # the trainable parameters come back with the optimizer state
            saved = load_weights(directory / FROZEN_FILE)
            named = dict(module.named_parameters(remove_duplicate=False))
            with self._gathered([named[name] for name in saved if name in named], modifier_rank=0):
                module.load_state_dict(saved, strict=False)
        else:
            module.load_state_dict(load_weights(directory / MODEL_FILE))
        with torch.serialization.safe_globals(checkpoint_classes()):
            state = torch.load(directory / optimizer_file(self.strategy.rank), weights_only=True)
        self._load_optimizer_state(state)

    def _gathered(self, parameters: list, modifier_rank=None):
        """Full ``parameters`` inside the context under ZeRO-3 (with ``modifier_rank``, that
        rank's changes are scattered back when it ends); a no-op otherwise."""
        if not self.shards_weights:
            return contextlib.nullcontext()
        return self.strategy.deepspeed.zero.GatheredParameters(parameters, modifier_rank=modifier_rank)

    def _load_optimizer_state(self, state: dict) -> None:
        from deepspeed.runtime.base_optimizer import ZeROOptimizer

        wrapper = self.strategy.engine.optimizer
        if wrapper is self.strategy.torch_optimizer:
            wrapper.load_state_dict(state)
        elif isinstance(wrapper, ZeROOptimizer):
            # ZeRO reads the entry of its own rank in a list of every rank's state; the others are
            # needed only to re-partition for another world size, which check_layout refuses.
            states = [None] * self.strategy.world_size
            states[self.strategy.rank] = state
            wrapper.load_state_dict(state_dict_list=states, load_optimizer_states=True, load_from_fp32_weights=True)
        else:  # the fp16/bf16 wrappers without ZeRO: whole on every worker
            wrapper.load_state_dict(state, load_optimizer_states=True)

    def layout(self) -> dict:
        """How the optimizer state is partitioned now (what ``LAYOUT_FILE`` records)."""
        strategy = self.strategy
        return {"world_size": strategy.world_size, "zero_stage": strategy.stage,
                "fp16": strategy.config.fp16.enabled, "bf16": strategy.config.bf16.enabled}

    def check_layout(self, directory: Path) -> None:
        """Refuse a checkpoint whose optimizer state was partitioned otherwise than now."""
        path = directory / LAYOUT_FILE
        if not path.is_file():
            raise ConfigError(f"backend.trainer.strategy: the checkpoint {directory} was not written by the deepspeed "
                              f"strategy; resume with the strategy that wrote it")
        saved, now = json.loads(path.read_text()), self.layout()
        problems = [f"{LAYOUT_SETTINGS[key]}: the checkpoint {directory} holds DeepSpeed optimizer state written "
                    f"with {saved.get(key)} (now {now[key]}); resume with the same setting"
                    for key in now if saved.get(key) != now[key]]
        if problems:
            raise ConfigError(problems)


# ---- DeepSpeed itself ----------------------------------------------------------------------------


def import_deepspeed(device: torch.device):
    """``deepspeed``, set up for ``device``."""
    if device.type == "cpu":
        # DeepSpeed picks its accelerator once, at first use; without a GPU it guesses CPU but warns.
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    try:
        import deepspeed
        from deepspeed.accelerator import get_accelerator
    except ImportError as error:
        raise BackendError("the deepspeed strategy needs `pip install plait[deepspeed]` (set DS_BUILD_OPS=0 to install "
                           f"without compiling DeepSpeed's C++ ops); importing deepspeed failed: {error}") from error
    accelerator = get_accelerator().device_name()
    if accelerator != device.type:
        raise BackendError(f"DeepSpeed runs on {accelerator} but this worker trains on "
                           f"{device}; set DS_ACCELERATOR={device.type}")
    if accelerator == "cpu":
        skip_shared_memory_op(deepspeed)
    return deepspeed


def skip_shared_memory_op(deepspeed) -> None:
    """On the CPU accelerator DeepSpeed's communication backend compiles its shared-memory
    all-reduce (a C++ extension, over a minute) when it starts, and uses it only for the all-reduce
    of tensor-parallel inference; marked incompatible, it is never built and gloo does the work."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def deepspeed_config(config, steps) -> dict:
    """The engine's config from the strategy section and the steps it runs (a ``StepPlan``)."""
    zero = config.zero_optimization
    return {
        # DeepSpeed only logs throughput with the batch size (plait makes the batches).
        "train_micro_batch_size_per_gpu": steps.batch_size,
        "gradient_accumulation_steps": steps.accumulation,
        "gradient_clipping": float(steps.max_norm or 0.0),
        "zero_optimization": {
            "stage": zero.stage,
            "offload_optimizer": _offload(zero.offload_optimizer),
            "offload_param": _offload(zero.offload_param),
        },
        "fp16": {"enabled": config.fp16.enabled},
        "bf16": {"enabled": config.bf16.enabled},
        # Plait's SGD is not on DeepSpeed's list of tested ZeRO optimizers: ZeRO steps any torch
        # optimizer on its flat partitions alike.
        "zero_allow_untested_optimizer": True,
        # Offloading steps plait's torch optimizer on the CPU, not DeepSpeed's compiled CPU Adam.
        "zero_force_ds_cpu_optimizer": False,
    }


def _tensors_by_module(module, names: set[str]):
    """Each module's own parameters and buffers named in ``names`` (state-dict names), as
    (names, tensors), module by module in the state dict's order."""
    for prefix, child in module.named_modules(remove_duplicate=False):
        tensors = [*child.named_parameters(recurse=False, remove_duplicate=False),
                   *child.named_buffers(recurse=False, remove_duplicate=False)]
        own = [(f"{prefix}.{name}" if prefix else name, tensor) for name, tensor in tensors]
        own = [(name, tensor) for name, tensor in own if name in names]
        if own:
            yield [name for name, _ in own], [tensor for _, tensor in own]


def _named_tensors(module, names: set[str]):
    for child_names, tensors in _tensors_by_module(module, names):
        yield from zip(child_names, tensors)


def drop_zero_buffers(zero_optimizer) -> None:
    """Free what a ZeRO optimizer holds (its flat partitions, gradient buffers, the base
    optimizer's moments) once training is over. After ``engine.destroy()`` the engine stays
    reachable from the parameters' autograd state, which Python's collector cannot see, so
    dropping plait's references frees nothing: without this a worker would carry all its
    training state while the final model is built."""
    base = getattr(zero_optimizer, "optimizer", None)
    if isinstance(base, torch.optim.Optimizer):
        base.state.clear()
    for name, value in list(vars(zero_optimizer).items()):
        if isinstance(value, torch.Tensor):
            setattr(zero_optimizer, name, None)
        elif isinstance(value, list) and value and isinstance(value[0], (torch.Tensor, list)):
            setattr(zero_optimizer, name, [])


def zero3_sizes(model: torch.nn.Module) -> dict:
    """ZeRO-3's bucket and cache sizes, in elements, for this model. DeepSpeed's defaults suit
    models of billions of parameters on GPUs: they let a worker keep up to 10^9 gathered
    parameters between uses and step the optimizer over one group of 10^9 (all of a smaller
    model), so a worker's peak approaches an unsharded one. Sized from the largest parameter
    instead, a worker holds a few layers' full parameters at a time, and the optimizer steps a
    sixteenth of the model at a time."""
    sizes = [p.numel() for p in model.parameters()]
    # At least 2^20 elements (4 MiB in fp32): below that, each bucket's collective costs more in
    # latency than its memory is worth, and a small model would make thousands a step.
    largest, total = max([*sizes, ZERO3_MIN_BUCKET]), sum(sizes)
    return {"reduce_bucket_size": largest, "stage3_prefetch_bucket_size": largest,
            "stage3_max_live_parameters": 2 * largest, "stage3_max_reuse_distance": largest,
            "sub_group_size": max(largest, total // 16)}


def _offload(section) -> dict:
    # DeepSpeed pins offloaded memory by default: only turning it off needs saying.
    return {"device": section.device, **({} if section.pin_memory else {"pin_memory": False})}


def check_supported(config, steps=None) -> None:
    """Settings DeepSpeed would ignore or reject, refused with what to change (``steps``: the
    ``StepPlan`` of the run, where known)."""
    zero = config.zero_optimization
    problems = []
    if config.fp16.enabled and config.bf16.enabled:
        problems.append("backend.trainer.strategy: fp16 and bf16 are both enabled; enable one")
    if zero.offload_param.device != "none" and zero.stage != 3:
        problems.append(f"backend.trainer.strategy.zero_optimization.offload_param: only ZeRO stage 3 offloads "
                        f"parameters (stage is {zero.stage})")
    if zero.offload_optimizer.device != "none" and zero.stage == 0:
        problems.append("backend.trainer.strategy.zero_optimization.offload_optimizer: needs ZeRO stage 1, 2 or 3")
    wraps_gradients = zero.stage > 0 or config.fp16.enabled or config.bf16.enabled
    if steps is not None and steps.clip_value and wraps_gradients:
        problems.append("trainer.gradient_clipping.clipvalue: DeepSpeed keeps ZeRO and fp16/bf16 gradients in its "
                        "own buffers and clips them by global norm only; use clipglobalnorm")
    if problems:
        raise ConfigError(problems)


def checkpoint_classes() -> list:
    """The DeepSpeed classes inside its optimizers' state dicts, trusted by ``torch.load(...,
    weights_only=True)``: plain records (the loss scaler, the ZeRO stage, where each parameter
    lies in the flat partition) that unpickle without running code."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]


def whole_grad_norm(parameters) -> float:
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])).item()


def run_in_half_precision(module: torch.nn.Module, device_type: str, dtype: torch.dtype) -> None:
    """With fp16/bf16 DeepSpeed turns the module's weights to ``dtype``, but a module may make
    float32 tensors of its own (plait's encoders call ``.float()``): its forward runs under autocast,
    which casts both sides of every matmul, and its float outputs come back as float32, so that
    plait's losses and metrics run in float32. The module's own ``forward`` is replaced (not
    wrapped in another module) so that its parameter names and attributes stay as they are."""
    forward = module.forward

    def half_precision_forward(*args, **kwargs):
        with torch.autocast(device_type, dtype=dtype):
            output = forward(*args, **kwargs)
        return cast_floats(output, torch.float32)

    module.forward = half_precision_forward


def cast_floats(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, dict):
        return {key: cast_floats(item, dtype) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(cast_floats(item, dtype) for item in value)
    return value

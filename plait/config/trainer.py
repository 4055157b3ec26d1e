"""Training settings (the ``trainer`` section): every key of Ludwig 0.17's ECD trainer, its
optimizers, learning-rate scheduler and gradient clipping. Names and meanings follow Ludwig's;
where plait's default differs, the field records Ludwig's (``LUDWIG_DEFAULT``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from plait.config.base import (LUDWIG_DEFAULT, StrictModel, field_error, ludwig_only, ludwig_types_not_implemented,
                               shown)
from plait.config.layers import union


def _positive_or_auto(what: str, example: str):
    """A check that a number-or-auto setting is above zero, naming the fix."""

    def check(value):
        if value != "auto" and value <= 0:
            raise ValueError(f"got {shown(value)}; {what} must be greater than 0 ({example}), or auto")
        return value

    return AfterValidator(check)


Fraction = Annotated[float, Field(ge=0, lt=1)]
Betas = tuple[Fraction, Fraction]

# ---- optimizers: one class per torch optimizer, with Ludwig's parameter names and defaults ----------


class _Optimizer(StrictModel):
    """A base: a key of another optimizer type is refused naming the types that take it."""

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        owners = [o.model_fields["type"].default for o in OPTIMIZERS if key in o.model_fields]
        if not owners:
            return None
        this = cls.model_fields["type"].default
        return f"a setting of the {', '.join(owners)} optimizer{'s' if len(owners) > 1 else ''}, not of {this}"


class AdamConfig(_Optimizer):
    """Adam (torch.optim.Adam)."""

    type: Literal["adam"] = "adam"
    """The optimizer: adam."""
    betas: Betas = (0.9, 0.999)
    """Decay rates of the running means of the gradient and its square, in [0, 1)."""
    eps: float = Field(1e-8, gt=0)
    """Added to the denominator for numerical stability."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient (adam) or decoupled weight decay (adamw)."""
    amsgrad: bool = False
    """Use the maximum of past squared-gradient averages (AMSGrad)."""


class AdamWConfig(AdamConfig):
    """AdamW (torch.optim.AdamW): Adam with decoupled weight decay."""

    type: Literal["adamw"] = "adamw"
    """The optimizer: adamw."""


class SGDConfig(_Optimizer):
    """Stochastic gradient descent (torch.optim.SGD)."""

    type: Literal["sgd"] = "sgd"
    """The optimizer: sgd."""
    momentum: float = Field(0.9, ge=0, lt=1, json_schema_extra={LUDWIG_DEFAULT: 0.0})
    """Momentum factor. plait's default 0.9 (plain SGD without momentum trains slowly)."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient."""
    dampening: float = Field(0.0, ge=0, le=1)
    """Dampening for momentum."""
    nesterov: bool = False
    """Nesterov momentum (needs momentum > 0 and dampening 0)."""

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self):
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise field_error("nesterov", "Nesterov momentum needs momentum > 0 and dampening 0; "
                                          "set momentum (such as 0.9) and dampening: 0, or nesterov: false")
        return self


class AdadeltaConfig(_Optimizer):
    """Adadelta (torch.optim.Adadelta)."""

    type: Literal["adadelta"] = "adadelta"
    """The optimizer: adadelta."""
    rho: float = Field(0.9, ge=0, le=1)
    """Decay rate of the running averages of squared gradients and updates."""
    eps: float = Field(1e-6, gt=0)
    """Added to the denominator for numerical stability."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient."""


class AdagradConfig(_Optimizer):
    """Adagrad (torch.optim.Adagrad)."""

    type: Literal["adagrad"] = "adagrad"
    """The optimizer: adagrad."""
    initial_accumulator_value: float = Field(0.0, ge=0)
    """Starting value of the sums of squared gradients."""
    lr_decay: float = Field(0.0, ge=0)
    """The learning rate is divided by 1 + (step - 1) * lr_decay."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient."""
    eps: float = Field(1e-10, gt=0)
    """Added to the denominator for numerical stability."""


class AdamaxConfig(_Optimizer):
    """Adamax (torch.optim.Adamax): Adam with the infinity norm."""

    type: Literal["adamax"] = "adamax"
    """The optimizer: adamax."""
    betas: Betas = (0.9, 0.999)
    """Decay rates of the running means of the gradient and its square, in [0, 1)."""
    eps: float = Field(1e-8, gt=0)
    """Added to the denominator for numerical stability."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient."""


class NadamConfig(_Optimizer):
    """NAdam (torch.optim.NAdam): Adam with Nesterov momentum."""

    type: Literal["nadam"] = "nadam"
    """The optimizer: nadam."""
    betas: Betas = (0.9, 0.999)
    """Decay rates of the running means of the gradient and its square, in [0, 1)."""
    eps: float = Field(1e-8, gt=0)
    """Added to the denominator for numerical stability."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient."""
    momentum_decay: float = Field(4e-3, ge=0)
    """Momentum decay (psi in the NAdam paper)."""


class RMSPropConfig(_Optimizer):
    """RMSprop (torch.optim.RMSprop)."""

    type: Literal["rmsprop"] = "rmsprop"
    """The optimizer: rmsprop."""
    momentum: float = Field(0.0, ge=0, lt=1)
    """Momentum factor."""
    alpha: float = Field(0.99, ge=0, le=1)
    """Smoothing constant of the running average of squared gradients."""
    eps: float = Field(1e-8, gt=0)
    """Added to the denominator for numerical stability."""
    centered: bool = False
    """Normalize by an estimate of the gradient's variance rather than its second moment."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient."""


class RAdamConfig(_Optimizer):
    """RAdam (torch.optim.RAdam): Adam with a rectified adaptive learning rate."""

    type: Literal["radam"] = "radam"
    """The optimizer: radam."""
    betas: Betas = (0.9, 0.999)
    """Decay rates of the running means of the gradient and its square, in [0, 1)."""
    eps: float = Field(1e-8, gt=0)
    """Added to the denominator for numerical stability."""
    weight_decay: float = Field(0.0, ge=0)
    """L2 penalty added to the gradient."""


OPTIMIZERS = (AdamWConfig, AdamConfig, SGDConfig, AdadeltaConfig, AdagradConfig, AdamaxConfig, NadamConfig,
              RMSPropConfig, RAdamConfig)
OptimizerConfig = union(*OPTIMIZERS)

_BITSANDBYTES = ("needs bitsandbytes (8-bit/paged optimizer states), which plait does not use; "
                 "use the torch optimizer of the same name without the 8bit/paged part, such as adamw")
_BITSANDBYTES_ONLY = "comes from bitsandbytes, which plait does not use; use adamw (or sgd for lars)"
ludwig_types_not_implemented("optimizer", {
    **{name: _BITSANDBYTES for name in ("sgd_8bit", "adam_8bit", "paged_adam", "paged_adam_8bit", "adamw_8bit",
                                        "paged_adamw", "paged_adamw_8bit", "adagrad_8bit", "rmsprop_8bit")},
    **{name: _BITSANDBYTES_ONLY for name in ("lamb", "lamb_8bit", "lars", "lars_8bit", "lion", "lion_8bit",
                                             "paged_lion", "paged_lion_8bit")},
    "lbfgs": "L-BFGS re-evaluates the loss several times per step, which plait's strategies do not do; "
             "use adam or adamw",
    "adafactor": "it comes from the transformers package; use adamw",
    "schedule_free_adamw": "it comes from the schedulefree package; use adamw with a learning_rate_scheduler",
    "muon": "use adamw (or sgd with momentum and nesterov: true)",
    "soap": "use adamw",
})


# ---- the learning-rate schedule -----------------------------------------------------------------


class SchedulerConfig(StrictModel):
    """How the learning rate changes during training: an optional warmup, a decay, and reductions
    when a metric stops improving. Ludwig's keys, with Ludwig's meanings."""

    decay: Literal["linear", "exponential", "cosine", "one_cycle", "inverse_sqrt", "polynomial", "wsd"] | None = None
    """After warmup: linear (to 0 at the end of the run); exponential (``decay_rate`` every
    ``decay_steps``); cosine (cosine annealing to ``eta_min`` with warm restarts every ``t_0``
    steps); one_cycle (1cycle policy, its own warmup; unlike torch's OneCycleLR in Ludwig, the
    momentum is not cycled); inverse_sqrt (times 1/sqrt(max(step, inverse_sqrt_warmup_steps)),
    not normalized, as in Ludwig: with the default 4000 the rate starts at about lr/63);
    polynomial (to ``polynomial_end_lr`` at the end of the run); wsd (warmup, stable, cosine
    decay; its own warmup). For a single cosine over
    the whole run use wsd with wsd_warmup_fraction 0, wsd_stable_fraction 0, wsd_decay_fraction 1.
    null: constant after warmup."""
    decay_rate: float = Field(0.96, gt=0, le=1)
    """exponential: the factor applied every ``decay_steps`` steps (from the first step after warmup
    the learning rate is lr x decay_rate^(1 + steps/decay_steps), as in Ludwig)."""
    decay_steps: int | None = Field(None, gt=0, json_schema_extra={LUDWIG_DEFAULT: 10000})
    """exponential: steps per factor of ``decay_rate``. Unset: the steps of one epoch (plait's
    default; Ludwig's 10000 barely decays a small dataset's run)."""
    staircase: bool = False
    """exponential: decay in whole steps of ``decay_steps`` rather than smoothly."""
    warmup_evaluations: float = Field(0, ge=0)
    """Ramp the learning rate up linearly over this many evaluation intervals. With
    ``warmup_fraction`` too, the longer of the two warmups is used."""
    warmup_fraction: float = Field(0.0, ge=0, lt=1)
    """Fraction of all training steps spent ramping the learning rate up from zero. When neither
    warmup is set and the learning rate was scaled up for several workers
    (``learning_rate_scaling``), plait warms up over the first epoch (at most a tenth of the run)."""
    reduce_on_plateau: int = Field(0, ge=0)
    """How many times at most to multiply the learning rate by ``reduce_on_plateau_rate`` when
    ``reduce_eval_metric`` stops improving (0: never)."""
    reduce_on_plateau_patience: int = Field(10, ge=0)
    """Evaluations without improvement tolerated; the next one reduces the learning rate."""
    reduce_on_plateau_rate: float = Field(0.1, gt=0, lt=1)
    """The factor of each reduction."""
    reduce_eval_metric: str = "loss"
    """The metric of ``trainer.validation_field`` watched for a plateau (a metric the split reports)."""
    reduce_eval_split: Annotated[Literal["training", "validation", "test"], ludwig_only(
        "training", "validation", instead="plait does not evaluate the test split during training; "
                                          "use training or validation")] = "training"
    """The split whose metric is watched. training: the mean training loss of the evaluation
    interval (other training metrics need ``trainer.evaluate_training_set``)."""
    t_0: int | None = Field(None, gt=0)
    """cosine: steps until the first restart. Unset: the steps between two evaluations."""
    t_mult: int = Field(1, gt=0)
    """cosine: each period is ``t_mult`` times the previous one."""
    eta_min: float = Field(0.0, ge=0, le=1)
    """cosine: the lowest learning rate (an absolute value)."""
    max_lr: float | None = Field(None, gt=0)
    """one_cycle: the peak learning rate. Unset: the trainer's learning rate."""
    pct_start: float = Field(0.3, ge=0, le=1)
    """one_cycle: fraction of the run spent rising to ``max_lr``."""
    div_factor: float = Field(25.0, gt=0)
    """one_cycle: the starting learning rate is max_lr / div_factor."""
    final_div_factor: float = Field(1e4, gt=0)
    """one_cycle: the final learning rate is the starting one / final_div_factor."""
    inverse_sqrt_warmup_steps: int = Field(4000, gt=0)
    """inverse_sqrt: the step count below which the factor stays at 1/sqrt(this)."""
    polynomial_power: float = Field(1.0, gt=0)
    """polynomial: the power of (1 - progress); 1 is linear."""
    polynomial_end_lr: float = Field(0.0, ge=0, le=1)
    """polynomial: the final learning rate, as a fraction of the starting one."""
    wsd_warmup_fraction: float = Field(0.1, ge=0, le=1)
    """wsd: fraction of the run spent warming up."""
    wsd_stable_fraction: float = Field(0.8, ge=0, le=1)
    """wsd: fraction of the run at the full learning rate."""
    wsd_decay_fraction: float = Field(0.1, ge=0, le=1)
    """wsd: fraction of the run of cosine decay (the decay lasts until the end of the run)."""


class GradientClipping(StrictModel):
    """Gradient clipping before each optimizer step. Value clipping comes first, then norm clipping
    (Ludwig clips the norm first; in plait the strategy clips the norm inside its optimizer step)."""

    clipglobalnorm: float | None = Field(0.5, gt=0)
    """Clip the norm of all gradients together (null: off)."""
    clipnorm: float | None = Field(None, gt=0)
    """Also the norm of all gradients together, as in Ludwig: with both set, the smaller wins."""
    clipvalue: float | None = Field(None, gt=0)
    """Clip each gradient element to [-clipvalue, clipvalue] (null: off)."""

    @property
    def max_norm(self) -> float | None:
        """The global-norm bound: clipping at both bounds in turn is clipping at the smaller."""
        bounds = [b for b in (self.clipglobalnorm, self.clipnorm) if b]
        return min(bounds) if bounds else None


class ProfilerConfig(StrictModel):
    """torch.profiler schedule; used only with ``enable_profiling``, which plait does not implement."""

    wait: int = Field(1, ge=0)
    """Steps to wait before each profiling cycle."""
    warmup: int = Field(1, ge=0)
    """Steps of profiler warmup after waiting."""
    active: int = Field(3, ge=0)
    """Steps recorded per cycle."""
    repeat: int = Field(5, ge=0)
    """Profiling cycles (0: until training ends)."""
    skip_first: int = Field(0, ge=0, le=100)
    """Steps skipped at the start of training."""


def _section_or_default(value: Any) -> Any:
    """Ludwig reads a null section as its defaults."""
    return {} if value is None else value


def _auto_is_one(value: Any) -> Any:
    """Ludwig's auto gradient accumulation is 1 unless effective_batch_size is set (not implemented here)."""
    return 1 if value == "auto" else value


def _eval_batch_size(value: Any) -> Any:
    if isinstance(value, int) and value < 0:
        raise ValueError(f"got {value}; the evaluation batch size must be 0 or more (0 or null: batch_size), or auto")
    return value


_NOT_IMPLEMENTED = "plait does not implement it"


class TrainerConfig(StrictModel):
    epochs: int = Field(100, gt=0)
    """Upper bound on passes over the training set; early stopping usually ends sooner."""
    train_steps: int | None = Field(None, gt=0)
    """Train for this many optimizer steps instead of ``epochs``."""
    batch_size: Annotated[int | Literal["auto"], _positive_or_auto("the batch size", "rows per step, such as 64")] = "auto"
    """Rows per step per worker. auto: about 1/20 of the training set, between 16 and 256 (and at
    most ``max_batch_size``). The global batch is batch_size x workers x gradient_accumulation_steps."""
    max_batch_size: int = Field(2**40, gt=0)
    """The most rows an auto ``batch_size`` may choose."""
    effective_batch_size: Annotated[int | Literal["auto"], ludwig_only(
        "auto", instead="set batch_size and gradient_accumulation_steps; the global batch is "
                        "batch_size x workers x gradient_accumulation_steps")] = "auto"
    """Ludwig derives batch_size or gradient_accumulation_steps from it; plait accepts only auto."""
    eval_batch_size: Annotated[int | Literal["auto"] | None, AfterValidator(_eval_batch_size)] = Field(
        "auto", json_schema_extra={LUDWIG_DEFAULT: None})
    """Rows per evaluation batch. 0 or null: batch_size (as in Ludwig). auto: 4x batch_size, at
    least 1024 (evaluation keeps no activations for the backward pass, so larger batches fit)."""
    eval_steps: Annotated[int | None, ludwig_only(None, instead="plait evaluates the whole validation split; "
                                                               "make the split smaller to evaluate faster")] = None
    """Ludwig: evaluate on this many batches only. plait evaluates every row."""
    learning_rate: Annotated[float | Literal["auto"], _positive_or_auto("the learning rate", "such as 0.001")] = "auto"
    """auto: 1e-3, Ludwig's default learning rate (it suits Adam-style optimizers on tabular and text data)."""
    learning_rate_scaling: Literal["constant", "sqrt", "linear"] = "linear"
    """How the learning rate grows with the number of workers (the global batch grows with them).
    When scaled and no warmup is set, it warms up over the first epoch (at most a tenth of the run)."""
    optimizer: Annotated[OptimizerConfig, BeforeValidator(_section_or_default)] = Field(
        default_factory=AdamConfig)
    """The optimizer and its settings, chosen by ``type``: adam (the default, as in Ludwig),
    adamw, sgd, adadelta, adagrad, adamax, nadam, rmsprop, radam. (plait's default was adamw;
    with no weight decay, the default, the two take the same steps: benchmarks/README.md.)"""
    learning_rate_scheduler: Annotated[SchedulerConfig, BeforeValidator(_section_or_default)] = Field(
        default_factory=SchedulerConfig)
    """Warmup, decay and reductions on a plateau of the learning rate (null: the defaults)."""
    gradient_clipping: Annotated[GradientClipping, BeforeValidator(_section_or_default)] = Field(
        default_factory=GradientClipping)
    """null means the defaults, as in Ludwig (clipglobalnorm 0.5); to turn clipping off set
    ``clipglobalnorm: null``."""
    gradient_accumulation_steps: Annotated[int, BeforeValidator(_auto_is_one), Field(gt=0)] = 1
    """Batches whose gradients add up to one optimizer step. auto (Ludwig's default): 1, as in
    Ludwig when it does not tune the batch size."""
    regularization_type: Literal["l1", "l2", "l1_l2"] | None = "l2"
    """The penalty on every weight added to the training loss: l1 (sum of absolute values), l2
    (sum of squares) or both, times ``regularization_lambda``."""
    regularization_lambda: float = Field(0.0, ge=0, le=1)
    """Strength of the regularization penalty (0: none)."""
    use_mixed_precision: bool = False
    """Autocast for the forward pass, in ``mixed_precision_dtype``. Off by default: on CPUs without
    bf16 units it is slower."""
    mixed_precision_dtype: Literal["bfloat16", "float16"] = "bfloat16"
    """The autocast dtype of ``use_mixed_precision``. bfloat16 (CPUs, and GPUs from Ampere on)
    needs no loss scaling. float16 (GPUs without bf16, such as the T4 and V100; Ludwig's mixed
    precision on GPUs) scales the loss with a gradient scaler, so that small gradients do not
    underflow, and skips a step whose gradients overflowed; it needs the local or ddp strategy
    (DeepSpeed has its own: ``backend.trainer.strategy.fp16.enabled``)."""
    compile: Annotated[bool, ludwig_only(False, instead=f"{_NOT_IMPLEMENTED} (torch.compile)")] = False
    """Ludwig: torch.compile the model before training. plait accepts only false."""
    enable_gradient_checkpointing: bool = False
    """Accepted and without effect, as in Ludwig, which checkpoints activations of LLMs only."""
    layers_to_freeze_regex: str | None = None
    """Parameters whose names match this regular expression are not trained (``re.search`` on
    names such as ``input_features.age.encoder...``)."""
    early_stop: int = Field(5, ge=-1)
    """Stop after this many evaluations without improvement of validation_metric (-1: never).
    Ludwig's default, 5 (plait's was 10; 5 measured as good and faster: benchmarks/README.md)."""
    validation_field: str | None = None
    """The output feature whose metric decides early stopping and the best model, or 'combined'
    (the weighted total over every output). Unset: combined."""
    validation_metric: str | None = None
    """A metric of validation_field's type (combined has loss only). Unset: loss."""
    steps_per_checkpoint: int = Field(0, ge=0)
    """Evaluate and checkpoint every N steps; 0 means once per epoch."""
    checkpoints_per_epoch: int = Field(0, ge=0)
    """Evaluate and checkpoint this many times per epoch (0: see steps_per_checkpoint)."""
    skip_all_evaluation: bool = False
    """Never evaluate during training: no early stopping, training ends with its last weights
    (checkpoints are still saved)."""
    evaluate_training_set: bool = False
    """Also compute metrics on the whole training set at each evaluation (slower)."""
    should_shuffle: bool = True
    """Shuffle the training rows every epoch."""
    increase_batch_size_on_plateau: Annotated[int, ludwig_only(0, instead=f"{_NOT_IMPLEMENTED}; use "
                                                               "learning_rate_scheduler.reduce_on_plateau")] = 0
    """Ludwig: how many times to grow the batch on a plateau. plait accepts only 0."""
    increase_batch_size_on_plateau_patience: int = Field(5, ge=0)
    """Used only with increase_batch_size_on_plateau."""
    increase_batch_size_on_plateau_rate: float = Field(2.0, ge=0)
    """Used only with increase_batch_size_on_plateau."""
    increase_batch_size_eval_metric: str = "loss"
    """Used only with increase_batch_size_on_plateau."""
    increase_batch_size_eval_split: str = "training"
    """Used only with increase_batch_size_on_plateau."""
    bucketing_field: str | None = None
    """A text or sequence feature: each epoch's shuffled rows are sorted by that feature's length in
    runs of BUCKET_BATCHES batches, so that a batch holds rows of similar length and pads little
    (its token columns are padded to the batch's longest row where the encoder allows it). null:
    batches are drawn at random."""
    enable_profiling: Annotated[bool, ludwig_only(False, instead=f"{_NOT_IMPLEMENTED}; run under torch.profiler "
                                                                 "or py-spy yourself")] = False
    """Ludwig: profile training with torch.profiler. plait accepts only false."""
    profiler: Annotated[ProfilerConfig, BeforeValidator(_section_or_default)] = Field(default_factory=ProfilerConfig)
    """Used only with enable_profiling."""
    loss_balancing: Annotated[Literal["none", "log_transform", "uncertainty", "famo", "gradnorm", "nash_mtl",
                                      "pareto_mtl"],
                              ludwig_only("none", instead=f"{_NOT_IMPLEMENTED}; weigh the outputs with each "
                                                          "output feature's loss.weight")] = "none"
    """Ludwig: how the losses of several outputs are weighed against each other. plait accepts
    only none: the weighted sum of the outputs' losses (each output's ``loss.weight``)."""
    loss_balancing_alpha: float = 1.5
    """Used only with loss_balancing."""
    loss_balancing_lr: float = 0.01
    """Used only with loss_balancing."""
    loss_balancing_preference_vector: list[Annotated[float, Field(ge=0)]] | None = None
    """Used only with loss_balancing."""
    loss_balancing_tchebycheff_weight: float = Field(0.5, ge=0, le=1)
    """Used only with loss_balancing."""
    contrastive_pretrain_epochs: Annotated[int, ludwig_only(0, instead=f"{_NOT_IMPLEMENTED}")] = 0
    """Ludwig: epochs of contrastive pre-alignment of the encoders. plait accepts only 0."""
    contrastive_pretrain_temperature: float = Field(0.07, ge=0)
    """Used only with contrastive_pretrain_epochs."""
    contrastive_pretrain_projection_dim: int = Field(128, gt=0)
    """Used only with contrastive_pretrain_epochs."""
    contrastive_pretrain_learnable_temperature: bool = True
    """Used only with contrastive_pretrain_epochs."""
    modality_dropout: Annotated[float, ludwig_only(0.0, instead=f"{_NOT_IMPLEMENTED}; use the encoders' "
                                                                "dropout")] = 0.0
    """Ludwig: probability of dropping an input feature's encoding in training. plait accepts only 0."""
    model_soup: Annotated[Literal["uniform", "greedy"] | None, ludwig_only(
        None, instead=f"{_NOT_IMPLEMENTED}; training ends with the best evaluation's weights")] = None
    """Ludwig: average the weights of the best checkpoints. plait accepts only null."""
    model_soup_top_k: int = Field(5, gt=0)
    """Used only with model_soup."""

    @field_validator("optimizer", mode="before")
    @classmethod
    def _optimizer_type_defaults_to_adam(cls, value: Any) -> Any:
        if isinstance(value, dict) and "type" not in value:
            return {"type": "adam", **value}
        return value

    @field_validator("layers_to_freeze_regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value:
            try:
                re.compile(value)
            except re.error as err:
                raise ValueError(f"got {shown(value)}, which is no regular expression ({err})") from None
        return value

    @model_validator(mode="after")
    def _one_evaluation_interval(self):
        if self.steps_per_checkpoint and self.checkpoints_per_epoch:
            raise field_error("checkpoints_per_epoch", f"got {self.checkpoints_per_epoch} with steps_per_checkpoint "
                              f"{self.steps_per_checkpoint}; set only one of them (0 for the other)")
        return self

"""Training settings (the ``trainer`` section). Names follow Ludwig's."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from plait.config.base import StrictModel, shown


def _positive_or_auto(what: str, example: str):
    """A check that a number-or-auto setting is above zero, naming the fix."""

    def check(value):
        if value != "auto" and value <= 0:
            raise ValueError(f"got {shown(value)}; {what} must be greater than 0 ({example}), or auto")
        return value

    return AfterValidator(check)


Fraction = Annotated[float, Field(ge=0, lt=1)]


class OptimizerConfig(StrictModel):
    type: Literal["adam", "adamw", "sgd"] = "adamw"
    betas: tuple[Fraction, Fraction] = (0.9, 0.999)
    """adam and adamw: decay rates of the running means of the gradient and its square, in [0, 1)."""
    eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    """sgd only."""


class SchedulerConfig(StrictModel):
    decay: Literal["cosine", "linear", "exponential"] | None = None
    """How the learning rate falls after warmup: over the whole run (cosine, linear) or by
    ``decay_rate`` per epoch (exponential). Unset: constant after warmup."""
    warmup_fraction: float = Field(0.0, ge=0, lt=1)
    """Fraction of all training steps spent ramping the learning rate up from zero."""
    decay_rate: float = Field(0.96, gt=0, le=1)


class GradientClipping(StrictModel):
    clipglobalnorm: float | None = Field(0.5, gt=0)
    """Clip the norm of all gradients together (None: off)."""
    clipvalue: float | None = Field(None, gt=0)
    """Clip each gradient element to [-clipvalue, clipvalue] (None: off)."""


class TrainerConfig(StrictModel):
    epochs: int = Field(100, gt=0)
    """Upper bound on passes over the training set; early stopping usually ends sooner."""
    train_steps: int | None = Field(None, gt=0)
    """Train for this many optimizer steps instead of ``epochs``."""
    batch_size: Annotated[int | Literal["auto"], _positive_or_auto("the batch size", "rows per step, such as 64")] = "auto"
    """Rows per step per worker. auto: about 1/20 of the training set, between 16 and 256. The
    global batch is batch_size x workers x gradient_accumulation_steps."""
    eval_batch_size: int | None = Field(None, gt=0)
    """Rows per evaluation batch; unset, 4x batch_size (at least 1024)."""
    learning_rate: Annotated[float | Literal["auto"], _positive_or_auto("the learning rate", "such as 0.001")] = "auto"
    """auto: 1e-3 (a default that suits Adam-style optimizers on tabular and text data)."""
    learning_rate_scaling: Literal["constant", "sqrt", "linear"] = "linear"
    """How the learning rate grows with the number of workers (the global batch grows with them).
    When scaled and no warmup is set, it warms up over the first epoch (at most a tenth of the run)."""
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    learning_rate_scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    gradient_clipping: GradientClipping = Field(default_factory=GradientClipping)
    gradient_accumulation_steps: int = Field(1, gt=0)
    use_mixed_precision: bool = False
    """bf16 autocast for the forward pass. Off by default: on CPUs without bf16 units it is slower."""
    early_stop: int = Field(10, ge=-1)
    """Stop after this many evaluations without improvement of validation_metric (-1: never)."""
    validation_field: str | None = None
    """The output feature whose metric decides early stopping and the best model, or 'combined'
    (the weighted total over every output). Unset: combined."""
    validation_metric: str | None = None
    """A metric of validation_field's type (combined has loss only). Unset: loss."""
    steps_per_checkpoint: int = Field(0, ge=0)
    """Evaluate and checkpoint every N steps; 0 means once per epoch."""
    evaluate_training_set: bool = False
    """Also compute metrics on the whole training set at each evaluation (slower)."""
    should_shuffle: bool = True

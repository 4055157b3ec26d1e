"""Adapters (Ludwig's ``adapter`` section): peft's parameter-efficient fine-tuning methods, for an
LLM (``model_type: llm``) and for a pretrained Hugging Face text encoder of an ECD model.

Each type is one config class that says how to build its ``peft`` config (``peft_config``);
``Adapter`` is their union, told apart by ``type``.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from plait.config.base import StrictModel, field_error, ludwig_only, shown


class AdapterPostprocessor(StrictModel):
    merge_adapter_into_base_model: bool = False
    """Save the base model with the adapter merged in (a plain model, predicting as fast as the
    base) instead of the adapter alone (a small file that needs the base model to predict)."""
    progressbar: bool = False
    """Accepted for Ludwig compatibility; merging shows no progress bar."""


class AdapterConfig(StrictModel):
    """What every adapter has. An adapter keeps the base model's weights frozen and trains a few
    weights of its own, placed on the layers ``target_modules`` names; each type is one of peft's
    methods, and ``peft_config`` says how to build it."""

    type: str
    target_modules: list[str] | None = None
    """Names (or name endings) of the layers that get the adapter; null: peft's choice for the
    architecture (the attention projections, usually)."""
    pretrained_adapter_weights: Annotated[str | None, ludwig_only(None, instead="train the adapter with plait, or "
                                                                                "merge it into the base model first")] = None
    """Ludwig: start from adapter weights on the hub; not implemented."""
    postprocessor: AdapterPostprocessor = Field(default_factory=AdapterPostprocessor)
    """What happens to the adapter once training ends."""

    def peft_config(self, peft, task_type: str = "CAUSAL_LM"):
        """The ``peft`` config of this adapter (``peft``: the imported package) for a model of
        peft's ``task_type`` (an LLM's CAUSAL_LM; an encoder's FEATURE_EXTRACTION)."""
        raise NotImplementedError


LORA_INITS_KEEPING_THE_BASE = ("default", "gaussian", "orthogonal")
"""LoRA initializations that leave the base weights as they are (the adapter starts at zero or at
random); pissa and olora move the base's principal components into the adapter instead."""
LORA_INITS_CHANGING_THE_BASE = ("pissa", "olora")


class LoraConfig(AdapterConfig):
    """Low-rank adapters (LoRA): small matrices added to chosen layers are trained instead of
    the layers' own weights."""

    type: Literal["lora"] = "lora"
    r: int = Field(8, gt=0)
    """The rank of the adapters."""
    alpha: int | None = Field(None, gt=0)
    """Scales the adapters' output by alpha / r; null: 2 * r (Ludwig's default)."""
    dropout: float = Field(0.05, ge=0, lt=1)
    """Dropout on the adapters' input, in training."""
    bias_type: Literal["none", "all", "lora_only"] = "none"
    """Which biases train too (Ludwig's key; plait's older ``bias`` is read as it)."""
    use_rslora: bool = False
    """Rank-stabilized LoRA: scale by alpha / sqrt(r)."""
    use_dora: bool = False
    """Weight-decomposed LoRA (DoRA)."""
    init_lora_weights: Literal["default", "gaussian", "orthogonal", "pissa", "olora", "eva", "corda", "loftq"] = "default"
    """How the adapters start: default (A random, B zero: the model unchanged), gaussian,
    orthogonal; pissa and olora start from the base weights' principal components (SVD, QR) and
    take them out of the base, so the saved model holds the changed base weights too."""
    loraplus_lr_ratio: Annotated[float | None, ludwig_only(None, instead="LoRA+ needs a learning rate per weight "
                                                                       "group, which plait's optimizers do not take "
                                                                       "yet; leave it null")] = None
    """Ludwig: LoRA+ (the B matrices learn this many times faster); not implemented."""
    eva_config: Annotated[dict | None, ludwig_only(None, instead="eva initializes from activations over the "
                                                                  "training data, not implemented")] = None
    loftq_config: Annotated[dict | None, ludwig_only(None, instead="loftq is not implemented; quantize with the "
                                                                    "quantization section (QLoRA)")] = None
    rank_pattern: dict[str, int] | None = None
    """Ranks of chosen layers (name or regular expression: rank), over ``r``."""
    alpha_pattern: dict[str, float] | None = None
    """Alphas of chosen layers (name or regular expression: alpha), over ``alpha``."""
    layer_replication: list[tuple[int, int]] | None = None
    """Layers repeated to build a deeper model, as [start, end) ranges of the base's layers, each
    copy with adapters of its own (peft's layer replication)."""

    @model_validator(mode="before")
    @classmethod
    def _older_bias_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "bias" in data and "bias_type" not in data:
            data = {**data, "bias_type": data["bias"]}
            del data["bias"]
        return data

    @field_validator("init_lora_weights", mode="before")
    @classmethod
    def _true_is_default(cls, value: Any) -> Any:
        return "default" if value is True else value

    @model_validator(mode="after")
    def _init_is_implemented(self):
        if self.init_lora_weights in ("eva", "corda", "loftq"):
            raise field_error("init_lora_weights", f"got {shown(self.init_lora_weights)}; eva and corda initialize "
                                                   f"from the activations of a pass over the training data and loftq "
                                                   f"from its own quantization, which plait does not do; use "
                                                   f"{', '.join(LORA_INITS_KEEPING_THE_BASE + LORA_INITS_CHANGING_THE_BASE)}")
        return self

    @property
    def changes_base_weights(self) -> bool:
        return self.init_lora_weights in LORA_INITS_CHANGING_THE_BASE

    def peft_config(self, peft, task_type: str = "CAUSAL_LM"):
        init = True if self.init_lora_weights == "default" else self.init_lora_weights
        return peft.LoraConfig(r=self.r, lora_alpha=self.alpha or 2 * self.r, lora_dropout=self.dropout,
                               bias=self.bias_type, target_modules=self.target_modules, use_rslora=self.use_rslora,
                               use_dora=self.use_dora, init_lora_weights=init, rank_pattern=self.rank_pattern or {},
                               alpha_pattern=self.alpha_pattern or {}, layer_replication=self.layer_replication,
                               task_type=task_type)


class IA3Config(AdapterConfig):
    """(IA)^3: a learned vector rescales each chosen layer's output (or, for the layers in
    ``feedforward_modules``, its input): the fewest weights of any adapter here."""

    type: Literal["ia3"] = "ia3"
    feedforward_modules: list[str] | None = None
    """Those of target_modules whose input, rather than output, is rescaled (as in the paper, the
    feed-forward layers); null: peft's choice for the architecture."""
    fan_in_fan_out: bool = False
    """The layers store their weight as (fan_in, fan_out) (GPT-2's Conv1D)."""
    init_ia3_weights: bool = True
    """Start from vectors of ones (the base model's outputs unchanged)."""

    def peft_config(self, peft, task_type: str = "CAUSAL_LM"):
        return peft.IA3Config(target_modules=self.target_modules, feedforward_modules=self.feedforward_modules,
                              fan_in_fan_out=self.fan_in_fan_out, init_ia3_weights=self.init_ia3_weights,
                              task_type=task_type)


class LowRankProductConfig(AdapterConfig):
    """What LoHa and LoKr share: the weight update is a product of low-rank factors, scaled by
    alpha / r; ``peft_class`` names the peft config that builds it."""

    peft_class: ClassVar[str]
    r: int = Field(8, gt=0)
    """The rank of the low-rank factors."""
    alpha: float = Field(8.0, gt=0)
    """Scales the update by alpha / r."""

    def peft_config(self, peft, task_type: str = "CAUSAL_LM"):
        return getattr(peft, self.peft_class)(r=self.r, alpha=self.alpha, target_modules=self.target_modules,
                                              task_type=task_type)


class LoHaConfig(LowRankProductConfig):
    """LoHa: the weight update is the Hadamard (elementwise) product of two low-rank matrices."""

    type: Literal["loha"] = "loha"
    peft_class = "LoHaConfig"


class LoKrConfig(LowRankProductConfig):
    """LoKr: the weight update is a Kronecker product of small matrices, one of them low-rank."""

    type: Literal["lokr"] = "lokr"
    peft_class = "LoKrConfig"


class VeraConfig(AdapterConfig):
    """VeRA: two random matrices, frozen and shared by every layer, and small trained scaling
    vectors per layer (the random matrices are made again from ``projection_prng_key``)."""

    type: Literal["vera"] = "vera"
    r: int = Field(256, gt=0)
    """The rank of the shared random matrices."""
    projection_prng_key: int = Field(0, ge=0)
    """The seed of the shared random matrices."""

    def peft_config(self, peft, task_type: str = "CAUSAL_LM"):
        # The random matrices are not saved: the seed makes them again, and the saved adapter
        # holds trained weights only.
        return peft.VeraConfig(r=self.r, target_modules=self.target_modules, save_projection=False,
                               projection_prng_key=self.projection_prng_key, task_type=task_type)


class TinyLoraConfig(AdapterConfig):
    """TinyLoRA: each chosen layer's frozen weight is decomposed by SVD (rank ``r``), and a tiny
    trained vector of ``u`` values per group is projected through fixed random tensors into the
    update: as few as tens of trained weights."""

    type: Literal["tinylora"] = "tinylora"
    r: int = Field(2, gt=0)
    """The rank of the frozen SVD decomposition."""
    u: int = Field(64, gt=0)
    """Trained values per group."""
    weight_tying: float = Field(0.0, ge=0, le=1)
    """How much the trained vectors are shared across layers (0: none, 1: one for all)."""
    projection_seed: int = Field(42, ge=0)
    """The seed of the fixed random projections."""
    save_projection: bool = True
    """Ludwig's; plait saves the trained values only and makes the projections again from the
    seed and the SVD from the base weights, whatever it says."""
    tinylora_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the layers' input, in training."""

    def peft_config(self, peft, task_type: str = "CAUSAL_LM"):
        return peft.TinyLoraConfig(r=self.r, u=self.u, weight_tying=self.weight_tying,
                                   projection_seed=self.projection_seed, save_projection=False,
                                   tinylora_dropout=self.tinylora_dropout, target_modules=self.target_modules,
                                   task_type=task_type)


ADAPTERS = {config.model_fields["type"].default: config
            for config in (LoraConfig, IA3Config, LoHaConfig, LoKrConfig, VeraConfig, TinyLoraConfig)}
"""The adapters plait builds, by Ludwig's ``type``."""
ADAPTERS_NOT_IMPLEMENTED = ("adalora", "oft", "boft", "fourierft", "prompt_tuning", "prefix_tuning", "p_tuning",
                            "adaption_prompt", "c3a", "hra", "waveft", "ln_tuning", "vblora")
"""Ludwig's other adapters, refused by name."""
Adapter = Annotated[LoraConfig | IA3Config | LoHaConfig | LoKrConfig | VeraConfig | TinyLoraConfig,
                    Field(discriminator="type")]


def known_adapter(value: Any) -> Any:
    """An adapter section as written, refused by name if Ludwig's type is not implemented; Ludwig's
    default type (lora) where none is given."""
    if not isinstance(value, dict):
        return value
    if value.get("type") in ADAPTERS_NOT_IMPLEMENTED:
        raise ValueError(f"got type {shown(value['type'])}; plait implements the adapters {', '.join(ADAPTERS)} "
                         f"(or null for full fine-tuning)")
    return {"type": "lora", **value}


AdapterSection = Annotated[Adapter | None, BeforeValidator(known_adapter)]
"""An ``adapter`` key (an LLM's, a pretrained encoder's): null, or an adapter section."""


LoraConfig.model_rebuild()

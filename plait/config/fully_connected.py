"""The fully connected stack's settings, declared once for every section that ends in one.

Encoders, combiners and decoders end in Ludwig's FCStack: layers of a linear map, a norm, an
activation and dropout. One layer's settings are :class:`FCLayer`, an entry of ``fc_layers``; the
section's own settings are every layer's defaults. Ludwig spells those differently in different
sections (``norm`` in encoders and combiners, ``fc_norm`` in decoders, ``fc_activation`` where
``activation`` belongs to a recurrent or attention layer), so each section declares them under its
own names and says which is which in ``FC_NAMES``; :class:`FCStackSection`, the base of every such
section, checks the norms and resolves the layers for all of them.

The norms, their parameters and the initializers are checked here too, with one message per
mistake wherever it is made.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from plait.config.base import StrictModel, field_error, shown

Activation = Literal["relu", "gelu", "tanh", "sigmoid", "silu", "swish", "elu", "selu", "celu", "leakyRelu",
                     "leaky_relu", "logSigmoid", "softplus", "mish", "prelu", "relu6", "hardswish", "hardsigmoid",
                     "softmax"]
"""Ludwig's activation names that plait builds (``leaky_relu`` is plait's spelling of ``leakyRelu``).
Ludwig's gated ones (swiglu, geglu, reglu) and sparsemax/entmax15 are not offered."""

# ---- norms -------------------------------------------------------------------------------------

NORM_PARAMETERS: dict[str, frozenset[str]] = {
    "batch": frozenset({"eps", "momentum", "affine", "track_running_stats"}),
    "layer": frozenset({"eps", "elementwise_affine", "bias"}),
    "ghost": frozenset({"virtual_batch_size", "momentum", "epsilon"}),
}
"""The parameters each norm takes in ``norm_params`` (torch's BatchNorm and LayerNorm arguments;
ghost: plait's GhostBatchNorm)."""


GHOST_REFUSED = ("got 'ghost'; ghost batch norm is implemented in the combiners' fully connected layers only (a "
                 "combiner's norm and its fc_layers): use batch (statistics over the whole batch) or layer here")
"""The one message for ghost batch norm where it is not implemented."""


def _no_ghost(norm: Any) -> Any:
    if norm == "ghost":
        raise ValueError(GHOST_REFUSED)
    return norm


Norm = Literal["batch", "layer", "ghost"] | None
"""A norm where ghost batch norm is implemented: batch, layer, ghost (batch norm over virtual
batches) or null."""
NoGhostNorm = Annotated[Literal["batch", "layer"] | None, BeforeValidator(_no_ghost)]
"""A norm everywhere else: batch, layer or null (ghost is refused, saying where it is taken)."""


def check_norm_params(norm: str | None, params: dict | None, path: str) -> None:
    """``params`` must be arguments of ``norm`` (the norm they apply to, the section's where a layer
    sets none); ``path`` names them in the error."""
    if not params:
        return
    if norm is None:
        raise field_error(path, f"got {shown(params)}, but no norm is set; set the norm or remove these")
    unknown = sorted(set(params) - NORM_PARAMETERS[norm])
    if unknown:
        raise field_error(path, f"got {shown(params)}; {norm} norm takes {', '.join(sorted(NORM_PARAMETERS[norm]))}, "
                                f"not {', '.join(unknown)}")


# ---- initializers ------------------------------------------------------------------------------

INITIALIZER_PARAMETERS: dict[str, frozenset[str]] = {
    "uniform": frozenset({"a", "b"}), "normal": frozenset({"mean", "std", "stddev"}),
    "constant": frozenset({"val"}), "ones": frozenset(), "zeros": frozenset(), "eye": frozenset(),
    "identity": frozenset(), "xavier_uniform": frozenset({"gain"}), "xavier_normal": frozenset({"gain"}),
    "kaiming_uniform": frozenset({"a", "mode", "nonlinearity"}),
    "kaiming_normal": frozenset({"a", "mode", "nonlinearity"}), "orthogonal": frozenset({"gain"}),
    "sparse": frozenset({"sparsity", "std"}),
}
"""Ludwig's initializers of a linear layer (torch.nn.init's), each with the parameters its dict form
may carry (``{type: normal, std: 0.1}``; ``stddev`` is read as ``std``). Ludwig's ``dirac`` needs a
convolution's weight and fails on a linear layer's, so it is not one of them."""

VECTOR_INITIALIZERS = frozenset({"uniform", "normal", "constant", "ones", "zeros"})
"""The initializers defined for a bias (a vector); the others need a matrix (torch, and Ludwig 0.17
with it, fail on a vector)."""

_REQUIRED_INITIALIZER_PARAMETERS = {"constant": "val", "sparse": "sparsity"}


def _initializer(value: Any, allowed: frozenset[str]) -> Any:
    if value is None:
        return value
    name = value.get("type") if isinstance(value, dict) else value
    if name in INITIALIZER_PARAMETERS and name not in allowed:
        raise ValueError(f"got {shown(value)}; {name} initializes a matrix, and a bias is a vector: use "
                         f"{', '.join(sorted(allowed))}")
    if name not in allowed:
        raise ValueError(f"got {shown(value)}; valid initializers are: {', '.join(sorted(allowed))}")
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"type"} - INITIALIZER_PARAMETERS[name])
        if unknown:
            takes = ", ".join(sorted(INITIALIZER_PARAMETERS[name])) or "no parameters"
            raise ValueError(f"got {shown(value)}; {name} takes {takes}, not {', '.join(unknown)}")
    required = _REQUIRED_INITIALIZER_PARAMETERS.get(name)
    if required and not (isinstance(value, dict) and required in value):
        raise ValueError(f"got {shown(value)}; {name} needs its {required}: write {{type: {name}, {required}: ...}}")
    return value


WeightsInitializer = Annotated[str | dict[str, Any] | None,
                               AfterValidator(lambda value: _initializer(value, frozenset(INITIALIZER_PARAMETERS)))]
"""A linear layer's weights initializer: a name, or ``{type: name, <parameter>: value}``."""
BiasInitializer = Annotated[str | dict[str, Any] | None,
                            AfterValidator(lambda value: _initializer(value, VECTOR_INITIALIZERS))]
"""A bias initializer: one of VECTOR_INITIALIZERS, or ``{type: name, <parameter>: value}``."""

# ---- the layer and the stack -------------------------------------------------------------------


class FCLayer(StrictModel):
    """One fully connected layer, an entry of ``fc_layers``: a linear map, then norm, activation and
    dropout. A setting left out (or null) is the section's setting of the same meaning."""

    output_size: int | None = Field(None, gt=0)
    """Width of this layer."""
    use_bias: bool | None = None
    """Whether this layer's linear map adds a bias."""
    weights_initializer: WeightsInitializer = None
    """Initializer of this layer's weights: a name (xavier_uniform, kaiming_normal, normal, ...) or
    ``{type: name, <parameter>: value}``."""
    bias_initializer: BiasInitializer = None
    """Initializer of this layer's bias: zeros, ones, constant, uniform or normal (a name, or
    ``{type: name, <parameter>: value}``)."""
    norm: Norm = None
    """Normalization after this layer's linear map: batch, layer, or ghost (batch norm over virtual
    batches; combiners only)."""
    norm_params: dict[str, Any] | None = None
    """Arguments of this layer's norm: batch takes eps, momentum, affine, track_running_stats; layer
    takes eps, elementwise_affine, bias; ghost takes virtual_batch_size, momentum, epsilon."""
    activation: Activation | None = None
    """Activation after this layer's norm."""
    dropout: float | None = Field(None, ge=0, lt=1)
    """Dropout after this layer's activation."""
    input_size: int | None = Field(None, gt=0)
    """Ignored: computed from the previous layer (Ludwig writes it into rendered configs)."""
    input_rank: int | None = None
    """Ignored: plait's fully connected layers read [rows, width] (a sequence's positions as rows)."""


LAYER_KEYS = ("output_size", "use_bias", "weights_initializer", "bias_initializer", "norm", "norm_params",
              "activation", "dropout")
"""The settings of a layer that its section gives a default for."""

SEQUENCE_DEFAULT_LAYERS = (FCLayer(output_size=512), FCLayer(output_size=256))
"""Ludwig's layers after a sequence encoder whose number of layers is null (and fc_layers unset)."""


class FCStackSection(StrictModel):
    """A section that ends in fully connected layers: ``fc_layers`` (a list of FCLayer), or a number
    of layers of the section's settings. The section declares those settings, ``fc_layers`` among
    them, where its rendered config lists them (Ludwig's order); this base knows them by FC_NAMES."""

    FC_NAMES: ClassVar[dict[str, str]] = {**{key: key for key in LAYER_KEYS}, "num_fc_layers": "num_fc_layers"}
    """The section's setting that is every layer's default, by FCLayer key, and its number of layers
    (``num_fc_layers``); a section that names them otherwise overrides this."""
    TAKES_GHOST_NORM: ClassVar[bool] = False
    """Whether the section's model implements ghost batch norm in its fully connected layers (its
    norm is then a Norm, otherwise a NoGhostNorm)."""

    def fc_layer_settings(self) -> list[FCLayer]:
        """Every layer's settings, none left out: fc_layers' entries, or the number of layers the
        section sets, over the section's settings."""
        defaults = {key: getattr(self, name) for key, name in self.FC_NAMES.items() if key in LAYER_KEYS}
        count = getattr(self, self.FC_NAMES["num_fc_layers"])
        if self.fc_layers is not None:
            entries = self.fc_layers
        else:
            entries = SEQUENCE_DEFAULT_LAYERS if count is None else [FCLayer()] * count
        return [FCLayer.model_construct(**{key: defaults[key] if getattr(entry, key) is None else getattr(entry, key)
                                           for key in LAYER_KEYS})
                for entry in entries]

    @model_validator(mode="after")
    def _norm_params_fit_their_norms(self):
        norm_key, params_key = self.FC_NAMES["norm"], self.FC_NAMES["norm_params"]
        norm, params = getattr(self, norm_key), getattr(self, params_key)
        check_norm_params(norm, params, params_key)
        for i, layer in enumerate(self.fc_layers or []):
            if layer.norm == "ghost" and not self.TAKES_GHOST_NORM:
                raise field_error(f"fc_layers[{i}].norm", GHOST_REFUSED)
            check_norm_params(norm if layer.norm is None else layer.norm,
                              params if layer.norm_params is None else layer.norm_params, f"fc_layers[{i}].norm_params")
        return self

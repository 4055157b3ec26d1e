"""Reading models saved in an older layout: their config and weights, translated to today's.

A saved model records ``format_version`` in its description, and is translated one format at a
time. Format 1 covers every model saved before format 2 existed, including those saved in the days
after issue #14 changed the modules (they wrote 1 as well), so a format-1 model is translated part
by part: a part is in the old layout when its config or its weights say so (a key only the old
layout has), and is left as it is otherwise. Format 2 models had three fully connected modules
(encoders', decoders', combiners'), which format 3 made one (issue #32). A later change of layout
adds a step here.

The translation keeps what the old model computed: its predictions after loading equal the old
ones. Where today's modules cannot compute what an old one did (the old parallel_cnn text
encoder), the old module is kept in plait/models/legacy.py and the feature's metadata names it
(``LEGACY_ENCODER``): the model is then built with it, and a model saved again keeps it.
"""

from __future__ import annotations

import copy
import re

from plait.config.fully_connected import VECTOR_INITIALIZERS
from plait.models.base import module_key
from plait.models.legacy import LEGACY_ENCODER

FORMAT_VERSION = 3
"""The layout this plait writes."""


def upgrade(version: int, config: dict, metadata: dict, weights: dict) -> tuple[dict, dict, dict]:
    """The (config, metadata, weights) of a model saved with format ``version``, in today's layout."""
    if version >= FORMAT_VERSION:
        return config, metadata, weights
    config, metadata, weights = copy.deepcopy(config), copy.deepcopy(metadata), dict(weights)
    if version < 2:
        _upgrade_to_2(config, metadata, weights)
    _upgrade_to_3(config, weights)
    return config, metadata, weights


def _upgrade_to_2(config: dict, metadata: dict, weights: dict) -> None:
    """The modules issue #14 changed: text and set encoders, concat and transformer combiners."""
    _upgrade_trainer(config.get("trainer") or {})
    for feature in config.get("input_features") or []:
        prefix = f"encoders.{module_key(feature['name'])}."
        _upgrade_encoder(feature, metadata["features"].get(feature["name"], {}), _Weights(weights, prefix))
    _upgrade_combiner(config.get("combiner") or {}, _Weights(weights, "combiner."))
    for feature in config.get("output_features") or []:
        _upgrade_loss(feature.get("loss") or {})


def _upgrade_to_3(config: dict, weights: dict) -> None:
    """One fully connected module: each layer is ``stack.<i>.layers.<0: linear, 1: norm,
    2: activation, 3: dropout>``, as the combiners' were. The encoders' layers were four modules
    each in one sequence; the decoders' had only the modules they used (linear, then a norm,
    activation and dropout where set)."""
    for feature in config.get("input_features") or []:
        _Weights(weights, f"encoders.{module_key(feature['name'])}.").restack_fc("fc.")
    for feature in config.get("output_features") or []:
        head = _Weights(weights, f"heads.{module_key(feature['name'])}.")
        for stack in ("fc.", "mlp."):
            head.renumber_fc(f"{stack}layers.",
                             lambda layer, part, stack=stack: f"{stack}stack.{layer}.layers.{part}")
    _vector_bias_initializers(config)


def _vector_bias_initializers(value) -> None:
    """A bias initializer defined only for a matrix (xavier_uniform, orthogonal, ...): format 2
    initialized a bias with it as if the bias were a one-row matrix (the combiners: with a
    uniform), where Ludwig 0.17 fails, and plait now refuses it. A saved model's weights replace any
    initialization, so it is read as zeros, Ludwig's default, for the config to validate."""
    if isinstance(value, list):
        for item in value:
            _vector_bias_initializers(item)
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        name = item.get("type") if isinstance(item, dict) else item
        matrix_only = isinstance(name, str) and name not in VECTOR_INITIALIZERS
        if key in ("bias_initializer", "fc_bias_initializer") and matrix_only:
            value[key] = "zeros"
        else:
            _vector_bias_initializers(item)


class _Weights:
    """The tensors of one module of the model, by their keys under ``prefix``."""

    def __init__(self, weights: dict, prefix: str):
        self.weights, self.prefix = weights, prefix

    def has(self, key: str) -> bool:
        return any(k.startswith(self.prefix + key) for k in self.weights)

    def rename(self, old: str, new: str) -> None:
        """Every tensor under ``old`` (a key prefix, relative to the module) moves under ``new``."""
        for key in [k for k in self.weights if k.startswith(self.prefix + old)]:
            self.weights[self.prefix + new + key[len(self.prefix + old):]] = self.weights.pop(key)

    def renumber_fc(self, old: str, new_index) -> int:
        """An old FCStack's ``Sequential`` under ``old`` (a linear, then its norm and activation
        where they held tensors; dropouts hold none) moved layer by layer to
        ``new_index(layer, part)`` (part 0: the linear, 1: the norm, 2: the activation, a PReLU's
        single weight). Returns the number of layers."""
        pattern = re.compile(re.escape(self.prefix + old) + r"(\d+)\.(.+)")
        tensors: dict[int, dict[str, object]] = {}
        for key in self.weights:
            if m := pattern.fullmatch(key):
                tensors.setdefault(int(m.group(1)), {})[m.group(2)] = self.weights[key]
        layer, moves = -1, {}
        for index in sorted(tensors):
            part = _fc_part(tensors[index])
            layer += part == 0
            moves[index] = new_index(layer, part)
        for index in sorted(moves, reverse=True):  # from the back: new indices never overtake old ones
            self.rename(f"{old}{index}.", moves[index] + ".")
        return layer + 1

    def restack_fc(self, old: str) -> None:
        """The encoders' old fully connected ``Sequential`` under ``<old>layers.``, four modules a
        layer (linear, norm, activation, dropout), moved to ``<old>stack.<layer>.layers.<part>``."""
        pattern = re.compile(re.escape(self.prefix + old) + r"layers\.(\d+)\.(.+)")
        for key in [k for k in self.weights if pattern.fullmatch(k)]:
            index, rest = pattern.fullmatch(key).groups()
            layer, part = divmod(int(index), 4)
            self.weights[f"{self.prefix}{old}stack.{layer}.layers.{part}.{rest}"] = self.weights.pop(key)


def _fc_part(tensors: dict) -> int:
    """Which module of a fully connected layer holds ``tensors`` (by their names under it): 0 the
    linear (a matrix), 2 a PReLU activation (one weight of one value), 1 the norm (batch norm's
    statistics, or layer norm's weight and bias). A layer norm of width 1 without a bias would
    look like a PReLU; it normalizes one value to a constant, so no model has one."""
    weight = tensors.get("weight")
    if weight is not None and weight.dim() == 2:
        return 0
    if set(tensors) == {"weight"} and weight.numel() == 1:
        return 2
    return 1


def _upgrade_trainer(trainer: dict) -> None:
    """The old optimizer section wrote momentum whatever the optimizer's type."""
    optimizer = trainer.get("optimizer") or {}
    if optimizer.get("type") in (None, "adam", "adamw"):
        optimizer.pop("momentum", None)


def _upgrade_loss(loss: dict) -> None:
    """The old regression loss wrote huber's delta for every type."""
    if loss.get("type") in ("mean_squared_error", "mean_absolute_error"):
        loss.pop("delta", None)


def _upgrade_encoder(feature: dict, metadata: dict, weights: _Weights) -> None:
    """An old text or set encoder's tensors and settings, in today's modules."""
    encoder = feature.get("encoder") or {}
    kind = (feature.get("type"), encoder.get("type"))
    if kind == ("text", "rnn") and weights.has("rnn."):
        # The old rnn: mean of the outputs over the real tokens, its dropout between the layers.
        weights.rename("rnn.", "body.rnn.")
        encoder.update(reduce_output="mean", num_fc_layers=0, recurrent_dropout=encoder.get("dropout", 0.0),
                       dropout=0.0)
    elif kind == ("text", "transformer") and weights.has("encoder.layers."):
        # The old hidden_size was the feed-forward width (today's transformer_output_size); the
        # layers were as wide as the embeddings, and the outputs averaged over the real tokens.
        weights.rename("position", "body.position")
        weights.rename("encoder.", "body.layers.")
        encoder.update(transformer_output_size=encoder.get("hidden_size", 128),
                       hidden_size=encoder.get("embedding_size", 64), reduce_output="mean", num_fc_layers=0)
    elif kind == ("text", "parallel_cnn") and weights.has("convs."):
        metadata[LEGACY_ENCODER] = "parallel_cnn"  # the settings below only describe it
        encoder.update(reduce_output="max", num_fc_layers=0)
    elif kind == ("set", "embed") and "representation" not in encoder:
        _upgrade_set_embed(encoder, weights)


def _upgrade_set_embed(encoder: dict, weights: _Weights) -> None:
    """The old set encoder held its table as a linear map (transposed) and had no norm."""
    key = weights.prefix + "embedding.weight"
    weights.weights[key] = weights.weights[key].t().contiguous()
    weights.renumber_fc("fc.layers.", lambda layer, part: f"fc.layers.{4 * layer + part}")
    encoder.update(activation="relu", norm=None)


def _upgrade_combiner(combiner: dict, weights: _Weights) -> None:
    """The old FC stacks of concat and transformer: no norm or dropout on their input, and a
    transformer's FC layers without a norm."""
    if combiner.get("type") == "concat" and weights.has("fc.layers."):
        layers = weights.renumber_fc("fc.layers.", lambda layer, part: f"fc.stack.{layer}.layers.{part}")
        # Today's section norm and dropout also apply to the stack's input: per layer, they do not.
        layer = {key: combiner.get(key) for key in ("output_size", "activation", "dropout", "norm")}
        combiner.update(fc_layers=[dict(layer) for _ in range(layers)], norm=None, dropout=0.0)
        combiner.pop("num_fc_layers", None)
    elif combiner.get("type") == "transformer" and weights.has("fc.layers."):
        weights.renumber_fc("fc.layers.", lambda layer, part: f"head.fc.stack.{layer}.layers.{part}")
        combiner.update(fc_activation="relu", fc_dropout=combiner.get("dropout", 0.1), norm=None)

"""Reading models saved in an older layout: their config and weights, translated to today's.

A saved model records ``format_version`` in its description. Format 1 covers every model saved
before format 2 existed, including those saved in the days after issue #14 changed the modules
(they wrote 1 as well), so a format-1 model is translated part by part: a part is in the old
layout when its config or its weights say so (a key only the old layout has), and is left as it
is otherwise. Format 2 and later are read as they are; a later change of layout adds a step here.

The translation keeps what the old model computed: its predictions after loading equal the old
ones. Where today's modules cannot compute what an old one did (the old parallel_cnn text
encoder), the old module is kept in plait/models/legacy.py and the feature's metadata names it
(``LEGACY_ENCODER``): the model is then built with it, and a model saved again keeps it.
"""

from __future__ import annotations

import copy
import re

from plait.models.ecd import module_key
from plait.models.legacy import LEGACY_ENCODER

FORMAT_VERSION = 2
"""The layout this plait writes."""


def upgrade(version: int, config: dict, metadata: dict, weights: dict) -> tuple[dict, dict, dict]:
    """The (config, metadata, weights) of a model saved with format ``version``, in today's layout."""
    if version >= FORMAT_VERSION:
        return config, metadata, weights
    config, metadata, weights = copy.deepcopy(config), copy.deepcopy(metadata), dict(weights)
    _upgrade_trainer(config.get("trainer") or {})
    for feature in config.get("input_features") or []:
        prefix = f"encoders.{module_key(feature['name'])}."
        _upgrade_encoder(feature, metadata["features"].get(feature["name"], {}), _Weights(weights, prefix))
    _upgrade_combiner(config.get("combiner") or {}, _Weights(weights, "combiner."))
    for feature in config.get("output_features") or []:
        _upgrade_loss(feature.get("loss") or {})
    return config, metadata, weights


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
        """An old FCStack's ``Sequential`` under ``old`` (linear, then its norm where it had one;
        activations and dropouts hold no tensors) moved layer by layer to ``new_index(layer, part)``
        (part 0: the linear, 1: the norm). Returns the number of layers."""
        pattern = re.compile(re.escape(self.prefix + old) + r"(\d+)\.(.+)")
        found = sorted({int(m.group(1)) for k in self.weights if (m := pattern.fullmatch(k))})
        layer, moves = -1, {}
        for index in found:
            is_linear = self.weights[f"{self.prefix}{old}{index}.weight"].dim() == 2
            layer += is_linear
            moves[index] = new_index(layer, 0 if is_linear else 1)
        for index in sorted(moves, reverse=True):  # from the back: new indices never overtake old ones
            self.rename(f"{old}{index}.", moves[index] + ".")
        return layer + 1


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

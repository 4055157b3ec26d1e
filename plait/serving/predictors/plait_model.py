"""A plait model folder, served by the torch predictor that ``plait predict`` uses."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from plait.config.serve import ServeConfig
from plait.serving.predictors import ServedFeature
from plait.serving.values import ARROW_TYPES


class PlaitModelFolder:
    def __init__(self, path: str, settings: dict | None = None):
        from plait.models.saved import read_model

        self.path = path
        self.config_dict, self.metadata, self.weights = read_model(path)
        self.settings = serve_settings(self.config_dict, settings)

    def backend(self, flag: str | None) -> str:
        """``--backend`` first, else the model's backend type, where ``auto`` finds a running Ray
        cluster; a launcher's model (torchrun, ...) serves locally."""
        from plait.backends import resolve_type
        from plait.config import load_config, with_backend_type

        config = load_config(self.config_dict)
        if flag is not None:
            config = with_backend_type(config, flag)
        return "ray" if resolve_type(config) == "ray" else "local"

    def predictor(self, device: str | None = None) -> "TorchPredictor":
        from plait.inference import PredictorSpec

        spec = PredictorSpec(self.config_dict, self.metadata, weights=self.weights)
        return TorchPredictor(spec.build(device=device or _device(self.settings)), self.metadata["features"])


class TorchPredictor:
    def __init__(self, predictor, features: dict):
        self.predictor = predictor
        self.inputs = [ServedFeature(p.name, p.column, p.type, features[p.name]) for p in predictor.inputs]
        self.outputs = [ServedFeature(p.name, p.column, p.type, features[p.name]) for p in predictor.outputs]
        self.batch_size = predictor.batch_size
        self._arrow_types: dict[str, pa.DataType] = {}
        for i in self.inputs:  # a column several features read takes the first one's type
            self._arrow_types.setdefault(i.column, ARROW_TYPES.get(i.type, pa.string()))

    def predict(self, columns: dict[str, list]) -> dict[str, Any]:
        return self.predictor.predict_columns(self._table(columns))

    def explain(self, columns: dict[str, list], output: str, steps: int, every_class: bool) -> pa.Table:
        """Integrated gradients for checked values, as ``plait explain`` computes them
        (``plait.explain.rows.explain_table``)."""
        from plait.explain.rows import explain_table

        # Feature-level attributions only: a token's or a pixel's (plait explain's parts) would cost
        # one more integral per text or image input in a request, and answer lists per row.
        return explain_table(self.predictor, self._table(columns), output, steps, every_class, parts=False)

    def generator(self):
        """An LLM's :class:`~plait.inference.generate.Generator` over this predictor's module
        (None for other models)."""
        from plait.inference.generate import Generator

        predictor = self.predictor
        if getattr(predictor.config, "model_type", None) != "llm":
            return None
        return Generator(predictor.config, {"features": predictor.features}, predictor.module)

    def _table(self, columns: dict[str, list]) -> pa.Table:
        return pa.table({column: pa.array(values, self._arrow_types[column]) for column, values in columns.items()})


def serve_settings(config_dict: dict, settings: dict | None) -> ServeConfig:
    """The ``serve`` section of a model's config, with ``settings`` laid over it, checked."""
    from plait.config import load_config

    return load_config(with_serve_settings(config_dict, settings)).serve or ServeConfig()


def with_serve_settings(config_dict: dict, settings: dict | None) -> dict:
    """The model's config with ``settings`` laid over its ``serve`` section (``autoscaling``
    merged key by key)."""
    if not settings:
        return config_dict
    section = dict(config_dict.get("serve") or {})
    for key, value in settings.items():
        if key == "autoscaling" and isinstance(value, dict) and isinstance(section.get(key), dict):
            value = {**section[key], **value}
        section[key] = value
    return {**config_dict, "serve": section}


def _device(settings: ServeConfig) -> str:
    if settings.device != "auto":
        return settings.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"

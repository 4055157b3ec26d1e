"""The models plait trains: encoder-combiner-decoder (``ecd``), gradient-boosted trees (``gbm``) and
language models (``llm``)."""

from __future__ import annotations


def build_model(config, metadata: dict, load_pretrained: bool = False):
    """The model of ``config``'s model_type over its preprocessing ``metadata``; pretrained
    weights are read where ``load_pretrained`` (a model about to train)."""
    if config.model_type == "llm":
        from plait.models.llm import LLM

        return LLM(config, metadata, load_pretrained)
    if config.model_type == "gbm":
        from plait.models.gbm import GBM

        return GBM(config, metadata, load_pretrained)
    from plait.models.ecd import ECD

    return ECD(config, metadata, load_pretrained)

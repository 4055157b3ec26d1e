"""Output heads for the metrics' tests."""

from __future__ import annotations

import pytest

from plait.config import load_config
from plait.models.heads import build_head


@pytest.fixture
def make_head():
    """make_head(type, metadata, **feature options) -> an output head built from a validated config."""

    def make(ftype: str, metadata: dict, hidden: int = 4, **options):
        config = load_config({"input_features": [{"name": "x", "type": "number"}],
                              "output_features": [{"name": "y", "type": ftype, **options}]})
        return build_head(config.output_features[0], metadata, hidden)

    return make

"""The serve section: defaults when absent, every mistake named at its path."""

import pytest

from plait.config import load_config
from plait.config.serve import ServeConfig
from plait.errors import ConfigError
from plait.serving.model import serve_settings

BASE = {"input_features": [{"name": "a", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]}


def test_no_section_is_every_default_and_flags_lay_over_the_models_own():
    assert load_config(BASE).serve is None and serve_settings(BASE, None) == ServeConfig()
    config = {**BASE, "serve": {"num_replicas": 3, "autoscaling": {"max_replicas": 8}, "max_batch_size": 16}}
    settings = serve_settings(config, {"num_replicas": 2, "autoscaling": {"min_replicas": 2}})
    assert (settings.num_replicas, settings.max_batch_size) == (2, 16)
    assert (settings.autoscaling.min_replicas, settings.autoscaling.max_replicas) == (2, 8)


@pytest.mark.parametrize(("serve", "message"), [
    ({"num_replicas": 0}, "serve.num_replicas"),
    ({"autoscaling": {"min_replicas": 5, "max_replicas": 2}}, "min_replicas (5) must not exceed max_replicas (2)"),
    ({"route_prefix": "api"}, "route_prefix must start with '/'"),
    ({"max_batch_sise": 8}, "serve.max_batch_sise"),
    ({"device": "tpu"}, "serve.device"),
])
def test_mistakes_are_named(serve, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config({**BASE, "serve": serve})

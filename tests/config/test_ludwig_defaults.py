"""The settings whose default differs from Ludwig's: listed, and swapped for Ludwig's on request."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plait.config.base import LUDWIG_DEFAULT, StrictModel
from plait.config.ludwig_defaults import differing_defaults, with_ludwig_defaults


class Inner(StrictModel):
    type: Literal["a", "b"] = "a"
    size: int = Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})


class Outer(StrictModel):
    rate: float = Field(0.1, json_schema_extra={LUDWIG_DEFAULT: 0.0})
    same: int = Field(3, json_schema_extra={LUDWIG_DEFAULT: 3})
    inner: Inner = Field(default_factory=Inner, json_schema_extra={LUDWIG_DEFAULT: {"type": "b"}})
    items: list[Inner] = []


def test_unset_settings_with_another_ludwig_default_are_listed_with_their_paths():
    config = Outer.model_validate({"items": [{"type": "b"}, {"size": 8}]})
    shown = [str(d) for d in differing_defaults(config)]
    assert shown == ["rate: 0.1 (Ludwig: 0.0)", "inner: {'type': 'a'} (Ludwig: {'type': 'b'})",
                     "items[0].size: 64 (Ludwig: 256)"]


def test_settings_the_user_wrote_are_not_listed_even_at_plait_default():
    config = Outer.model_validate({"rate": 0.1, "inner": {"type": "a", "size": 64}})
    assert [d.path for d in differing_defaults(config)] == []


def test_with_ludwig_defaults_sets_each_unset_setting_to_ludwig_value_and_validates_it():
    config = Outer.model_validate({"items": [{}]})
    ludwig = with_ludwig_defaults(config)
    assert ludwig.rate == 0.0 and ludwig.inner.type == "b" and ludwig.items[0].size == 256
    assert config.rate == 0.1 and config.items[0].size == 64  # the original is untouched


def test_plait_validate_lists_the_defaults_that_differ_on_stderr_counting_features(tmp_path, capsys):
    import yaml

    from plait.cli import main

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "input_features": [{"name": "a", "type": "category"}, {"name": "b", "type": "category"}],
        "output_features": [{"name": "y", "type": "binary"}],
        "trainer": {"early_stop": 10},
    }))
    assert main(["validate", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out)["trainer"]["early_stop"] == 10  # stdout is still the resolved config
    assert "  combiner.num_fc_layers: 1 (Ludwig: 0)" in err.splitlines()
    assert "  input_features[*].encoder.embedding_size: None (Ludwig: 50), 2 features" in err.splitlines()
    assert "early_stop" not in err  # set by the user, so not a default


def test_ludwigs_combiner_for_three_inputs_or_more_is_listed_in_place_of_concats_settings():
    from plait.config import load_config

    def config(inputs: int, **extra):
        return load_config({"input_features": [{"name": f"x{i}", "type": "number"} for i in range(inputs)],
                            "output_features": [{"name": "y", "type": "binary"}], **extra})

    paths = lambda c: [d.path for d in differing_defaults(c)]  # noqa: E731
    assert "combiner" in paths(config(3)) and not any(p.startswith("combiner.") for p in paths(config(3)))
    assert "combiner" not in paths(config(2)) and "combiner.num_fc_layers" in paths(config(2))
    assert "combiner" not in paths(config(3, combiner={"type": "concat"}))
    assert with_ludwig_defaults(config(3)).combiner.type == "ft_transformer"

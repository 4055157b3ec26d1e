"""The config reference in docs/ is generated from the field declarations and must not drift."""

from pathlib import Path

from plait.config.docs import render


def test_config_reference_matches_the_field_declarations():
    committed = (Path(__file__).parents[2] / "docs" / "config.md").read_text()
    assert committed == render(), "docs/config.md is stale: run `python -m plait.config.docs > docs/config.md`"

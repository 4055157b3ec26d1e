"""Configs checked the way a user checks them: `plait validate --config c.yaml`."""

from __future__ import annotations

import pytest

from plait.cli import main
from small_config import FEATURES  # a module beside this file


@pytest.fixture
def validate(write_config, capsys):
    """validate(**sections) -> (exit code, stdout, stderr) of `plait validate` on FEATURES plus
    ``sections``, written to a YAML file."""

    def run(**sections):
        code = main(["validate", "--config", write_config({**FEATURES, **sections})])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def refused(validate):
    """refused(**sections) -> the one problem `plait validate` reports, after checking it exits 2
    with a single `plait: error:` message and no traceback."""

    def run(**sections) -> str:
        code, out, err = validate(**sections)
        assert code == 2, out
        assert out == "" and "Traceback" not in err
        lines = err.splitlines()
        assert err.count("plait: error:") == 1 and lines[0] == "plait: error: invalid config:", err
        assert len(lines) == 2, f"one problem expected: {err}"
        return lines[1].strip()

    return run

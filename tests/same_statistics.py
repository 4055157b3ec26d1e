"""Statistics compared as a person would: counts and labels exactly, floats to rounding, through
any nesting (Ludwig's test statistics hold matrices, curves and per-class tables)."""

from __future__ import annotations

import pytest


def assert_same_statistics(got, want, rel: float = 1e-6, abs: float = 1e-9, path: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_same_statistics(got[key], want[key], rel, abs, f"{path}/{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{path}: lengths differ"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_statistics(g, w, rel, abs, f"{path}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=rel, abs=abs), path
    else:
        assert got == want, path

"""Helpers for feature tests that preprocess whole datasets."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def preprocessed_in_parts(tmp_path, make_config):
    """preprocessed_in_parts(inputs, outputs, frame, parts) -> (the bytes of every split's files,
    the features' metadata) of ``frame`` preprocessed in ``parts`` partitions, uncached."""
    from plait.config import load_config
    from plait.data.engines.local import LocalEngine
    from plait.data.preprocess import preprocess

    def run(inputs: list[dict], outputs: list[dict], frame, parts: int):
        config = make_config(inputs, outputs, backend={"cache_dir": str(tmp_path / f"cache{parts}")})
        data = preprocess(load_config(config), frame, engine=LocalEngine(num_partitions=parts), use_cache=False)
        files = [Path(f).read_bytes() for split in ("training", "validation", "test") for f in data.split_files(split)]
        return files, data.metadata["features"]

    return run

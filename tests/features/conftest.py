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


def _padded(processor, values, metadata: dict) -> list:
    """Transformed rows (tokens, series, audio frames) as the model reads them: padded to the
    feature's length."""
    import pyarrow as pa

    from plait.data.tensors import column_tensor

    column = processor.transform(processor.prepare(values if isinstance(values, pa.Array) else pa.array(values)),
                                 metadata)
    return column_tensor(column, {**metadata, "type": processor.type, "output": processor.is_output}).tolist()


@pytest.fixture
def padded_transform():
    """padded_transform(processor, values, metadata) -> token rows padded as the model reads them."""
    return _padded


@pytest.fixture
def padded_fit_transform(fit):
    """padded_fit_transform(processor, training, values=None) -> (metadata, padded token rows)."""

    def run(processor, training, values=None):
        metadata = fit(processor, training)
        return metadata, _padded(processor, training if values is None else values, metadata)

    return run

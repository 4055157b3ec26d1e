"""The canonical split layout: files of a fixed row count, whatever the partitioning."""

from pathlib import Path

import numpy as np

from plait.config import load_config
from plait.data import layout
from plait.data.engines.local import LocalEngine
from plait.data.preprocess import preprocess


def test_plan_cuts_files_at_fixed_row_counts_across_partitions():
    counts = [np.array([3, 1, 0]), np.array([0, 0, 0]), np.array([4, 2, 1])]
    tasks = layout.plan(counts, 0, "out/training", rows_per_file=5)
    assert [t.path for t in tasks] == ["out/training/part-00000.parquet", "out/training/part-00001.parquet"]
    assert [t.slices for t in tasks] == [((0, 0, 3), (2, 0, 2)), ((2, 2, 4),)]
    assert [t.rows for t in tasks] == [5, 2]


def test_an_empty_split_still_gets_one_empty_file():
    tasks = layout.plan([np.array([2, 0, 0])], 1, "out/validation", rows_per_file=5)
    assert len(tasks) == 1 and tasks[0].rows == 0


def test_multi_file_splits_are_byte_identical_across_partitionings(tmp_path, monkeypatch, make_dataset, every_type_config, every_type_data):
    monkeypatch.setattr(layout, "ROWS_PER_FILE", 7)
    path = make_dataset(every_type_data(), "data.parquet")
    results = []
    for parts in (1, 6):
        config = load_config(every_type_config(backend={"cache_dir": str(tmp_path / f"cache{parts}")}))
        data = preprocess(config, path, engine=LocalEngine(num_partitions=parts), use_cache=False)
        files = {s: [Path(f).read_bytes() for f in data.split_files(s)] for s in ("training", "validation", "test")}
        results.append((files, data.metadata))
        assert len(files["training"]) > 1
        assert data.read_split("training").num_rows == data.rows("training")
    assert results[0] == results[1]

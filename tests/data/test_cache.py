"""The preprocessed-data cache: hits, what invalidates it, and that no broken entry is ever used."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path

import pandas as pd
import pytest

from plait.config import load_config
from plait.data.engines.local import LocalEngine
from plait.data.preprocess import preprocess
from plait.features.number import NumberProcessor

ROWS = {"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "c": list("abcabc"), "y": ["yes", "no"] * 3}
INPUTS = [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}]
OUTPUTS = [{"name": "y", "type": "binary"}]


@pytest.fixture
def dataset(make_dataset) -> str:
    return make_dataset(ROWS)


@pytest.fixture
def run(make_config):
    """run(dataset, **config sections, seed=42, engine=None) -> PreprocessedData."""

    def go(dataset, seed=42, engine=None, inputs=None, **sections):
        config = load_config(make_config(inputs or INPUTS, OUTPUTS, **sections))
        return preprocess(config, dataset, seed=seed, engine=engine)

    return go


def entries(cache_dir: str) -> list[str]:
    return sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []


def test_second_run_uses_the_cache(run, dataset, caplog):
    first = run(dataset)
    assert not first.from_cache
    with caplog.at_level(logging.INFO, logger="plait"):
        second = run(dataset)
    assert second.from_cache
    assert second.location == first.location
    assert second.metadata == first.metadata
    assert any(r.getMessage().startswith("Using cached preprocessed data") for r in caplog.records)


def test_cache_entry_holds_a_parquet_folder_per_split_and_metadata(run, dataset, cache_dir):
    data = run(dataset)
    assert entries(cache_dir) == [Path(data.location).name]
    assert Path(data.location).name.startswith("data-")
    assert sorted(os.listdir(data.location)) == ["metadata.json", "test", "training", "validation"]
    assert [os.listdir(Path(data.location) / split) for split in ("training", "validation", "test")] == [["part-00000.parquet"]] * 3
    assert json.loads((Path(data.location) / "metadata.json").read_text()) == data.metadata


def test_training_settings_do_not_invalidate_the_cache(run, dataset):
    first = run(dataset)
    assert run(dataset, trainer={"epochs": 3, "learning_rate": 0.1}, combiner={"type": "transformer"}).location == first.location


def test_changed_feature_preprocessing_rebuilds(run, dataset):
    first = run(dataset)
    inputs = [{"name": "x", "type": "number", "preprocessing": {"normalization": "minmax"}}, INPUTS[1]]
    second = run(dataset, inputs=inputs)
    assert not second.from_cache
    assert second.location != first.location
    assert second.metadata["features"]["x"]["normalization"] == "minmax"


def test_changed_type_level_preprocessing_rebuilds(run, dataset):
    first = run(dataset)
    second = run(dataset, preprocessing={"category": {"most_common": 1}})
    assert not second.from_cache and second.location != first.location


def test_changed_split_rebuilds(run, dataset):
    first = run(dataset)
    second = run(dataset, preprocessing={"split": {"probabilities": [0.5, 0.25, 0.25]}})
    assert not second.from_cache and second.location != first.location


def test_changed_seed_rebuilds(run, dataset):
    first = run(dataset, seed=1)
    second = run(dataset, seed=2)
    assert not second.from_cache and second.location != first.location


def test_changed_data_file_rebuilds(run, dataset, make_dataset):
    first = run(dataset)
    make_dataset({**ROWS, "x": [1.0, 2.0, 3.0, 4.0, 5.0, 600.0]})  # same path, different size
    second = run(dataset)
    assert not second.from_cache and second.location != first.location
    assert second.metadata["features"]["x"]["mean"] != first.metadata["features"]["x"]["mean"]


def test_touched_data_file_of_the_same_size_rebuilds(run, dataset):
    run(dataset)
    stat = os.stat(dataset)
    os.utime(dataset, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert not run(dataset).from_cache


def test_same_dataframe_content_uses_the_cache_and_changed_content_rebuilds(run):
    first = run(pd.DataFrame(ROWS))
    assert Path(first.location).name.startswith("dataframe-")
    assert run(pd.DataFrame(ROWS)).from_cache
    assert not run(pd.DataFrame({**ROWS, "c": list("abcabd")})).from_cache


def test_a_dataframe_with_lists_in_its_cells_is_cached_by_content(run):
    inputs = [{"name": "v", "type": "vector"}]
    vectors = [[float(i), 1.0] for i in range(6)]
    assert not run(pd.DataFrame({**ROWS, "v": vectors}), inputs=inputs).from_cache
    assert run(pd.DataFrame({**ROWS, "v": [list(v) for v in vectors]}), inputs=inputs).from_cache
    assert not run(pd.DataFrame({**ROWS, "v": vectors[:-1] + [[9.0, 1.0]]}), inputs=inputs).from_cache


def test_cache_defaults_to_a_folder_beside_the_dataset(make_dataset, tmp_path):
    path = make_dataset(ROWS)
    config = load_config({"input_features": INPUTS, "output_features": OUTPUTS})
    data = preprocess(config, path)
    assert Path(data.location).parent == tmp_path / ".plait-cache"


# ---- atomicity ------------------------------------------------------------------------------

def test_entry_without_metadata_is_not_trusted_and_is_rebuilt(run, dataset):
    first = run(dataset)
    (Path(first.location) / "metadata.json").unlink()
    second = run(dataset)
    assert not second.from_cache
    assert second.location == first.location
    assert (Path(second.location) / "metadata.json").is_file()
    assert run(dataset).from_cache


def test_entry_whose_parquet_size_differs_from_metadata_is_rebuilt(run, dataset):
    first = run(dataset)
    training = Path(first.split_files("training")[0])
    good = training.read_bytes()
    training.write_bytes(good[: len(good) // 2])
    second = run(dataset)
    assert not second.from_cache
    assert training.read_bytes() == good
    assert second.read_split("training").num_rows == first.rows("training")


def test_entry_with_unreadable_metadata_is_rebuilt(run, dataset):
    first = run(dataset)
    (Path(first.location) / "metadata.json").write_text('{"cache_key": ')
    assert not run(dataset).from_cache


def test_failure_during_the_build_leaves_no_entry_and_no_temporary_files(run, dataset, cache_dir, monkeypatch):
    calls = []
    original = NumberProcessor.transform

    def fail_on_second_partition(self, column, metadata):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return original(self, column, metadata)

    monkeypatch.setattr(NumberProcessor, "transform", fail_on_second_partition)
    with pytest.raises(RuntimeError, match="disk on fire"):
        run(dataset, engine=LocalEngine(num_partitions=3, threads=1))
    assert len(calls) == 2
    assert entries(cache_dir) == []

    monkeypatch.setattr(NumberProcessor, "transform", original)
    data = run(dataset)
    assert not data.from_cache
    assert entries(cache_dir) == [Path(data.location).name]


def test_failed_rebuild_of_a_broken_entry_leaves_nothing_behind(run, dataset, cache_dir, monkeypatch):
    first = run(dataset)
    (Path(first.location) / "metadata.json").unlink()

    def fail(self, column, metadata):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(NumberProcessor, "transform", fail)
    with pytest.raises(RuntimeError):
        run(dataset)
    # The broken entry may stay (it is never trusted), but nothing temporary does.
    assert all(".tmp-" not in name for name in entries(cache_dir))
    monkeypatch.undo()
    assert not run(dataset).from_cache
    assert run(dataset).from_cache


# ---- two processes building the same entry at once ---------------------------------------------

class _PublishTogether(LocalEngine):
    """The local engine, waiting after it wrote an entry's files until the other process has too:
    both then publish the same entry at the same moment, as two runs started together would."""

    def __init__(self, barrier):
        super().__init__(threads=1)
        self.barrier = barrier

    def write(self, data, tasks, fs, schema) -> list[int]:
        sizes = super().write(data, tasks, fs, schema)
        self.barrier.wait(timeout=120)
        return sizes


def _preprocess_in_a_process(config: dict, dataset: str, barrier, results) -> None:
    data = preprocess(load_config(config), dataset, engine=_PublishTogether(barrier))
    results.put((data.location, data.metadata, data.read_split("training").num_rows))


@pytest.mark.parametrize("before", ["no entry", "a broken entry"])
def test_two_processes_building_the_same_entry_at_once_both_succeed_with_one_whole_entry(
        run, make_config, dataset, cache_dir, before):
    if before == "a broken entry":
        (Path(run(dataset).location) / "metadata.json").unlink()
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    config = make_config(INPUTS, OUTPUTS)
    processes = [context.Process(target=_preprocess_in_a_process, args=(config, dataset, barrier, results)) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
    assert [p.exitcode for p in processes] == [0, 0]
    (location, metadata, rows), second = results.get(timeout=10), results.get(timeout=10)
    assert second == (location, metadata, rows)
    assert entries(cache_dir) == [Path(location).name]  # nothing temporary, nothing moved aside
    assert json.loads((Path(location) / "metadata.json").read_text()) == metadata
    data = run(dataset)
    assert data.from_cache and data.metadata == metadata and data.read_split("training").num_rows == rows


def _rewrite_keeping_size_and_mtime(path: str, content: bytes) -> None:
    stat = os.stat(path)
    assert len(content) == stat.st_size
    Path(path).write_bytes(content)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("rows", [6, 40_000], ids=["small", "larger-than-two-samples"])
def test_data_rewritten_with_the_same_size_and_mtime_is_not_taken_from_the_cache(rows, make_config, write_config,
                                                                                  tmp_path, capsys):
    from plait.cli import main

    path = tmp_path / "data.csv"
    # The first row changes (0.0 -> 8.0): same size, in the first sampled block of either file.
    xs = [float(i % 9) for i in range(rows)]
    pd.DataFrame({"x": xs, "c": ["a", "b"] * (rows // 2), "y": ["yes", "no"] * (rows // 2)}).to_csv(path, index=False)
    config = write_config(make_config(INPUTS, OUTPUTS))
    preprocess_cli = lambda: (main(["preprocess", "--config", config, "--dataset", str(path)]), capsys.readouterr())
    (code, (out, err)) = preprocess_cli()
    assert code == 0, err
    assert json.loads(out)["from_cache"] is False
    text = path.read_bytes()
    _rewrite_keeping_size_and_mtime(str(path), text.replace(b"\n0.0,a,yes\n", b"\n8.0,a,yes\n", 1))
    (code, (out, err)) = preprocess_cli()
    assert code == 0, err
    assert json.loads(out)["from_cache"] is False
    (code, (out, err)) = preprocess_cli()
    assert json.loads(out)["from_cache"] is True  # the same content again: the cache serves it


def test_parquet_rewritten_with_the_same_size_and_mtime_is_not_taken_from_the_cache(run, tmp_path):
    path = tmp_path / "data.parquet"
    pd.DataFrame(ROWS).to_parquet(path, index=False)
    run(str(path))
    changed = tmp_path / "changed.parquet"
    pd.DataFrame({**ROWS, "x": [1.0, 2.0, 3.0, 4.0, 5.0, 7.0]}).to_parquet(changed, index=False)
    _rewrite_keeping_size_and_mtime(str(path), changed.read_bytes())
    assert not run(str(path)).from_cache

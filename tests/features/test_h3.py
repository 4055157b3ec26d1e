"""H3 features: a 64-bit cell index (integer or hex) as Ludwig's nineteen numbers; bad indexes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from plait.errors import DataError

TARGET = {"name": "y", "type": "binary"}
CELL = 622236723497533439
"""A resolution-10 cell (hex 8a2a100d645ffff) of base cell 21."""
CELL_PARTS = [1, 0, 10, 21, 0, 2, 0, 0, 3, 2, 6, 2, 1, 3, 7, 7, 7, 7, 7]
LUDWIG_FILL_PARTS = [1, 0, 0, 0] + [7] * 15


def h3(make_processor, **preprocessing):
    return make_processor("h3", preprocessing or None)


def cells(base_cells: np.ndarray, digits: np.ndarray, resolution: int = 4) -> np.ndarray:
    """H3 cell indexes of these base cells and per-row digits (the first ``resolution`` used)."""
    index = (1 << 59) | (resolution << 52) | (base_cells.astype(np.int64) << 45)
    padded = np.where(np.arange(15) < resolution, digits, 7).astype(np.int64)
    return index | (padded << (42 - 3 * np.arange(15))).sum(1)


def test_an_index_becomes_mode_edge_resolution_base_cell_and_15_digits(make_processor, fit_transform):
    processor = h3(make_processor)
    for column in (pa.array([CELL]), pa.array(["8a2a100d645ffff"]), pa.array(["0x8A2A100D645FFFF"]), pa.array([str(CELL)])):
        assert fit_transform(processor, column)[1] == [CELL_PARTS]
    assert processor.transform(processor.prepare(pa.array([CELL])), {"fill_value": CELL}).type == pa.list_(pa.uint8(), 19)


def test_missing_indexes_get_ludwigs_fill_or_the_most_common_cell(make_processor, fit_transform):
    assert fit_transform(h3(make_processor), [CELL, None])[1][1] == LUDWIG_FILL_PARTS
    assert fit_transform(h3(make_processor, fill_value="8a2a100d645ffff"), ["", "nan"])[1] == [CELL_PARTS] * 2
    meta, out = fit_transform(h3(make_processor, missing_value_strategy="fill_with_mode"), [CELL, CELL, 576495936675512319, None])
    assert meta["fill_value"] == CELL and out[3] == CELL_PARTS


@pytest.mark.parametrize(("value", "why"), [
    ("zz", "not an integer or a hex string"),
    (123, "mode 0, where a cell has 1 and a directed edge 2"),
    (CELL | (1 << 56), "a cell (mode 1) with edge bits 1"),
    ((CELL & ~(0x7F << 45)) | (122 << 45), "base cell 122, past 121"),
    (CELL & ~(7 << 12), "a digit other than 7 past its resolution, 10"),
    (CELL | (7 << 42), "a digit 7 within its resolution, 10"),
])
def test_an_invalid_index_says_what_is_wrong_with_it(make_processor, value, why):
    with pytest.raises(DataError) as info:
        h3(make_processor).prepare(pa.array([str(CELL), str(value), None]))
    assert str(info.value) == (
        f"h3 feature 'f': 1 value(s) of column 'f' are not H3 cell indexes, such as {str(value)!r} ({why}); give "
        f"64-bit H3 indexes, as integers (622236723497533439) or hex strings (8a2a1072b59ffff)")


def test_floats_that_rounded_the_indexes_are_refused_with_the_fix(make_processor):
    with pytest.raises(DataError, match=r"holds floating-point numbers.*astype\('Int64'\)"):
        h3(make_processor).prepare(pa.array([float(CELL), None]))


def test_partitioning_does_not_change_a_single_byte(preprocessed_in_parts):
    rng = np.random.default_rng(0)
    index = cells(rng.integers(0, 122, 200), rng.integers(0, 7, (200, 15)))
    frame = pd.DataFrame({"h": pd.array(index, dtype="Int64"), "y": rng.random(200) < 0.5})
    frame.loc[::9, "h"] = None
    inputs = [{"name": "h", "type": "h3", "preprocessing": {"missing_value_strategy": "fill_with_mode"}}]
    assert preprocessed_in_parts(inputs, [TARGET], frame, 1) == preprocessed_in_parts(inputs, [TARGET], frame, 20)


@pytest.mark.parametrize("encoder", ["embed", "weighted_sum", "rnn"])
def test_a_category_set_by_the_base_cell_is_learned(tmp_path, encoder):
    from plait.api import Model

    rng = np.random.default_rng(2)
    base = rng.choice([3, 17, 40, 88, 121], 300)
    frame = pd.DataFrame({"where": [f"{i:x}" for i in cells(base, rng.integers(0, 7, (300, 15)))],
                          "region": np.where(base < 20, "north", np.where(base < 60, "middle", "south"))})
    config = {"input_features": [{"name": "where", "type": "h3", "encoder": encoder}],
              "output_features": [{"name": "region", "type": "category"}],
              "trainer": {"epochs": 3, "batch_size": 16, "learning_rate": 0.03},
              "backend": {"type": "local", "cache_dir": str(tmp_path)}}
    model = Model(config)
    model.train(dataset=frame, random_seed=1, progress_bar=False)
    assert (model.predict(frame).region_predictions == frame.region).mean() > 0.95


def test_bad_indexes_through_the_cli_are_one_clean_error(make_config, write_config, make_dataset, cli_error):
    path = make_dataset({"h": [str(CELL)] * 9 + ["not-a-cell"], "y": [True, False] * 5})
    config = write_config(make_config([{"name": "h", "type": "h3"}], [TARGET]))
    error = cli_error("preprocess", "--config", config, "--dataset", path)
    assert "h3 feature 'h': 1 value(s) of column 'h' are not H3 cell indexes, such as 'not-a-cell'" in error

"""Column types inferred from the data by Ludwig's AutoML rules, with their reasons."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from plait.automl.auto_config import build, to_yaml
from plait.automl.columns import exclusion, infer_type, profile
from plait.data.io import from_pandas
from plait.errors import DataError, UsageError

ROWS = 200


def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    words = ["the", "film", "was", "long", "and", "quite", "good", "bad", "plot", "actor"]
    return pd.DataFrame({
        "": np.arange(ROWS),                                            # a saved CSV index
        "user_id": [f"u{i}" for i in range(ROWS)],
        "amount": rng.normal(size=ROWS),
        "city": rng.choice(["paris", "oslo", "lima"], ROWS),
        "answer": rng.choice(["yes", "no"], ROWS),
        "bot": rng.choice(["human", "bot"], ROWS),
        "stars": rng.integers(1, 6, ROWS),                               # 1..5, every one present
        "sizes": rng.choice([1.5, 2.5, 10.0], ROWS),
        "review": [" ".join(rng.choice(words, 8)) for _ in range(ROWS)],
        "name": [f"{rng.choice(words)} {i}" for i in range(ROWS)],
        "car": [f"{rng.choice(['ford', 'fiat', 'audi'])} model{i % 150}" for i in range(ROWS)],  # makers recur
        "day": pd.date_range("2024-01-01", periods=ROWS).strftime("%Y-%m-%d"),
        "pixels": [" ".join(str(v) for v in rng.integers(0, 16, 4)) for _ in range(ROWS)],
        "constant": ["same"] * ROWS,
        "label": rng.choice(["a", "b", "c"], ROWS),
    })


def inferred() -> dict[str, tuple[str, str, str | None]]:
    columns = profile(from_pandas(table()))
    out = {}
    for column in columns:
        kind, reason = infer_type(column)
        out[column.name] = (kind, reason, exclusion(column, kind, len(columns)))
    return out


def test_each_rule_gives_the_type_ludwig_would_and_says_why():
    types = inferred()
    assert {name: kind for name, (kind, _, _) in types.items()} == {
        "": "number", "user_id": "text", "amount": "number", "city": "category", "answer": "binary",
        "bot": "category",  # two values, but not true and false
        "stars": "category", "sizes": "number", "review": "text", "name": "text", "car": "text",
        "day": "date",
        "pixels": "vector", "constant": "category", "label": "category"}
    assert "two values that read as true and false (no, yes)" in types["answer"][1]
    assert "every integer from the smallest to the largest" in types["stars"][1]
    assert "8.0 words per value" in types["review"][1]
    assert "but its words recur" in types["car"][1] and "plait's rule" in types["car"][1]
    assert "4 numbers separated by spaces" in types["pixels"][1] and "Ludwig would read them as text" in types["pixels"][1]


def test_ids_counters_constants_and_short_text_are_left_out_with_the_reason():
    left_out = {name: why for name, (_, _, why) in inferred().items() if why}
    assert set(left_out) == {"", "user_id", "name", "constant"}
    assert "counts the rows" in left_out[""]
    assert "identifier" in left_out["user_id"]
    assert "2.0 words per value" in left_out["name"]
    assert "single value" in left_out["constant"]


def test_the_config_reads_back_and_names_every_reason():
    from plait.config import load_config

    auto = build(from_pandas(table()), "label", "table.csv")
    text = to_yaml(auto)
    config = load_config(__import__("yaml").safe_load(text))
    assert [f.name for f in config.output_features] == ["label"]
    assert {f.name for f in config.input_features} == {"amount", "city", "answer", "bot", "stars", "sizes", "review",
                                                       "car", "day", "pixels"}
    assert "    type: date  # its values are dates" in text
    assert '#   "": the first column counts the rows' in text


def test_a_target_that_is_not_there_or_has_one_value_is_refused():
    with pytest.raises(UsageError, match="'nope': table.csv has no such column; its columns are: , user_id"):
        build(from_pandas(table()), "nope", "table.csv")
    with pytest.raises(DataError, match="'constant': the column has 1 distinct value"):
        build(from_pandas(table()), "constant", "table.csv")

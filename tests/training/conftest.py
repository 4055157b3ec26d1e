"""Shared helpers for training tests: small synthetic datasets and configs with a tmp cache."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from plait.config import load_config

WORDS = ["apple", "river", "stone", "cloud", "green", "paper", "music", "light", "table", "chair"]


def tabular_frame(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    """Binary label y = x1 + x2 > 0, with an unrelated category column c."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x1": rng.normal(size=rows), "x2": rng.normal(size=rows),
                       "c": rng.choice(["red", "green", "blue"], rows)})
    df["y"] = df.x1 + df.x2 > 0
    return df


def text_frame(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    """Binary label: whether the word 'magic' appears in the text."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(rows):
        words = list(rng.choice(WORDS, rng.integers(3, 8)))
        has = bool(i % 2)
        if has:
            words.insert(int(rng.integers(0, len(words) + 1)), "magic")
        texts.append(" ".join(words))
        labels.append(has)
    return pd.DataFrame({"text": texts, "label": labels})


def regression_frame(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    """target = 50 + 10 * (2 a - b) + small noise, in data units far from zero mean."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=rows), "b": rng.normal(size=rows)})
    df["target"] = 50 + 10 * (2 * df.a - df.b) + rng.normal(scale=0.5, size=rows)
    return df


TABULAR_INPUTS = [{"name": "x1", "type": "number"}, {"name": "x2", "type": "number"}, {"name": "c", "type": "category"}]
TABULAR_OUTPUTS = [{"name": "y", "type": "binary"}]


@pytest.fixture
def frames() -> SimpleNamespace:
    """frames.tabular / .text / .regression (rows=400, seed=0) -> a synthetic DataFrame."""
    return SimpleNamespace(tabular=tabular_frame, text=text_frame, regression=regression_frame)


@pytest.fixture
def tabular_df() -> pd.DataFrame:
    return tabular_frame()


@pytest.fixture
def text_df() -> pd.DataFrame:
    return text_frame()


@pytest.fixture
def regression_df() -> pd.DataFrame:
    return regression_frame()


@pytest.fixture
def train_config(tmp_path):
    """train_config(inputs=tabular, outputs=binary y, trainer options..., **sections) -> a config dict
    with a small trainer (few epochs, batch 32, no progress noise) and the cache in tmp_path."""

    def make(inputs=None, outputs=None, sections: dict | None = None, **trainer) -> dict:
        trainer = {"epochs": 4, "batch_size": 32, "learning_rate": 0.01, **trainer}
        return {
            "input_features": inputs or TABULAR_INPUTS,
            "output_features": outputs or TABULAR_OUTPUTS,
            "trainer": trainer,
            "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")},
            **(sections or {}),
        }

    return make

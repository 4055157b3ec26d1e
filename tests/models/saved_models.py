"""Models saved by an older plait, kept as test fixtures with their predictions: each fixture
folder's make.py writes them from a checkout of that plait (write_fixtures), and the tests check
that today's plait predicts the same (assert_predictions)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd


def read_data(folder: Path) -> pd.DataFrame:
    """The rows the fixtures in ``folder`` were trained on and predicted."""
    return pd.read_csv(folder / "data.csv", keep_default_na=False)


def as_json(predictions: pd.DataFrame) -> dict:
    """Predictions as JSON lists (numpy arrays and scalars to plain lists and numbers)."""
    def plain(value):
        if isinstance(value, np.ndarray):
            return [plain(v) for v in value.tolist()]
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value.item() if isinstance(value, np.generic) else value
    return {column: [plain(v) for v in predictions[column]] for column in predictions.columns}


def write_fixtures(folder: Path, data: pd.DataFrame, models: dict[str, dict], trainer: dict, **train_options) -> None:
    """Train each of ``models`` with the plait on the path on ``data`` (written to ``folder`` first
    and read back as the tests read it), save it under ``folder/<name>/`` and write its predictions
    on the same rows beside it."""
    import torch

    from plait.api import Model

    data.to_csv(folder / "data.csv", index=False)
    data = read_data(folder)
    for name, config in models.items():
        torch.manual_seed(0)
        model = Model({**config, "trainer": trainer, "backend": {"type": "local"}})
        model.train(data, progress_bar=False, **train_options)
        shutil.rmtree(folder / name, ignore_errors=True)
        model.save(folder / name)
        predictions = Model.load(folder / name).predict(data)
        (folder / name / "predictions.json").write_text(json.dumps(as_json(predictions)))
        print(name, sorted(p.name for p in (folder / name).iterdir()), list(predictions.columns))


def assert_predicts_as_saved(model_path: Path, fixture: Path) -> None:
    """The model at ``model_path`` (the fixture, or a copy saved again) predicts on the fixtures'
    rows what the fixture's plait predicted."""
    from plait.api import Model

    model = Model.load(model_path)
    try:
        assert_predictions(model.predict(read_data(fixture.parent)), fixture)
    finally:
        model.close()


def assert_predictions(predictions: pd.DataFrame, folder: Path) -> None:
    """``predictions`` are the ones saved in ``folder``: numbers equal to float32 precision."""
    expected = json.loads((folder / "predictions.json").read_text())
    assert sorted(predictions.columns) == sorted(expected)
    for column, values in expected.items():
        _assert_same(predictions[column].tolist(), values, column)


def _assert_same(got, expected, where: str) -> None:
    """Numbers equal to float32 precision, everything else equal, in nested lists."""
    if isinstance(expected, list):
        got = list(got)
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same(g, e, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert math.isclose(float(got), expected, rel_tol=1e-5, abs_tol=1e-6), f"{where}: {got} != {expected}"
    else:
        got = got.item() if hasattr(got, "item") else got
        assert got == expected, f"{where}: {got!r} != {expected!r}"

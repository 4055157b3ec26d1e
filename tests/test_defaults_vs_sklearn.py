"""plait's defaults hold their own against scikit-learn on small real data.

A config that names only the features (every other setting default) is compared with
StandardScaler + LogisticRegression / Ridge and HistGradientBoosting on the same stratified
80/20 split; plait holds out a fifth of its 80% as the validation set for early stopping.
The full comparison (4 datasets, 5 seeds) is benchmarks/sklearn_compare.py.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

sklearn = pytest.importorskip("sklearn")

from sklearn import datasets  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.metrics import accuracy_score, r2_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from plait import Model  # noqa: E402

SEEDS = (0, 1)
TARGET = "target"


def scores(name: str, seed: int, cache_dir: str) -> tuple[float, float]:
    """(plait's test score, the better baseline's) for one dataset and seed."""
    if name == "iris":
        bunch, output_type, score = datasets.load_iris(as_frame=True), "category", accuracy_score
        baselines = [make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
                     HistGradientBoostingClassifier(random_state=seed)]
    else:
        bunch, output_type, score = datasets.load_diabetes(as_frame=True), "number", r2_score
        baselines = [make_pipeline(StandardScaler(), Ridge()), HistGradientBoostingRegressor(random_state=seed)]
    df = bunch.frame.copy()
    classification = output_type == "category"
    if classification:
        df[TARGET] = np.asarray(bunch.target_names)[bunch.target.to_numpy()]
    train, test = train_test_split(df, test_size=0.2, random_state=seed, stratify=df[TARGET] if classification else None)
    x_train, x_test = train.drop(columns=[TARGET]), test.drop(columns=[TARGET])
    best = max(score(test[TARGET], b.fit(x_train, train[TARGET]).predict(x_test)) for b in baselines)

    fit, validation = train_test_split(train, test_size=0.2, random_state=seed,
                                       stratify=train[TARGET] if classification else None)
    model = Model({
        "input_features": [{"name": c, "type": "number"} for c in x_train.columns],
        "output_features": [{"name": TARGET, "type": output_type}],
        # local: once the session's Ray is up, auto would train every model on a Ray Train group
        "backend": {"type": "local", "cache_dir": cache_dir},
    })
    model.train(training_set=fit, validation_set=validation, random_seed=seed, progress_bar=False)
    predicted = model.predict(x_test)[f"{TARGET}_predictions"].to_numpy()
    return score(test[TARGET], predicted), best


@pytest.fixture
def one_thread():
    """Tiny models gain nothing from threads, and on a busy machine extra threads only wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name, margin", [("iris", 0.03), ("diabetes", 0.05)])
def test_default_config_is_close_to_the_better_sklearn_baseline(name, margin, tmp_path, caplog, one_thread):
    caplog.set_level(logging.WARNING, logger="plait")
    results = [scores(name, seed, str(tmp_path / "cache")) for seed in SEEDS]
    plait_mean = float(np.mean([r[0] for r in results]))
    baseline_mean = float(np.mean([r[1] for r in results]))
    assert plait_mean >= baseline_mean - margin, (
        f"{name}: plait's default config scores {plait_mean:.3f}, the better scikit-learn baseline "
        f"{baseline_mean:.3f} (mean of seeds {SEEDS}); allowed margin {margin}"
    )

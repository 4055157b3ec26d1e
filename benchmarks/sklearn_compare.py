"""Do plait's defaults win? A default plait config against scikit-learn baselines.

    .venv/bin/python benchmarks/sklearn_compare.py                 # 4 datasets x 5 seeds
    .venv/bin/python benchmarks/sklearn_compare.py --seeds 2 --datasets iris diabetes
    .venv/bin/python benchmarks/sklearn_compare.py --override '{"trainer": {"epochs": 50}}'
    .venv/bin/python benchmarks/sklearn_compare.py --ludwig-defaults --out benchmarks/out/sklearn_compare_ludwig.json
    .venv/bin/python benchmarks/sklearn_compare.py --ludwig-defaults trainer.early_stop   # one default at a time

Datasets: the small real datasets that ship inside scikit-learn (no download): iris, wine and
breast_cancer (classification, test accuracy) and diabetes (regression, test R²).

Protocol, per dataset and seed:

* ``train_test_split(test_size=0.2, random_state=seed)``, stratified by class for
  classification: 80% of the rows for training, 20% held out for testing.
* scikit-learn models are fitted on the whole 80%: ``StandardScaler`` + ``LogisticRegression``
  (classification) or ``Ridge`` (regression), and ``HistGradientBoostingClassifier`` /
  ``HistGradientBoostingRegressor``, all with their default settings.
* plait gets the same 80%, of which it holds out a fifth (stratified for classification, again
  with ``random_state=seed``) as ``validation_set=`` for early stopping and choosing the best
  epoch: it fits on 64% of all rows and validates on 16%. The config names only the features
  (every input a number, the target binary, category or number); every other setting is
  plait's default. ``random_seed=seed``.
* Both are scored on the same 20% test rows with scikit-learn's ``accuracy_score`` /
  ``r2_score`` on the predictions.

Mean and standard deviation over seeds are printed as a table and written as JSON (default
``benchmarks/out/sklearn_compare.json``). ``--override`` merges a JSON object into every plait
config, to try other defaults without editing plait. ``--ludwig-defaults`` trains every plait
config with Ludwig 0.17's defaults wherever plait's differ (``plait validate`` lists them), to
show which defaults give the better models.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# name: (loader, task, plait output type)
DATASETS = {
    "iris": ("load_iris", "classification", "category"),
    "wine": ("load_wine", "classification", "category"),
    "breast_cancer": ("load_breast_cancer", "classification", "binary"),
    "diabetes": ("load_diabetes", "regression", "number"),
}
TARGET = "target"


def load(name: str) -> tuple[pd.DataFrame, str, str]:
    """The dataset as a DataFrame with a ``target`` column (class names for classification)."""
    import sklearn.datasets

    loader, task, output_type = DATASETS[name]
    bunch = getattr(sklearn.datasets, loader)(as_frame=True)
    df = bunch.frame.copy()
    if task == "classification":
        df[TARGET] = np.asarray(bunch.target_names)[bunch.target.to_numpy()]
    return df, task, output_type


def merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def plait_config(df: pd.DataFrame, output_type: str, cache_dir: str, override: dict) -> dict:
    config = {
        "input_features": [{"name": c, "type": "number"} for c in df.columns if c != TARGET],
        "output_features": [{"name": TARGET, "type": output_type}],
    }
    return merge(merge(config, {"backend": {"cache_dir": cache_dir}}), override)


def plait_predictions(model, test: pd.DataFrame, output_type: str, classes) -> np.ndarray:
    predicted = model.predict(test.drop(columns=[TARGET]))[f"{TARGET}_predictions"].to_numpy()
    if output_type == "binary":  # True is the label that sorts last (plait's rule for two labels)
        return np.where(predicted.astype(bool), classes[-1], classes[0])
    return predicted


def run_one(name: str, seed: int, cache_dir: str, override: dict, ludwig_defaults: list | None = None) -> dict:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import accuracy_score, r2_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from plait import Model
    from plait.config import load_config
    from plait.config.ludwig_defaults import with_ludwig_defaults

    df, task, output_type = load(name)
    classification = task == "classification"
    stratify = df[TARGET] if classification else None
    train, test = train_test_split(df, test_size=0.2, random_state=seed, stratify=stratify)
    x_train, y_train = train.drop(columns=[TARGET]), train[TARGET]
    x_test, y_test = test.drop(columns=[TARGET]), test[TARGET]
    score = accuracy_score if classification else r2_score
    if classification:
        baselines = {"linear": make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
                     "gbdt": HistGradientBoostingClassifier(random_state=seed)}
    else:
        baselines = {"linear": make_pipeline(StandardScaler(), Ridge()),
                     "gbdt": HistGradientBoostingRegressor(random_state=seed)}
    result = {}
    for key, estimator in baselines.items():
        started = time.perf_counter()
        estimator.fit(x_train, y_train)
        result[key] = {"score": float(score(y_test, estimator.predict(x_test))), "seconds": time.perf_counter() - started}

    fit, validation = train_test_split(train, test_size=0.2, random_state=seed,
                                       stratify=train[TARGET] if classification else None)
    started = time.perf_counter()
    config = load_config(plait_config(df, output_type, cache_dir, override))
    if ludwig_defaults is not None:  # [] means all of them
        config = with_ludwig_defaults(config, set(ludwig_defaults) or None)
    model = Model(config)
    trained = model.train(training_set=fit, validation_set=validation, random_seed=seed, progress_bar=False)
    predicted = plait_predictions(model, test, output_type, np.sort(df[TARGET].unique()))
    result["plait"] = {"score": float(score(y_test, predicted)), "seconds": time.perf_counter() - started,
                       "epochs": len(trained.training_statistics)}
    return result


def summarize(scores: list[float]) -> dict:
    return {"mean": statistics.fmean(scores), "std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "scores": scores}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--override", default="{}", help="JSON merged into every plait config")
    parser.add_argument("--ludwig-defaults", nargs="*", metavar="SETTING",
                        help="use Ludwig's default wherever plait's differs (plait validate lists them), or only "
                             "for the settings named, e.g. combiner.dropout 'output_features[*].preprocessing.normalization'")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1: tiny models)")
    parser.add_argument("--out", default=str(HERE / "out" / "sklearn_compare.json"))
    args = parser.parse_args(argv)
    override = json.loads(args.override)

    import torch

    torch.set_num_threads(args.threads)
    logging.getLogger("plait").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)

    started = time.perf_counter()
    report: dict = {"seeds": args.seeds, "override": override, "ludwig_defaults": args.ludwig_defaults, "datasets": {}}
    with tempfile.TemporaryDirectory(prefix="plait-compare-") as cache_dir:
        for name in args.datasets:
            runs = [run_one(name, seed, cache_dir, override, args.ludwig_defaults) for seed in range(args.seeds)]
            task = DATASETS[name][1]
            entry = {"task": task, "metric": "accuracy" if task == "classification" else "r2"}
            for model in ("plait", "linear", "gbdt"):
                entry[model] = summarize([r[model]["score"] for r in runs])
                entry[model]["seconds"] = sum(r[model]["seconds"] for r in runs)
            entry["plait"]["epochs"] = [r["plait"]["epochs"] for r in runs]
            best = max(("linear", "gbdt"), key=lambda m: entry[m]["mean"])
            entry["best_baseline"] = best
            entry["plait_minus_best"] = entry["plait"]["mean"] - entry[best]["mean"]
            report["datasets"][name] = entry
    report["seconds"] = time.perf_counter() - started

    linear_name = {"classification": "logreg", "regression": "ridge"}
    print(f"{'dataset':15} {'metric':9} {'plait':>15} {'linear':>22} {'gbdt':>15} {'plait - best':>13}")
    for name, e in report["datasets"].items():
        cell = lambda m: f"{e[m]['mean']:.3f} ± {e[m]['std']:.3f}"  # noqa: E731
        print(f"{name:15} {e['metric']:9} {cell('plait'):>15} {linear_name[e['task']] + ' ' + cell('linear'):>22} "
              f"{cell('gbdt'):>15} {e['plait_minus_best']:>+13.3f}")
    print(f"{args.seeds} seeds; plait epochs run: "
          + "; ".join(f"{n} {e['plait']['epochs']}" for n, e in report["datasets"].items())
          + f"; total {report['seconds']:.0f} s")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

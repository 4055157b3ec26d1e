"""Are plait's defaults good on tables it was not tuned on? 25 real datasets, five seeds each.

    pip install -e '.[benchmarks]' -c constraints.txt                 # the datasets' packages
    .venv/bin/python benchmarks/model_quality.py                      # every dataset, every variant
    .venv/bin/python benchmarks/model_quality.py --variants plait sklearn --datasets iris digits
    .venv/bin/python benchmarks/model_quality.py --variants plait --name es10 --override '{"trainer": {"early_stop": 10}}'
    .venv/bin/python benchmarks/model_quality.py --variants auto_train --time-limit-s 300 --seeds 1
    .venv/bin/python benchmarks/model_quality.py --report                # the table of what has run

Variants (``--variants``):

* ``plait``: the config names each column's type and nothing else; every setting is plait's
  default (``--override`` merges a JSON object into it, ``--name`` files it apart).
* ``ludwig``: the same config with Ludwig 0.17's defaults wherever plait's differ
  (``with_ludwig_defaults``, what ``plait validate`` lists).
* ``bc50845``: the same config trained by plait at commit bc50845, the defaults before the
  compatibility work changed them (its source is unpacked with ``git archive`` into
  benchmarks/out/plait-bc50845; it has no date inputs, so date datasets have no figure).
* ``sklearn``: a linear model (LogisticRegression / Ridge) and HistGradientBoosting with standard
  preprocessing: numbers imputed (median) and scaled for the linear model; categories one-hot
  (linear) or native (boosting); text as TF-IDF of words and word pairs (linear) or its 100-column
  SVD (boosting); dates as year, month, day, weekday, day of year and hour; vectors as columns.
  The better of the two per dataset is "best sklearn".
* ``auto_train``: ``plait.auto_train`` on the training rows with ``--time-limit-s``.

Protocol per dataset and seed: the rows are shuffled with the seed and split 70/10/20 (Ludwig's
default split). plait trains on the 70% and early-stops on the 10%; scikit-learn fits on the 80%;
all are scored on the same 20% with accuracy (classification) or R² (regression). Each run is a
subprocess with one torch thread; ``--jobs`` run at once. A run's result is kept in
benchmarks/out/model_quality/<variant>/<dataset>/<seed>.json, so an interrupted benchmark resumes
and a variant added later joins the same table.

The report (``--report``, also printed after a run) gives mean ± standard deviation over the
seeds. "matches" means plait's mean is at least the best sklearn mean minus that model's
standard deviation; "below bc50845" means plait's mean is under bc50845's mean minus its standard
deviation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out" / "model_quality"
OLD_COMMIT = "bc50845"
OLD_SOURCE = HERE / "out" / f"plait-{OLD_COMMIT}"
PLAIT_VARIANTS = ("plait", "ludwig", OLD_COMMIT, "auto_train")
VARIANTS = ("plait", "ludwig", OLD_COMMIT, "sklearn", "auto_train")
SPLIT = (0.7, 0.1, 0.2)


# ---------------------------------------------------------------- one run, in its own process

def run_job(job: dict) -> dict:
    """Train and score one variant on one dataset and seed (called in a worker process)."""
    import numpy as np

    from quality_datasets import DATASETS

    table = DATASETS[job["dataset"]]()
    order = np.random.default_rng(job["seed"]).permutation(len(table.frame))
    cut_train, cut_valid = int(SPLIT[0] * len(order)), int((SPLIT[0] + SPLIT[1]) * len(order))
    train, valid, test = (table.frame.iloc[order[a:b]].reset_index(drop=True)
                          for a, b in ((0, cut_train), (cut_train, cut_valid), (cut_valid, len(order))))
    started = time.perf_counter()
    if job["variant"] == "sklearn":
        result = _sklearn_scores(table, train, valid, test, job["seed"])
    elif job["variant"] == "auto_train":
        result = _auto_train_score(table, train, valid, test, job)
    else:
        result = _plait_score(table, train, valid, test, job)
    return {**result, "seconds": time.perf_counter() - started}


def _score(table, truth, predicted) -> float:
    import numpy as np
    from sklearn.metrics import r2_score

    if table.task == "regression":
        return float(r2_score(np.asarray(truth, dtype=float), np.asarray(predicted, dtype=float)))
    # plait predicts labels as it read them: compare as text so True/"True" and 1/"1" agree
    return float(np.mean(np.asarray(truth).astype(str) == np.asarray(predicted).astype(str)))


def plait_config(table, cache_dir: str, override: dict, inputs: dict | None = None) -> dict:
    """The config naming each column's type; ``inputs`` maps a type to settings merged into every
    input feature of that type (``defaults`` would reach the output too)."""
    inputs = inputs or {}
    config = {"input_features": [_merge({"name": c, "type": t}, inputs.get(t, {})) for c, t in table.inputs.items()],
              "output_features": [{"name": table.target, "type": table.output_type}],
              "backend": {"cache_dir": cache_dir}}
    return _merge(config, override)


def _plait_score(table, train, valid, test, job: dict) -> dict:
    from plait import Model

    with tempfile.TemporaryDirectory(prefix="plait-quality-") as cache_dir:
        config = plait_config(table, cache_dir, job.get("override", {}), job.get("inputs"))
        if job["variant"] == "ludwig":
            from plait.config import load_config
            from plait.config.ludwig_defaults import with_ludwig_defaults

            config = with_ludwig_defaults(load_config(config))
        model = Model(config)
        trained = model.train(training_set=train, validation_set=valid, random_seed=job["seed"], progress_bar=False)
        predicted = model.predict(test.drop(columns=[table.target]))[f"{table.target}_predictions"]
    return {"score": _score(table, test[table.target], predicted), "epochs": len(trained.training_statistics)}


def _auto_train_score(table, train, valid, test, job: dict) -> dict:
    import pandas as pd

    import plait

    # The same training and validation rows as the plait variant: a fixed split column (0, 1).
    rows = pd.concat([train.assign(split=0), valid.assign(split=1)], ignore_index=True)
    with tempfile.TemporaryDirectory(prefix="plait-auto-") as output:
        found = plait.auto_train(rows, table.target, time_limit_s=job["time_limit_s"], output_directory=output,
                                 random_seed=job["seed"], tune_verbosity=0,
                                 user_config=_merge({"preprocessing": {"split": {"type": "fixed", "column": "split"}},
                                                     "backend": {"cache_dir": os.path.join(output, "cache")}},
                                                    job.get("override", {})))
        predicted = found.model.predict(test.drop(columns=[table.target]))[f"{table.target}_predictions"]
    return {"score": _score(table, test[table.target], predicted), "trials": found.trials,
            "best_config": found.best_config, "finalists": found.finalists,
            # which model auto_train kept: trial, rerun or fold (35d936d's results also say refit)
            "model": found.model_source}


def _sklearn_scores(table, train, valid, test, seed: int) -> dict:
    import pandas as pd

    fit = pd.concat([train, valid], ignore_index=True)
    scores = {}
    for name, estimator in _sklearn_models(table, seed).items():
        started = time.perf_counter()
        estimator.fit(_expanded(table, fit), fit[table.target])
        scores[name] = {"score": _score(table, test[table.target], estimator.predict(_expanded(table, test))),
                        "seconds": time.perf_counter() - started}
    best = max(scores, key=lambda name: scores[name]["score"])
    return {"score": scores[best]["score"], "models": scores}


def _expanded(table, frame):
    """Dates and vectors as number columns (what both scikit-learn models get)."""
    import numpy as np
    import pandas as pd

    columns = {}
    for column, kind in table.inputs.items():
        if kind == "date":
            when = pd.to_datetime(frame[column], utc=True, format="mixed")
            for part in ("year", "month", "day", "dayofweek", "dayofyear", "hour"):
                columns[f"{column}_{part}"] = getattr(when.dt, part).astype(float)
        elif kind == "vector":
            values = np.stack([np.asarray(str(v).split(), dtype=float) for v in frame[column]])
            columns.update({f"{column}_{i}": values[:, i] for i in range(values.shape[1])})
        elif kind in ("category", "binary"):
            columns[column] = frame[column].astype(str).where(frame[column].notna(), "missing")
        else:
            columns[column] = frame[column].to_numpy()
    return pd.DataFrame(columns)


def _sklearn_models(table, seed: int) -> dict:
    from sklearn.compose import ColumnTransformer
    from sklearn.decomposition import TruncatedSVD
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    numbers = [c for c in _expanded(table, table.frame.head(1)).columns
               if table.inputs.get(c, "number") not in ("category", "binary", "text")]
    categories = [c for c, kind in table.inputs.items() if kind in ("category", "binary")]
    texts = [c for c, kind in table.inputs.items() if kind == "text"]

    def words():
        return TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)

    linear_parts = [("numbers", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numbers),
                    ("categories", OneHotEncoder(handle_unknown="ignore"), categories),
                    *((f"text_{c}", words(), c) for c in texts)]
    tree_parts = [("numbers", "passthrough", numbers),
                  ("categories", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=float("nan")), categories),
                  *((f"text_{c}", make_pipeline(words(), TruncatedSVD(100, random_state=seed)), c) for c in texts)]
    categorical = list(range(len(numbers), len(numbers) + len(categories))) or None
    if table.task == "classification":
        linear, trees = LogisticRegression(max_iter=3000), HistGradientBoostingClassifier(
            categorical_features=categorical, random_state=seed)
    else:
        linear, trees = Ridge(), HistGradientBoostingRegressor(categorical_features=categorical, random_state=seed)
    return {"linear": make_pipeline(ColumnTransformer([p for p in linear_parts if p[2]]), linear),
            "gbdt": make_pipeline(ColumnTransformer([p for p in tree_parts if p[2]]), trees)}


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


# ---------------------------------------------------------------- the driver

def result_path(variant_name: str, dataset: str, seed: int) -> Path:
    return OUT / variant_name / dataset / f"{seed}.json"


CODE_UNDER_TEST = ("plait", "benchmarks/quality_datasets.py")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def code_version(commit: str = "HEAD") -> str:
    """A short hash of the code under test (the git trees of plait/ and the datasets) at
    ``commit``, with "+changes" when the working tree differs from HEAD there: a column's seeds
    may run in several sittings, at other commits of the rest of the repository, and the report
    says when they ran different code."""
    import hashlib

    trees = _git("rev-parse", *(f"{commit}:{path}" for path in CODE_UNDER_TEST))
    changed = commit == "HEAD" and _git("status", "--porcelain", *CODE_UNDER_TEST)
    return hashlib.sha1(trees.encode()).hexdigest()[:10] + ("+changes" if changed else "")


def checked_out() -> dict:
    """The short commit of HEAD and the code version of the tree as it is now."""
    return {"commit": _git("rev-parse", "--short", "HEAD").strip(), "code": code_version()}


def _old_source() -> Path:
    if not (OLD_SOURCE / "plait").exists():
        OLD_SOURCE.parent.mkdir(parents=True, exist_ok=True)
        aside = Path(tempfile.mkdtemp(prefix="plait-old-", dir=OLD_SOURCE.parent))
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", OLD_COMMIT], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(aside)], input=archive, check=True)
        aside.rename(OLD_SOURCE)
    return OLD_SOURCE


def launch(job: dict, timeout_s: float) -> dict:
    """Run one job in a subprocess; its result (or its error) is written under OUT."""
    source = _old_source() if job["variant"] == OLD_COMMIT else ROOT
    env = {**os.environ, "PLAIT_QUALITY_SOURCE": str(source), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        done = subprocess.run([sys.executable, __file__, "--job", json.dumps(job)], env=env, capture_output=True,
                              text=True, timeout=timeout_s)
        lines = done.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if done.returncode == 0 and lines else {"error": done.stderr.strip()[-2000:]}
    except subprocess.TimeoutExpired:
        result = {"error": f"over the {timeout_s:.0f} s limit"}
    path = result_path(job["name"], job["dataset"], job["seed"])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps({**job, **result}, indent=1))
    partial.replace(path)
    return result


def collect(names: list[str], datasets: list[str], seeds: int) -> dict:
    """Every kept result: {dataset: {variant name: [result per seed]}}."""
    table: dict = {}
    for dataset in datasets:
        for name in names:
            runs = [json.loads(p.read_text()) for s in range(seeds) if (p := result_path(name, dataset, s)).exists()]
            table.setdefault(dataset, {})[name] = [r for r in runs if "score" in r]
    return table


def summary(runs: list[dict]) -> dict | None:
    if not runs:
        return None
    scores = [r["score"] for r in runs]
    return {"mean": statistics.fmean(scores), "std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "n": len(scores), "seconds": statistics.fmean(r["seconds"] for r in runs)}


def report(names: list[str], datasets: list[str], seeds: int, markdown: bool, judged: str = "plait") -> dict:
    from quality_datasets import DATASETS

    runs = collect(names, datasets, seeds)
    rows, verdicts = [], {"matches_best_sklearn": 0, "below_old": [], "compared": 0}
    for dataset in datasets:
        cells = {name: summary(runs[dataset][name]) for name in names}
        table = DATASETS[dataset]()
        row = {"dataset": dataset, "rows": len(table.frame), "task": table.output_type,
               "inputs": sorted(set(table.inputs.values())), **cells}
        plait, best, old = cells.get(judged), cells.get("sklearn"), cells.get(OLD_COMMIT)
        if plait and best:
            verdicts["compared"] += 1
            row["matches"] = plait["mean"] >= best["mean"] - best["std"]
            verdicts["matches_best_sklearn"] += row["matches"]
        if plait and old and plait["mean"] < old["mean"] - old["std"]:
            verdicts["below_old"].append(dataset)
        rows.append(row)
    _print(rows, names, markdown)
    for name in names:
        versions = Counter(r.get("code", "unrecorded") for dataset in datasets for r in runs[dataset][name])
        if len(versions) > 1:
            print(f"{name} ran more than one version of the code (code_version): "
                  + ", ".join(f"{c} ({n} runs)" for c, n in versions.most_common()))
    print(f"{judged} matches the best sklearn model on {verdicts['matches_best_sklearn']} of {verdicts['compared']} "
          f"datasets; below {OLD_COMMIT} on: {', '.join(verdicts['below_old']) or 'none'}")
    return {"rows": rows, "verdicts": verdicts}


def _print(rows: list[dict], names: list[str], markdown: bool) -> None:
    def cell(c):
        if c is None:
            return "-"
        seeds = "" if c["n"] == rows_seeds else f" ({c['n']} seed{'s' if c['n'] > 1 else ''})"
        return f"{c['mean']:.3f} ± {c['std']:.3f}{seeds}"

    rows_seeds = max((r[n]["n"] for r in rows for n in names if r.get(n)), default=0)

    header = ["dataset", "rows", "target", "inputs", *names, "matches best sklearn"]
    lines = [[r["dataset"], f"{r['rows']:,}", r["task"], " ".join(r["inputs"]), *(cell(r[n]) for n in names),
              {True: "yes", False: "no"}.get(r.get("matches"), "-")] for r in rows]
    if markdown:
        print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    for line in (header, *lines):
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))


def main(argv=None) -> int:
    from quality_datasets import DATASETS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["plait", "ludwig", OLD_COMMIT, "sklearn"])
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2: this machine's cores)")
    parser.add_argument("--override", default="{}", help="JSON merged into every plait config (use with --name)")
    parser.add_argument("--inputs", default="{}", help="JSON: {type: settings} merged into each input feature of "
                                                         "that type, e.g. '{\"number\": {\"preprocessing\": "
                                                         "{\"normalization\": \"quantile\"}}}' (use with --name)")
    parser.add_argument("--name", help="file the results under this name (plait's as NAME, another variant's as "
                                       "VARIANT-NAME), e.g. with --override")
    parser.add_argument("--time-limit-s", type=float, default=300, help="auto_train's budget per dataset")
    parser.add_argument("--job-timeout-s", type=float, default=3600)
    parser.add_argument("--report", action="store_true", help="only print the table of what has run")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--columns", nargs="+", help="the report's columns (variant names, default: the variants)")
    parser.add_argument("--judge", default="plait", help="the column held to the bars (default plait)")
    parser.add_argument("--out", default=str(HERE / "out" / "model_quality.json"))
    args = parser.parse_args(argv)

    def name_of(variant: str) -> str:
        """Where a variant's results are kept: --name files them apart (plait's as NAME, another
        variant's as VARIANT-NAME)."""
        if not args.name:
            return variant
        return args.name if variant == "plait" else f"{variant}-{args.name}"

    if not args.report:
        commit, code = checked_out().values()
        jobs = [{"variant": v, "name": name_of(v), "dataset": d, "seed": s, "override": json.loads(args.override),
                 "inputs": json.loads(args.inputs), "time_limit_s": args.time_limit_s,
                 "commit": OLD_COMMIT if v == OLD_COMMIT else commit,
                 "code": OLD_COMMIT if v == OLD_COMMIT else code}
                for d in args.datasets for s in range(args.seeds) for v in args.variants]
        todo = [j for j in jobs if not result_path(j["name"], j["dataset"], j["seed"]).exists()]
        print(f"{len(todo)} of {len(jobs)} runs to do", flush=True)
        with ThreadPoolExecutor(args.jobs) as pool:
            for job, result in zip(todo, pool.map(lambda j: launch(j, args.job_timeout_s), todo)):
                shown = f"{result['score']:.3f}" if "score" in result else "ERROR " + result["error"].splitlines()[-1][:200]
                print(f"{job['name']:>12} {job['dataset']:>16} seed {job['seed']}: {shown}", flush=True)
    columns = args.columns or [name_of(v) for v in args.variants]
    summary_ = report(columns, args.datasets, args.seeds, args.markdown, args.judge)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary_, indent=1))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    if "--job" in sys.argv:
        # The worker: the plait under test first on the path (bc50845's tree for that variant).
        sys.path.insert(0, os.environ.get("PLAIT_QUALITY_SOURCE", str(ROOT)))
        import logging
        import warnings

        import torch

        torch.set_num_threads(1)
        logging.getLogger("plait").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore")
        job = json.loads(sys.argv[sys.argv.index("--job") + 1])
        ran = {}
        if job["variant"] != OLD_COMMIT:  # the code this job runs: the tree may have moved since the run began
            ran = checked_out()
        print(json.dumps({**run_job(job), **ran}))
    else:
        raise SystemExit(main())

"""GBM training (``model_type: gbm``): plait's boosting against a hand-written LightGBM loop on the
same feature matrix, with the same settings and rounds.

    .venv/bin/python benchmarks/gbm_training.py                    # 330,000 rows (231,000 to train), 500 rounds
    .venv/bin/python benchmarks/gbm_training.py --rows 50000 --rounds 200

The table is ``benchmarks/train.py``'s (``make_data``: numbers with some missing values and
categories, a binary label), at about the size of the model-quality benchmark's flights training
split. plait trains with Ludwig's GBM defaults (an evaluation of the training loss and every
validation metric each 50 rounds) and ``early_stop: -1``, so both loops grow every round. The
hand-written loop is what a LightGBM user writes: ``lightgbm.train`` on plait's own feature
matrices, with the validation rows as a ``valid_set`` whose log loss LightGBM tracks every round.
Timed (wall and CPU): plait's ``Boosting.run`` (the Dataset's construction, the boosting, the
evaluations; preprocessing is not in it) and, inside it, its evaluations; the hand-written loop
from its Dataset's construction to its end. Each ``--repeat`` times, interleaved; the fastest
run of each counts. Figures are printed and written as JSON (``benchmarks/out/gbm_training.json``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from train import (CATEGORY_COLUMNS, NUMBER_COLUMNS, OUTPUT_COLUMN, Timers, clock, make_data,  # noqa: E402
                   since, write_report)


def gbm_config(rounds: int, cache_dir: str) -> dict:
    return {"model_type": "gbm",
            "input_features": [{"name": n, "type": "number"} for n in NUMBER_COLUMNS]
            + [{"name": n, "type": "category"} for n in CATEGORY_COLUMNS],
            "output_features": [{"name": OUTPUT_COLUMN, "type": "binary"}],
            "trainer": {"num_boost_round": rounds, "early_stop": -1},
            "backend": {"type": "local", "cache_dir": cache_dir}}


def train_plait(df, config: dict, seed: int):
    """``Model.train``, with ``Boosting.run`` and its evaluations timed."""
    from plait import Model
    from plait.training.gbm import Boosting

    with Timers().wrapping((Boosting, "run", "run"), (Boosting, "_evaluate", "evaluation")) as timers:
        model = Model(config)
        result = model.train(dataset=df, random_seed=seed, progress_bar=False)
    (run_wall, run_cpu), (eval_wall, eval_cpu) = timers.total("run"), timers.total("evaluation")
    last = result.training_statistics[-1]
    return model, result, {"boosting_s": run_wall, "boosting_cpu_s": run_cpu, "evaluation_s": eval_wall,
                           "evaluation_cpu_s": eval_cpu, "evaluations": len(result.training_statistics),
                           "rounds": last["step"], "validation_loss": last["validation"][OUTPUT_COLUMN]["loss"]}


def train_by_hand(model, data, seed: int, rounds: int) -> dict:
    """``lightgbm.train`` on plait's feature matrices, the validation log loss tracked every round."""
    import lightgbm

    from plait.data.tensors import table_tensors

    module, options = model.module, model.config.trainer
    names = module.input_names + module.output_names
    split = {s: table_tensors(data.read_split(s), model.metadata["features"], names)
             for s in ("training", "validation")}
    matrices = {s: module.feature_matrix(tensors) for s, tensors in split.items()}
    labels = {s: tensors[OUTPUT_COLUMN].double().numpy() for s, tensors in split.items()}
    start = clock()
    training = lightgbm.Dataset(matrices["training"], labels["training"], categorical_feature=module.categorical,
                                params={"max_bin": options.max_bin, "verbose": options.verbose})
    validation = training.create_valid(matrices["validation"], labels["validation"])
    parameters = {**options.lightgbm_parameters(), **module.objective(), "seed": seed, "metric": "binary_logloss"}
    losses: dict = {}
    lightgbm.train(parameters, training, num_boost_round=rounds, valid_sets=[validation], valid_names=["validation"],
                   callbacks=[lightgbm.record_evaluation(losses)])
    wall, cpu = since(start)
    return {"boosting_s": wall, "boosting_cpu_s": cpu, "rounds": rounds,
            "validation_loss": losses["validation"]["binary_logloss"][-1]}


def compare(args) -> dict:
    df = make_data(args.rows, args.seed)
    runs: dict[str, list] = {"plait": [], "hand_written": []}
    with tempfile.TemporaryDirectory(prefix="plait-gbm-") as cache_dir:
        for _ in range(args.repeat):
            model, result, run = train_plait(df, gbm_config(args.rounds, cache_dir), args.seed)
            runs["plait"].append(run)
            runs["hand_written"].append(train_by_hand(model, result.preprocessed, args.seed, args.rounds))
    summary: dict = {"rows": len(df), "training_rows": result.preprocessed.rows("training"), "rounds": args.rounds}
    for name, loop_runs in runs.items():
        best = min(loop_runs, key=lambda r: r["boosting_s"])
        summary[name] = {**best, "runs": loop_runs}
    summary["ratio"] = summary["hand_written"]["boosting_s"] / summary["plait"]["boosting_s"]
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=330_000, help="table rows (70%% train, Ludwig's default split)")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=str(HERE / "out" / "gbm_training.json"))
    args = parser.parse_args(argv)
    import lightgbm

    summary = compare(args)
    plait, hand = summary["plait"], summary["hand_written"]
    print(f"GBM, {summary['training_rows']:,} training rows, {args.rounds} rounds")
    print(f"  plait        {plait['boosting_s']:.1f} s ({plait['boosting_cpu_s']:.1f} CPU-s), of which "
          f"{plait['evaluations']} evaluations {plait['evaluation_s']:.1f} s; "
          f"validation loss {plait['validation_loss']:.5f}")
    print(f"  hand-written {hand['boosting_s']:.1f} s ({hand['boosting_cpu_s']:.1f} CPU-s); "
          f"validation loss {hand['validation_loss']:.5f}")
    print(f"  plait's speed over the hand-written loop's: {summary['ratio']:.3f}")
    machine = {"python": platform.python_version(), "lightgbm": lightgbm.__version__, "platform": platform.platform()}
    report = {"gbm_training": summary, "machine": machine}
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

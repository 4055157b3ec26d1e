"""The ``plait`` command line.

Only argparse is imported at start-up: each command imports what it needs when it runs, so
``plait --help`` answers without loading torch, pyarrow or ray. User mistakes print one
``plait: error: ...`` message and exit with code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys


class _Refused(argparse.Action):
    """A Ludwig flag plait does not implement. Parsing goes on and main() refuses it by name with
    what to do instead, as one plait error (argparse's own error would print the usage)."""

    def __init__(self, option_strings, dest, advice: str, nargs=0, **_):
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=nargs, default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS)
        self.advice = advice

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.refused = [*getattr(namespace, "refused", []), f"{option_string}: {self.advice}"]


def _refuse(p: argparse.ArgumentParser, names: tuple[str, ...], advice: str, nargs=0) -> None:
    p.add_argument(*names, action=_Refused, advice=advice, nargs=nargs)


def _add_config(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--config", "-c", help="the YAML config file")
    g.add_argument("--config-str", "--config_str", "-cs", help="the config itself, as a YAML or JSON string")


def _add_data(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--dataset", help="the whole dataset (CSV, TSV, Parquet, JSON, JSONL; path or URL); plait splits it")
    g.add_argument("--training-set", "--training_set", help="a training set, when the data is already split")
    g.add_argument("--validation-set", "--validation_set", help="a validation set (with --training-set)")
    g.add_argument("--test-set", "--test_set", help="a test set (with --training-set)")
    _add_data_format(g)
    _refuse(g, ("--training_set_metadata",), nargs=1, advice=(
        "plait keeps the preprocessing metadata in its cache and reuses it when the data and settings match "
        "(a trained model's is in its model/ folder); remove the flag"))
    _refuse(g, ("-sspi", "--skip_save_processed_input"), advice=(
        "plait trains from its preprocessed cache, so it always writes one; put it on scratch space with "
        "--cache-dir (or backend.cache_dir) and delete it afterwards"))


def _add_data_format(g) -> None:
    g.add_argument("--data-format", "--data_format", default="auto",
                   help="auto (default): from the file name; else it must agree with the file name")


def _add_run(p: argparse.ArgumentParser, tracking: bool = False) -> None:
    g = p.add_argument_group("run")
    g.add_argument("--random-seed", "--random_seed", "-rs", type=int, default=42,
                   help="seed for splitting, initialization and shuffling (default 42)")
    g.add_argument("--backend", "-b", choices=["auto", "local", "ray", "torchrun", "horovod", "deepspeed", "dask"],
                   help="where to run (default: the config's backend.type, else auto)")
    g.add_argument("--cache-dir", help="where preprocessed data is cached (overrides backend.cache_dir)")
    _add_runtime(g, tracking)


def _add_runtime(g, tracking: bool = False) -> None:
    """Ludwig's runtime flags: the logging level, and the device flags plait leaves to the environment."""
    g.add_argument("--logging-level", "--logging_level", "-l", choices=list(LOG_LEVELS),
                   help="the plait logger's level (default info; debug with --verbose)")
    _refuse(g, ("-g", "--gpus"), nargs="+", advice=(
        "plait uses the GPUs it is shown; choose them in the environment: CUDA_VISIBLE_DEVICES=0,1 plait ..."))
    _refuse(g, ("-gml", "--gpu_memory_limit"), nargs=1, advice=(
        "plait does not cap GPU memory; lower trainer.batch_size, or on Ray give each worker a share of a GPU "
        "with backend.trainer.resources_per_worker"))
    _refuse(g, ("-dpt", "--disable_parallel_threads"), advice=(
        "set OMP_NUM_THREADS=1 in the environment for single-threaded, reproducible runs"))
    if tracking:
        _add_tracking(g)
    else:
        _refuse(g, ("--comet", "--wandb", "--mlflow", "--aim"), advice=(
            "experiment trackers follow training runs: use the flag with plait train, experiment or hyperopt"))


TRACKING_FLAGS = {
    "mlflow": "log the run to MLflow (MLFLOW_TRACKING_URI, else sqlite:///<output directory>/mlflow.db)",
    "wandb": "log the run to Weights & Biases (WANDB_MODE=offline writes it locally)",
    "aim": "log the run to Aim (a repository in the output directory)",
    "comet": "log the run to Comet (online with COMET_API_KEY, else an offline archive in <output directory>/comet)",
}
"""Ludwig's tracker flags: each adds ``{type: <tool>}`` to the config's tracking list unless the
config names that tool already (whose settings then win)."""


def _add_tracking(g) -> None:
    for tool, help_text in TRACKING_FLAGS.items():
        g.add_argument(f"--{tool}", dest="trackers", action="append_const", const=tool, help=help_text)


def _add_output(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--output-directory", "--output_directory", "-od", default="results",
                   help="where results are written (default ./results)")
    g.add_argument("--experiment-name", "--experiment_name", default="experiment",
                   help="results go to <output-directory>/<name>_run_<n>")
    g.add_argument("--model-name", "--model_name", default="run", help=argparse.SUPPRESS)


SKIPS = {
    "model": ("-ssm", "do not save the trained model (model/)"),
    "training-statistics": ("-ssts", "do not write training_statistics.json"),
    "test-statistics": (None, "do not write test_statistics.json"),
    "predictions": ("-sstp", "do not write the predictions"),
    "eval-stats": ("-sses", "do not write evaluation_statistics.json"),
    "log": ("-ssl", "do not keep the TensorBoard logs (tensorboard/ is removed when training ends)"),
    "progress": ("-ssp", "do not keep the checkpoints (checkpoints/ is removed when training ends; the run can "
                         "then not be resumed)"),
    "training-description": ("-sstd", "do not keep description.json (removed when training ends; the run can then "
                                      "not be resumed)"),
    "unprocessed-output": ("-ssuo", "accepted for Ludwig's scripts: plait writes no unprocessed-output files"),
}
"""The --skip-save-* flags: Ludwig's short spelling (where it has one) and what each leaves out."""


def _add_skip(p: argparse.ArgumentParser, *what: str) -> None:
    for item in what:
        short, help_text = SKIPS[item]
        names = [f"--skip-save-{item}", f"--skip_save_{item.replace('-', '_')}"] + ([short] if short else [])
        p.add_argument(*names, action="store_true", help=help_text)


def _add_train_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--resume", "--model-resume-path", "--model_resume_path", "-mrp", metavar="RUN_DIR",
                   help="continue an interrupted run from its checkpoint")
    p.add_argument("--model-load-path", "--model_load_path", "-mlp", metavar="MODEL",
                   help="train on from this trained model's weights, its data preprocessed with the model's "
                        "vocabularies and normalization (the config, if given, must have the model's features)")


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a model")
    _add_config(p, required=False)
    _add_data(p)
    _add_run(p, tracking=True)
    _add_output(p)
    _add_skip(p, "model", "training-statistics", "log", "progress", "training-description")
    _add_train_flags(p)


def _add_experiment(sub) -> None:
    p = sub.add_parser("experiment", help="preprocess, train, evaluate on the test split and predict")
    _add_config(p, required=False)
    _add_data(p)
    _add_run(p, tracking=True)
    _add_output(p)
    _add_skip(p, "model", "training-statistics", "test-statistics", "predictions", "log", "progress",
              "training-description", "unprocessed-output")
    p.add_argument("--skip_save_eval_stats", "-sstes", dest="skip_save_test_statistics", action="store_true",
                   help=argparse.SUPPRESS)  # Ludwig's name for the test statistics file
    p.add_argument("--eval-split", "--eval_split", "-es", choices=["training", "validation", "test", "full"],
                   default="test", help="the split evaluated and predicted after training (default test)")
    _add_train_flags(p)
    p.add_argument("--k-fold", "--k_fold", "-kf", type=int, metavar="K",
                   help="k-fold cross-validation: K runs, each tested on one fold of --dataset and trained on the "
                        "others; kfold_training_statistics.json holds each fold's and each metric's mean and "
                        "standard deviation (the same command again reruns only the folds that had not finished)")
    p.add_argument("--skip-save-k-fold-split-indices", "--skip_save_k_fold_split_indices", "-skfsi",
                   action="store_true", help="with --k_fold: do not write kfold_split_indices.json")


def _add_hyperopt(sub) -> None:
    p = sub.add_parser("hyperopt", help="search hyperparameters on Ray Tune (the config's hyperopt section)")
    _add_config(p, required=False)
    _add_data(p)
    _add_run(p, tracking=True)
    _add_output(p)
    p.set_defaults(experiment_name="hyperopt")
    p.add_argument("--resume", metavar="SEARCH_DIR",
                   help="continue an interrupted search: finished trials are kept, the others continue")
    for item in ("model", "training-statistics", "log", "progress", "training-description", "unprocessed-output",
                 "hyperopt-statistics"):
        _refuse(p, (f"--skip_save_{item.replace('-', '_')}", f"--skip-save-{item}"), advice=(
            "a search keeps every trial's checkpoints, model and statistics: schedulers and --resume need them"))
    p.add_argument("--hyperopt-log-verbosity", "--hyperopt_log_verbosity", type=int, choices=[0, 1, 2, 3], default=1,
                   help="Ray Tune's console output: 0 none, 1 status tables (default), 2 and 3 every result; "
                        "plait's summary table follows it")


def _add_model_path(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-path", "--model_path", "-m", required=True, help="a model directory written by plait train")
    _refuse(p, ("-bs", "--batch_size"), nargs=1, advice=(
        "plait sizes prediction batches itself (16,384 rows); remove the flag"))


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="compute metrics of a trained model on a dataset")
    _add_model_path(p)
    p.add_argument("--dataset", required=True, help="data with the output columns")
    _add_data_format(p)
    p.add_argument("--split", "-s", choices=["full", "training", "validation", "test"], default="full",
                   help="evaluate on the rows the model's config and seed put in this split (default: all rows)")
    _add_run(p)
    p.set_defaults(random_seed=None)  # evaluate --split: the model's own seed unless given
    _add_output(p)
    _add_skip(p, "eval-stats", "unprocessed-output")
    for names in (("-scp", "--skip_collect_predictions"), ("-scos", "--skip_collect_overall_stats")):
        p.add_argument(*names, action="store_true",
                       help="accepted for Ludwig's scripts: plait evaluate computes the metrics only")


def _add_predict(sub) -> None:
    p = sub.add_parser("predict", help="predict with a trained model")
    _add_model_path(p)
    p.add_argument("--dataset", required=True, help="data with the input columns (output columns are not needed)")
    _add_data_format(p)
    p.add_argument("--split", "-s", choices=["full", "training", "validation", "test"], default="full",
                   help="full (default): every row given; plait predicts on the rows it is given")
    _add_run(p)
    _add_output(p)
    _add_skip(p, "predictions", "unprocessed-output")
    p.add_argument("--output-format", choices=["parquet", "csv"], default="parquet",
                   help="predictions.<format> in the output directory: a file, or with --backend ray a folder of "
                        "part files that in name order hold the input's rows in order (default parquet)")
    p.add_argument("--generation-config", "--generation_config", "-gc",
                   help="an LLM's generation settings over its config's generation section: a YAML or JSON file, "
                        "or the text itself ('{max_new_tokens: 64, do_sample: true}')")


def _add_forecast(sub) -> None:
    p = sub.add_parser("forecast", help="forecast each row's series with a model from a timeseries input to a "
                                        "timeseries output")
    _add_model_path(p)
    p.add_argument("--dataset", required=True, help="data with the model's input columns; the timeseries input's "
                                                     "column holds each row's history")
    _add_data_format(p)
    p.add_argument("--horizon", type=int, required=True, help="how many steps to forecast")
    _add_run(p)
    _add_output(p)
    p.add_argument("--output-format", choices=["parquet", "csv"], default="parquet",
                   help="forecast.<format> in the output directory (default parquet)")


def _add_serve(sub) -> None:
    p = sub.add_parser("serve", help="serve a trained model over HTTP: Ludwig's /predict and /batch_predict, "
                                     "here or on Ray Serve")
    p.add_argument("--model-path", "--model_path", "-m", required=True, help="a model directory written by plait train")
    p.add_argument("--host", "-H", default="127.0.0.1",
                   help="the address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for every interface)")
    p.add_argument("--port", "-p", type=int, default=8000, help="the port (default 8000; 0 picks a free one)")
    p.add_argument("--backend", "-b", choices=["auto", "local", "ray"],
                   help="local: this process; ray: a Ray Serve deployment (default: the model's backend type, and a "
                        "running Ray cluster when one is found)")
    p.add_argument("--allowed-origins", "--allowed_origins", "-ao", nargs="*",
                   help="origins a browser may call the server from (CORS), e.g. https://app.example.com or *")
    p.add_argument("--allowed-file-root", "--allowed_file_root", metavar="FOLDER",
                   help="a folder whose files requests may name by path instead of sending them (image and audio "
                        "values; serve.allowed_file_root). Default: files are sent as bytes, and paths are refused")
    p.add_argument("--allowed-url-hosts", "--allowed_url_hosts", nargs="*", metavar="HOST",
                   help="hosts (or buckets) whose http, https, s3 and gs URLs requests may name instead of sending a "
                        "file (serve.allowed_url_hosts). Default: no URL is fetched for a client")
    g = p.add_argument_group("Ray Serve replicas (override the model's serve section)")
    g.add_argument("--num-replicas", type=int, help="replicas holding the model (serve.num_replicas)")
    g.add_argument("--min-replicas", type=int, help="autoscale between --min-replicas and --max-replicas")
    g.add_argument("--max-replicas", type=int, help="see --min-replicas (serve.autoscaling)")
    g.add_argument("--cpus-per-replica", type=float, help="CPUs each replica reserves (serve.cpus_per_replica)")
    g.add_argument("--gpus-per-replica", type=float, help="GPUs each replica reserves; a fraction shares one "
                                                          "(serve.gpus_per_replica)")
    _add_runtime(p)


def _add_explain(sub) -> None:
    p = sub.add_parser("explain", help="why the model predicts what it does: attributions per row and input feature "
                                       "(integrated gradients), or each input's permutation importance")
    _add_model_path(p)
    p.add_argument("--dataset", required=True, help="the rows to explain (labelled, for --method permutation)")
    p.add_argument("--output-feature-name", "--output_feature_name", help="the output explained (default: the first)")
    p.add_argument("--method", choices=["ig", "permutation"], default="ig",
                   help="ig (default): integrated gradients per row; permutation: how much shuffling each input "
                        "worsens the output's validation metric")
    p.add_argument("--every-class", "--every_class", action="store_true",
                   help="ig: explain every class of a category or binary output, not just the predicted one")
    p.add_argument("--steps", type=int, default=50, help="ig: integration steps (default 50)")
    p.add_argument("--no-parts", "--no_parts", dest="parts", action="store_false",
                   help="ig: leave out each token's attribution and each image's heat map (one integral less per "
                        "text, sequence or image input)")
    p.add_argument("--output-directory", "--output_directory", "-od", default="results",
                   help="where explanations.parquet and explanation_summary.json go (default ./results)")
    p.add_argument("--backend", "-b", choices=["auto", "local", "ray"], help="where to run (default: the model's)")
    p.add_argument("--random-seed", "--random_seed", "-rs", type=int, help="permutation: the shuffles' seed")
    _add_runtime(p)


def _add_export_model(sub) -> None:
    p = sub.add_parser("export_model", aliases=["export-model"],
                       help="write a trained model for use outside plait: onnx (its preprocessing included, run by "
                            "onnxruntime and numpy alone), torch_export or safetensors")
    _add_model_path(p)
    p.add_argument("--output-path", "--output_path", "-op", default="exported_model",
                   help="the folder to write; it must not exist or be empty (default ./exported_model)")
    p.add_argument("--format", "-f", choices=["onnx", "torch_export", "safetensors"], default="onnx",
                   help="onnx (default): one graph from raw columns to plait predict's columns, with plait_onnx.py "
                        "to run it; torch_export: the network as a torch.export program; safetensors: the weights "
                        "with the config and metadata")
    _add_runtime(p)


def _add_collect(sub) -> None:
    """Ludwig's collect commands and check_install."""
    p = sub.add_parser("collect_summary", aliases=["collect-summary"],
                       help="print a trained model's layers (with parameter counts), its weights' names and its config")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--model-path", "--model_path", "-m", help="a model directory written by plait train")
    g.add_argument("--pretrained-model", "--pretrained_model", "-pm",
                   help="a Hugging Face model folder (or a hub name in the local cache): its weights' names")
    p.add_argument("--depth", type=int, help="list layers down to this many levels (default: all)")
    _add_runtime(p)

    p = _add_collecting(sub, "collect_weights", "write named weights of a trained model, one file per tensor",
                        ("--tensors", "-t"), "the weights' names")

    p = _add_collecting(sub, "collect_activations", "write what named layers of a trained model output on a "
                                                    "dataset's rows, one file per layer", ("--layers", "-lyr"),
                        "the layers' names")
    p.add_argument("--dataset", required=True, help="data with the model's input columns")
    _add_data_format(p)
    p.add_argument("--split", "-s", choices=["full", "training", "validation", "test"], default="full",
                   help="the rows the model's config and seed put in this split (default: all rows)")
    p.add_argument("--batch-size", "--batch_size", "-bs", type=int, default=128, help="rows per forward pass (default 128)")
    p.add_argument("--random-seed", "--random_seed", "-rs", type=int,
                   help="the seed of --split (default: the model's own)")
    p.add_argument("--backend", "-b", choices=["auto", "local", "ray"],
                   help="where to run (default: the model's config); ray: a Ray Data job")

    p = sub.add_parser("check_install", aliases=["check-install"],
                       help="check this installation: extras, engines, a Ray cluster, GPUs, and a small training run")
    _add_runtime(p)


def _add_collecting(sub, name: str, help_text: str, names_flag: tuple[str, str], names_help: str):
    """A collect command's parser: the model, the names to collect, where the files go, and
    Ludwig's runtime flags."""
    p = sub.add_parser(name, aliases=[name.replace("_", "-")], help=help_text)
    p.add_argument("--model-path", "--model_path", "-m", required=True, help="a model directory written by plait train")
    p.add_argument(*names_flag, nargs="+", required=True, help=f"{names_help} (plait collect_summary lists them)")
    p.add_argument("--output-directory", "--output_directory", "-od", default="results",
                   help="the folder the files go to (a path or fsspec URL; default ./results)")
    p.add_argument("--output-format", "--output_format", choices=["npy", "safetensors"], default="npy",
                   help="npy (default, Ludwig's): <name>.npy; safetensors: <name>.safetensors holding the one tensor")
    _add_runtime(p)
    return p


def _add_export_mlflow(sub) -> None:
    p = sub.add_parser("export_mlflow", aliases=["export-mlflow"],
                       help="write a trained model as an MLflow pyfunc model (mlflow models serve, "
                            "mlflow.pyfunc.load_model)")
    _add_model_path(p)
    p.add_argument("--output-path", "--output_path", "-o", default="mlflow",
                   help="a new or empty local folder for the MLflow model (default ./mlflow)")
    p.add_argument("--registered-model-name", "--registered_model_name", "-rmn", metavar="NAME",
                   help="also log the model to MLflow's tracking URI (MLFLOW_TRACKING_URI) and register it "
                        "under this name")
    _add_runtime(p)


def _add_preprocess(sub) -> None:
    p = sub.add_parser("preprocess", help="preprocess a dataset into the cache")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--config", "-c", "--preprocessing-config", "--preprocessing_config", "-pc",
                   help="the YAML config file (Ludwig's --preprocessing_config: the same format)")
    g.add_argument("--config-str", "--config_str", "-cs", "--preprocessing_config_str", "-pcs",
                   help="the config itself, as a YAML or JSON string")
    _add_data(p)
    _add_run(p)


def _add_config_verbs(sub) -> None:
    p = sub.add_parser("validate", help="check a config and print it with every default filled in")
    _add_config(p)
    p = sub.add_parser("render_config", aliases=["render-config"],
                       help="write the config with every default filled in (Ludwig's render_config)")
    _add_config(p)
    p.add_argument("--output", "-o", help="the YAML file to write (default: print it)")
    p = sub.add_parser("synthesize-dataset", aliases=["synthesize_dataset"],
                       help="write random data that fits a config's features (to try a config at once)")
    p.add_argument("--config", "-c", required=True, help="the YAML config whose features the data fits")
    p.add_argument("--rows", "--dataset-size", "--dataset_size", "-d", type=int, default=100,
                   help="how many rows (default 100)")
    p.add_argument("--output", "--output-path", "--output_path", "-od", required=True,
                   help="the file to write: .csv, .tsv or .parquet (a path or an fsspec URL)")
    p.add_argument("--seed", type=int, default=42, help="the random seed (default 42): the same seed, the same data")
    _refuse(p, ("-f", "--features"), nargs=1, advice=(
        "plait synthesizes data for a config's features: put them in a config file and pass --config"))


def _add_visualize(sub) -> None:
    p = sub.add_parser("visualize", help="draw Ludwig's plots of runs' results (learning curves, confusion "
                                         "matrices, ROC and calibration curves, hyperopt reports...)")
    p.add_argument("--visualization", "-v", required=True, metavar="NAME",
                   help="the plot: learning_curves, compare_performance, confusion_matrix, roc_curves, "
                        "calibration_1_vs_all, hyperopt_report, throughput, feature_importance, ... (README lists "
                        "them all)")
    g = p.add_argument_group("what to plot (several files compare models)")
    for names, help_text in (
            (("--training_statistics", "--training-statistics", "-trs"), "training_statistics.json of runs"),
            (("--test_statistics", "--test-statistics", "-tes"), "test_statistics.json (or evaluation_statistics.json)"),
            (("--probabilities", "-prob"), "predictions.parquet files (each class's probability)"),
            (("--predictions", "-pred"), "predictions.parquet files (the predicted classes)")):
        g.add_argument(*names, nargs="+", default=[], metavar="FILE", help=help_text)
    g.add_argument("--hyperopt_stats_path", "--hyperopt-stats-path", "-hs", metavar="FILE",
                   help="a search's hyperopt_statistics.json")
    g.add_argument("--explanation_summary", "--explanation-summary", metavar="FILE",
                   help="feature_importance (plait's own; Ludwig has no such plot): the explanation_summary.json "
                        "plait explain wrote")
    g.add_argument("--ground_truth", "--ground-truth", "-g", metavar="DATASET",
                   help="the dataset holding the true values (for plots from predictions or probabilities)")
    g.add_argument("--ground_truth_split", "--ground-truth-split", "-gts", default="2",
                   choices=["0", "1", "2", "training", "validation", "test", "full"],
                   help="the rows of --ground_truth that were predicted: 0 training, 1 validation, 2 test (default), "
                        "as the model's config and seed split them; full: every row")
    g.add_argument("--ground_truth_metadata", "--ground-truth-metadata", "-gm", metavar="FILE",
                   help="the model's model/training_set_metadata.json (its classes, and its config's split)")
    g = p.add_argument_group("options")
    g.add_argument("--output_directory", "--output-directory", "-od", default="visualizations",
                   help="where the figures are written (default ./visualizations)")
    g.add_argument("--file_format", "--file-format", "-ff", choices=["pdf", "png", "svg"], default="pdf",
                   help="the figures' format (default pdf, as Ludwig)")
    g.add_argument("--output_feature_name", "--output-feature-name", "-ofn", help="the output to plot (default: all, "
                   "or the model's only output)")
    g.add_argument("--model_names", "--model-names", "-mn", nargs="+", help="the models' names in legends, in the "
                   "order of the files")
    g.add_argument("--top_n_classes", "--top-n-classes", "-tn", nargs="+", type=int, default=[0],
                   help="plot the first n classes (0: all); hits_at_k's k in the _from_prob comparison")
    g.add_argument("--labels_limit", "--labels-limit", "-ll", type=int, default=0,
                   help="classes from this index on are counted as one (0: no limit)")
    g.add_argument("--normalize", "-n", action="store_true", help="confusion_matrix: each row as fractions")
    g.add_argument("--metrics", "-m", nargs="+", help="learning_curves: the metrics to draw (default: loss, "
                   "accuracy, hits_at_k and edit_distance where recorded)")
    g.add_argument("--positive_label", "--positive-label", "-pl", default="1",
                   help="the class ROC and precision-recall curves are drawn for: an index (default 1) or a name; "
                        "a binary output's is True")
    g.add_argument("--logging-level", "--logging_level", "-l", choices=list(LOG_LEVELS), help="the plait logger's level")
    _refuse(g, ("-sf", "--split_file"), nargs=1, advice=(
        "plait splits --ground_truth with the model's own config and seed; choose the split with --ground_truth_split"))
    _refuse(g, ("-tf", "--threshold_output_feature_names"), nargs="+", advice=(
        "it is for Ludwig's confidence_thresholding_2thresholds plots, which plait does not draw"))
    _refuse(g, ("-k", "--top_k"), nargs=1, advice=(
        "it is for Ludwig's compare_classifiers_performance_changing_k, which plait does not draw; "
        "compare_classifiers_performance_from_prob takes hits_at_k's k from --top_n_classes"))
    _refuse(g, ("-ss", "--subset"), nargs=1, advice=(
        "it is for Ludwig's _subset plots, which plait does not draw"))
    _refuse(g, ("--comet", "--wandb", "--mlflow", "--aim"), advice="plait has no experiment-tracker callbacks")


def _add_automl(sub) -> None:
    p = sub.add_parser("init_config", aliases=["init-config"],
                       help="write a config for a dataset: each column's feature type inferred from its values "
                            "(Ludwig's AutoML rules), with the reason as a comment")
    p.add_argument("--dataset", required=True, help="the data (CSV, TSV, Parquet, JSON, JSONL; path or URL)")
    p.add_argument("--target", required=True, help="the column to predict")
    p.add_argument("--output", "-o", help="the YAML file to write (default: print it)")
    p.add_argument("--hyperopt", action="store_true", help="add the search auto_train would run (with --time_limit_s)")
    p.add_argument("--time-limit-s", "--time_limit_s", type=float, default=3600,
                   help="the search's budget in seconds, with --hyperopt (default 3600)")
    p.add_argument("--backend", "-b", choices=["auto", "local", "ray"], help="where the search will run")
    _add_data_format(p)
    _refuse(p, ("--tune_for_memory", "--tune-for-memory"), advice=(
        "plait sizes batches from the rows, not from a memory probe; remove the flag"))
    p = sub.add_parser("auto_train", aliases=["auto-train"],
                       help="infer a config, search its key settings within a time budget and keep the best model "
                            "(Ludwig's auto_train)")
    p.add_argument("--dataset", required=True, help="the data (CSV, TSV, Parquet, JSON, JSONL; path or URL); "
                                                    "plait splits it 70/10/20 unless --user-config says otherwise")
    p.add_argument("--target", required=True, help="the column to predict")
    p.add_argument("--time-limit-s", "--time_limit_s", type=float, required=True,
                   help="the budget in seconds (reading the data, then the search)")
    p.add_argument("--user-config", "--user_config", help="a YAML file (or YAML text) of settings merged over the "
                                                          "inferred config; its settings win")
    g = p.add_argument_group("run")
    g.add_argument("--random-seed", "--random_seed", "-rs", type=int, default=42, help="the seed (default 42)")
    g.add_argument("--backend", "-b", choices=["auto", "local", "ray"],
                   help="where trials run (default auto: a Ray cluster plait finds, else this machine)")
    g.add_argument("--hyperopt-log-verbosity", "--hyperopt_log_verbosity", type=int, choices=[0, 1, 2, 3], default=0,
                   help="Ray Tune's console output (default 0: plait's summary only)")
    _add_output(p)
    p.set_defaults(experiment_name="auto_train")
    _refuse(p, ("--tune_for_memory", "--tune-for-memory"), advice=(
        "plait sizes batches from the rows, not from a memory probe; remove the flag"))


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="write one self-contained HTML page about a run or a search: config, data, "
                                      "learning curves, test metrics, confusion matrices, calibration, throughput")
    p.add_argument("run_directory", metavar="RUN_DIR", help="a run directory (plait train or experiment) or a search "
                                                            "directory (plait hyperopt)")
    p.add_argument("--output", "-o", help="the HTML file to write (default RUN_DIR/report.html)")
    p.add_argument("--dataset", help="the data the run was trained on, to read the test split's true classes from "
                                     "(default: the dataset the run's description.json names)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plait",
        description="Declarative deep learning: one YAML config, from a laptop to a Ray cluster. "
                    "Ludwig's spellings of the commands and flags work too (--output_directory, render_config, ...).",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="more logging")
    # The deepspeed launcher (and torch.distributed.launch) pass --local_rank before the command;
    # the rank itself is read from the environment (LOCAL_RANK), which they set as well.
    parser.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_config_verbs(sub)
    _add_preprocess(sub)
    _add_train(sub)
    _add_experiment(sub)
    _add_hyperopt(sub)
    _add_automl(sub)
    _add_evaluate(sub)
    _add_predict(sub)
    _add_forecast(sub)
    _add_serve(sub)
    _add_explain(sub)
    _add_export_model(sub)
    _add_export_mlflow(sub)
    _add_collect(sub)
    _add_visualize(sub)
    _add_report(sub)
    return parser


LOG_LEVELS = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO,
              "debug": logging.DEBUG, "notset": logging.DEBUG}
"""Ludwig's --logging_level names (notset, which lets everything through there, is debug here)."""

LUDWIG_VERBS_NOT_IMPLEMENTED = {
    "benchmark": "run plait experiment once per dataset and config",
    "datasets": "plait does not download datasets; give --dataset a path or URL",
    "inspect": "the model's config is model/model_hyperparameters.json and its weights model_weights.safetensors",
    "export_schema": "plait's config reference is docs/config.md",
    "generate_config": "write the config by hand; plait validate checks it",
    "upload": "plait does not upload models",
}
"""Ludwig's commands plait does not have, with what to do instead."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from plait.errors import PlaitError

    try:
        args = _parse(argv)
        _setup_logging(args.verbose, getattr(args, "logging_level", None))
        from plait import commands

        return getattr(commands, args.command.replace("-", "_"))(args) or 0
    except PlaitError as err:
        print(f"plait: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("plait: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return 0


def _parse(argv: list[str]) -> argparse.Namespace:
    """The parsed command line; a Ludwig command or flag plait does not have is one error saying
    what to do instead."""
    from plait.errors import UsageError

    verb = next((a for a in argv if not a.startswith("-")), None)
    if verb in LUDWIG_VERBS_NOT_IMPLEMENTED:
        raise UsageError(f"Ludwig's {verb} command is not part of plait: {LUDWIG_VERBS_NOT_IMPLEMENTED[verb]}")
    args = build_parser().parse_args(argv)
    refused = getattr(args, "refused", [])
    if refused:
        raise UsageError("; ".join(refused))
    return args


def _setup_logging(verbose: bool, level: str | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("plait")
    logger.handlers[:] = [handler]
    logger.setLevel(LOG_LEVELS[level] if level else logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False


if __name__ == "__main__":
    raise SystemExit(main())

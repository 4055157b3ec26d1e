"""What each CLI command does, given its parsed arguments. Heavy imports happen here, lazily."""

from __future__ import annotations

import json
import logging
import os
import posixpath
import sys

from plait.errors import UsageError

log = logging.getLogger("plait")


def _config(args, source: dict | None = None):
    """The validated config of ``--config`` or ``--config_str`` (or ``source``), with the
    command line's --cache-dir and --backend applied (and validated with the rest)."""
    from plait.config import load_config

    _check_ludwig_values(args)
    return load_config(_with_command_line(args, source))


def _with_command_line(args, source: dict | None = None) -> dict:
    """The raw config of ``--config`` or ``--config_str`` (or ``source``) with the command line's
    --backend and --cache-dir in its backend section, and its --mlflow, --wandb, --aim and
    --comet in its tracking list."""
    from plait.config import read_yaml, with_command_line

    from plait.config.tracking import with_trackers

    if source is None:
        source = read_yaml(args.config) if args.config else _config_from_string(args.config_str)
    source = with_trackers(source, getattr(args, "trackers", None) or [])
    return with_command_line(source, getattr(args, "backend", None), getattr(args, "cache_dir", None))


def _config_from_string(text: str):
    """``--config_str``: the config as a YAML (or JSON, which is YAML) string."""
    return _mapping_from_string(text, "--config_str", "a config: a mapping with input_features and output_features")


def _mapping_from_string(text: str, flag: str, wanted: str) -> dict:
    """A flag's YAML (or JSON, which is YAML) text, which must be a mapping (``wanted`` says of what)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{flag} is not valid YAML or JSON: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{flag} must hold {wanted}")
    return data


def _check_ludwig_values(args) -> None:
    """Ludwig flags plait accepts only at the values that mean what plait does."""
    if getattr(args, "backend", None) == "dask":
        raise UsageError("--backend dask: Ludwig lists it but has no such backend; use --backend ray, whose "
                         "preprocessing runs on Dask by default")
    if getattr(args, "model_name", "run") != "run":
        raise UsageError(f"--model_name {args.model_name!r}: plait names a run <experiment_name>_run_<n>; put the "
                         f"name in --experiment_name instead")
    data = [getattr(args, name, None) for name in ("dataset", "training_set", "validation_set", "test_set")]
    _check_data_format(getattr(args, "data_format", "auto"), [path for path in data if isinstance(path, str)])


READ_FORMATS = ("csv", "tsv", "parquet", "json", "jsonl")


def _check_data_format(wanted: str, paths: list[str]) -> None:
    """Ludwig's --data_format names the format; plait reads it from the file name, so the flag
    must agree with that."""
    from plait.data.io import data_format
    from plait.errors import DataError

    if wanted == "auto":
        return
    if wanted not in READ_FORMATS:
        raise UsageError(f"--data_format {wanted}: plait reads {', '.join(READ_FORMATS)}; convert the data to one of "
                         "them (pandas reads most formats and writes Parquet: df.to_parquet('data.parquet'))")
    for path in paths:
        try:
            found = data_format(path)
        except DataError:
            found = None
        if found is not None and found != wanted:
            raise UsageError(f"--data_format {wanted}: plait reads {path!r} as {found}, from its name; rename the "
                             "file to match its format, or leave --data_format out")


def validate(args) -> int:
    from plait.config.ludwig_defaults import differing_defaults, summary_lines
    from plait.config.render import resolved_dict, yaml_text

    config = _config(args)
    sys.stdout.write(yaml_text(resolved_dict(config)))
    lines = summary_lines(differing_defaults(config))
    if lines:  # on stderr, so that stdout stays the resolved config
        log.info("settings left at a plait default that differs from Ludwig's (set them to choose):")
        for line in lines:
            log.info("  %s", line)
    return 0


def render_config(args) -> int:
    """Ludwig's render_config: the config with every default filled in, printed or written to
    ``--output`` (all or nothing)."""
    from plait.config.render import resolved_dict, yaml_text

    if _print_or_write(yaml_text(resolved_dict(_config(args))), args.output):
        log.info("Wrote the rendered config to %s", args.output)
    return 0


def _print_or_write(text: str, output: str | None) -> bool:
    """``text`` to stdout, or (True) to ``output`` (a path or an fsspec URL), whole or not at all."""
    from plait.utils.fs import atomic_open, resolve

    if not output:
        sys.stdout.write(text)
        return False
    fs, path = resolve(output)
    _ensure_parent(fs, path)
    with atomic_open(fs, path, "w") as handle:
        handle.write(text)
    return True


def _ensure_parent(fs, path: str) -> None:
    from plait.utils.fs import ensure_dir

    parent = posixpath.dirname(path)
    if parent:
        ensure_dir(fs, parent)


def synthesize_dataset(args) -> int:
    """Random data that fits the config's features, written to ``--output``."""
    from plait.synthesize import synthesize_dataset as synthesize, write_dataset

    if args.rows < 1:
        raise UsageError(f"--rows {args.rows}: give at least 1 row")
    frame = synthesize(args.config, args.rows, seed=args.seed)
    write_dataset(frame, args.output)
    print(json.dumps({"dataset": args.output, "rows": len(frame), "columns": list(frame.columns)}))
    return 0


def preprocess(args) -> int:
    from plait.data.preprocess import preprocess as run

    from plait.backends import get_backend

    config = _config(args)
    backend = get_backend(config)
    try:
        data = backend.preprocess(lambda: run(
            config, args.dataset, training_set=args.training_set, validation_set=args.validation_set,
            test_set=args.test_set, seed=args.random_seed, engine=backend.data_engine,
        ))
    finally:
        backend.shutdown()
    summary = {split: info["rows"] for split, info in data.metadata["splits"].items()}
    print(json.dumps({"cache": data.location, "from_cache": data.from_cache, "rows": summary}))
    return 0


# ---- train / experiment ------------------------------------------------------------------------

def _data_args(args) -> dict:
    return {"dataset": args.dataset, "training_set": args.training_set,
            "validation_set": args.validation_set, "test_set": args.test_set}


def _start_run(args):
    """The model, data arguments, seed and run directory of a new or resumed run. Under a
    launcher every process runs this: the coordinator creates the run directory and tells the
    others where it is."""
    from plait.api import Model

    if args.resume and getattr(args, "model_load_path", None):
        raise UsageError("--model_load_path and --resume: give one (--resume continues a run from its checkpoint)")
    if args.resume:
        return _resumed_run(args)
    if getattr(args, "model_load_path", None):
        return _loaded_run(args)
    if not (args.config or args.config_str):
        raise UsageError("--config is required (unless --resume names a run directory)")
    model = Model(_config(args))
    data = _data_args(args)
    run = _new_run(args, model.config, data) if model.backend.is_coordinator else None
    return model, data, args.random_seed, model.backend.broadcast_object(run)


def _loaded_run(args):
    """The model, data arguments, seed and run directory of ``--model_load_path M``: M's weights
    and metadata train on, under the config given (with M's features) or M's own."""
    from plait.api import Model
    from plait.config.render import resolved_dict

    loaded = Model.load(args.model_load_path)
    config = _config(args) if args.config or args.config_str else _config(args, resolved_dict(loaded.config))
    model = loaded.with_config(config)
    data = _data_args(args)
    run = _new_run(args, model.config, data) if model.backend.is_coordinator else None
    return model, data, args.random_seed, model.backend.broadcast_object(run)


def _resumed_run(args):
    """The model, data arguments, seed and run directory of ``--resume RUN``: the run's own
    config, unless one is given (whose artifacts credentials then also open the run directory)."""
    from plait.api import Model
    from plait.run_directory import RunDirectory

    if args.config or args.config_str:
        config = _config(args)
        run = _not_a_search(RunDirectory.existing(args.resume, config.backend.artifacts_credentials), args.resume)
    else:  # the run's own config, read with the storage's own credentials
        run = _not_a_search(RunDirectory.existing(args.resume), args.resume)
        config = _config(args, _own_config(args, run))
    return Model(config), run.saved_data(args.resume), run.description()["random_seed"], run


def _own_config(args, run) -> dict:
    """The config a run saved, to resume it with; refused when it hides credentials it was given
    inline (saved masked, they cannot open the storage again)."""
    from plait.config import load_config

    source = _yaml(run.config_text())
    if load_config(_with_command_line(args, source)).backend.credentials_hidden():
        raise UsageError(f"--resume {args.resume!r}: the run's config.yaml hides the credentials it was given "
                         "inline; resume with the original config as well (--config), or keep the credentials "
                         "in a JSON file named by backend.cache_credentials or backend.artifacts_credentials")
    return source


def _not_a_search(run, location: str):
    if run.command() == "hyperopt":
        raise UsageError(f"--resume {location!r}: a search, not a training run; continue it with plait hyperopt "
                         f"--resume {location} (or one of its trials with plait train --resume "
                         f"{location}/trials/<trial id>)")
    return run


def _new_run(args, config, data: dict):
    from plait.config.render import resolved_dict, yaml_text
    from plait.run_directory import RunDirectory

    run = RunDirectory.create(args.output_directory, args.experiment_name, config.backend.artifacts_credentials)
    run.write_start(yaml_text(resolved_dict(config)), data, args.random_seed, args.command)
    return run


def _train(args, model, data: dict, seed: int, run):
    """Train and, on the coordinator, save the model and the training statistics."""
    if model.backend.is_coordinator:
        log.info("Run directory: %s", run)
    result = model.train(**data, random_seed=seed, run_dir=run, resume=bool(args.resume))
    if model.backend.is_coordinator:
        if not args.skip_save_model:
            model.save(run.model_dir)
        if not args.skip_save_training_statistics:
            run.write_statistics("training", result.ludwig_statistics())
        _remove_skipped(args, run)
    return result


def _remove_skipped(args, run) -> None:
    """What Ludwig's --skip_save_log/progress/training_description leave out. plait needs them
    while it trains (TensorBoard logs as it goes; checkpoints and the description to resume
    after a crash), so they are removed once training has ended."""
    if args.skip_save_log:
        run.tensorboard.remove()
    if args.skip_save_progress:
        run.checkpoints.remove()
    if args.skip_save_training_description:
        run.remove_description()


def train(args) -> int:
    model, data, seed, run = _start_run(args)
    try:
        result = _train(args, model, data, seed, run)
        if model.backend.is_coordinator:
            _print_summary(run, result, None, model_saved=not args.skip_save_model)
    finally:
        model.close()
    return 0


def experiment(args) -> int:
    if args.k_fold is not None:
        return _kfold(args)
    if args.eval_split == "full":
        raise UsageError("--eval_split full: plait's experiment evaluates one split of the data it trained on "
                         "(training, validation or test); for every row, run plait evaluate --split full afterwards")
    model, data, seed, run = _start_run(args)
    try:
        result = _train(args, model, data, seed, run)
        if model.backend.is_coordinator:  # the other ranks of a launcher are done
            test_stats = _test(args, model, result, run)
            _print_summary(run, result, test_stats, model_saved=not args.skip_save_model)
    finally:
        model.close()
    return 0


def _kfold(args) -> int:
    """``experiment --k_fold K``: the folds' runs, then their statistics in Ludwig's layout."""
    from plait.kfold import kfold_cross_validate

    if args.resume or getattr(args, "model_load_path", None) or not args.dataset:
        raise UsageError("--k_fold deals the rows of --dataset into folds: give --dataset (not --training_set or "
                         "--resume, and not --model_load_path); the same command again reruns only the folds that "
                         "had not finished")
    statistics, _ = kfold_cross_validate(args.k_fold, _config(args), args.dataset, args.output_directory,
                                         args.random_seed, skip_save_k_fold_split_indices=args.skip_save_k_fold_split_indices)
    print(json.dumps(statistics["overall"], indent=2))
    return 0


def _test(args, model, result, run) -> dict | None:
    """Statistics and predictions on the cached split ``--eval-split`` (test by default), written
    to the run directory as test_statistics.json and predictions (computed where the backend maps
    batches: in this process, or as Ray Data jobs on Ray)."""
    from plait.inference import CachedSplit

    split = args.eval_split
    if not result.preprocessed.rows(split):
        log.info("The %s split is empty: no test statistics.", split)
        return None
    test_stats = model.evaluate_preprocessed(result.preprocessed, split)
    if not args.skip_save_test_statistics:
        run.write_statistics("test", test_stats)
    if not args.skip_save_predictions:
        model.write_predictions(CachedSplit(result.preprocessed, split), run.root, output_format="parquet")
    return test_stats


def _print_summary(run, result, test_stats, model_saved: bool = True) -> None:
    history = result.training_statistics
    best = None
    if history:
        best = max((h for h in history if "validation" in h), key=lambda h: h["step"], default=history[-1])
    print(f"\nRun: {run}")
    where = f"model in {run.model_dir}" if model_saved else "model not saved (--skip-save-model)"
    print(f"Trained {history[-1]['epoch'] if history else 0} epochs, {history[-1]['step'] if history else 0} steps; {where}")
    from plait.evaluation.statistics import scalar_metrics

    shown = scalar_metrics(test_stats) if test_stats is not None else (best or {}).get("validation")
    if shown:
        print("Test metrics:" if test_stats is not None else "Last validation metrics:")
        for name, metrics in shown.items():
            if name == "combined":
                continue
            print(f"  {name}: " + "  ".join(f"{k} {v:.4f}" for k, v in metrics.items()))


# ---- hyperopt ------------------------------------------------------------------------------------

def hyperopt(args) -> int:
    """The search of the config's hyperopt section; --resume continues one."""
    from plait.search import hyperopt as run_search
    from plait.run_directory import RunDirectory

    _check_ludwig_values(args)
    data = _data_args(args)
    if args.resume:
        run = RunDirectory.existing(args.resume)
        if run.command() != "hyperopt":
            raise UsageError(f"--resume {args.resume!r}: a {run.command()} run, not a search; continue it with "
                             f"plait {run.command()} --resume {args.resume}")
        given = args.config or args.config_str
        source = _with_command_line(args, None if given else _own_config(args, run))
        data, seed = run.saved_data(args.resume), run.description()["random_seed"]
    else:
        if not (args.config or args.config_str):
            raise UsageError("--config is required (unless --resume names a search directory)")
        source, seed = _with_command_line(args), args.random_seed
    run_search(source, **data, output_directory=args.output_directory, experiment_name=args.experiment_name,
               random_seed=seed, resume=args.resume, tune_verbosity=args.hyperopt_log_verbosity)
    return 0


def init_config(args) -> int:
    """Ludwig's init_config: a config inferred from the data, each type's reason as a comment;
    printed, or written to ``--output`` (all or nothing)."""
    from plait.automl.auto_config import to_yaml
    from plait.automl.train import auto_config

    _check_data_format(args.data_format, [args.dataset])
    auto, config = auto_config(args.dataset, args.target, time_limit_s=args.time_limit_s if args.hyperopt else None,
                               backend=args.backend)
    auto.config = config
    if _print_or_write(to_yaml(auto), args.output):
        log.info("Wrote the config to %s (%d inputs, %d left out)", args.output, len(config["input_features"]),
                 len(auto.excluded))
    return 0


def auto_train(args) -> int:
    """Ludwig's auto_train: infer a config, search it within the time budget, report the best model."""
    from plait.automl.train import auto_train as search

    user = _mapping_file_or_text(args.user_config, "--user-config") if args.user_config else None
    result = search(args.dataset, args.target, args.time_limit_s, output_directory=args.output_directory,
                    experiment_name=args.experiment_name, random_seed=args.random_seed, user_config=user,
                    backend=args.backend, tune_verbosity=args.hyperopt_log_verbosity)
    kept = result.kept
    print(json.dumps({"best_trial": kept["trial_id"], "metric_score": kept["metric_score"],
                      "parameters": kept["parameters"], "model_path": result.model_path,
                      "model_source": result.model_source, "search_directory": result.search.run.root.url,
                      "trials": result.trials, "finalists": result.finalists}, indent=2))
    return 0


def _mapping_file_or_text(value: str, flag: str) -> dict:
    """A flag's mapping of settings: a YAML (or JSON) file, or the YAML text itself."""
    from plait.config import read_yaml

    settings = "a mapping of settings (a YAML file or text)"
    data = read_yaml(value) if os.path.exists(value) else _mapping_from_string(value, flag, settings)
    if not isinstance(data, dict):
        raise UsageError(f"{flag} {value!r} must hold {settings}")
    return data


def _yaml(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)


# ---- evaluate / predict --------------------------------------------------------------------------

def evaluate(args) -> int:
    from plait.api import Model
    from plait.utils.fs import ensure_dir, resolve, write_json

    _check_ludwig_values(args)
    model = Model.load(args.model_path, backend=args.backend)
    try:
        stats = model.evaluate(args.dataset, split=args.split, random_seed=args.random_seed)
    finally:
        model.close()
    if not args.skip_save_eval_stats:
        fs, folder = resolve(args.output_directory)
        ensure_dir(fs, folder)
        write_json(posixpath.join(folder, "evaluation_statistics.json"), stats, fs)
    from plait.evaluation.statistics import scalar_metrics

    print(json.dumps({k: v for k, v in scalar_metrics(stats).items() if k != "combined"}, indent=2))
    return 0


def predict(args) -> int:
    """Predictions written to the output directory by the backend: ``predictions.<format>``, a
    file (local) or a folder of part files in input order (Ray)."""
    from plait.api import Model

    _check_ludwig_values(args)
    if args.split != "full":
        raise UsageError(f"--split {args.split}: plait predicts on every row it is given; for metrics on the "
                         f"{args.split} split use plait evaluate --split {args.split}")
    generation = _mapping_file_or_text(args.generation_config, "--generation_config") if args.generation_config \
        else None
    model = Model.load(args.model_path, backend=args.backend)
    try:
        if args.skip_save_predictions:  # computed (and checked) all the same, as Ludwig does
            rows, path = len(model.predict(args.dataset, generation)), None
        else:
            written = model.write_predictions(args.dataset, args.output_directory, args.output_format, generation)
            rows, path = written.rows, written.path
    finally:
        model.close()
    print(json.dumps({"predictions": path, "rows": rows}))
    return 0


def forecast(args) -> int:
    """Each row's series forecast ``--horizon`` steps ahead, written to ``forecast.<format>``."""
    from plait.api import Model
    from plait.inference.forecast import write_forecast

    _check_ludwig_values(args)
    model = Model.load(args.model_path, backend=args.backend)
    try:
        frame = model.forecast(args.dataset, args.horizon)
    finally:
        model.close()
    print(json.dumps({"forecast": write_forecast(frame, args.output_directory, args.output_format),
                      "rows": len(frame)}))
    return 0


def serve(args) -> int:
    """Serve the model until SIGTERM or Ctrl-C (here, or as a Ray Serve deployment)."""
    from plait.serving import serve as serve_model

    settings = {key: value for key, value in (("num_replicas", args.num_replicas),
                                              ("cpus_per_replica", args.cpus_per_replica),
                                              ("gpus_per_replica", args.gpus_per_replica),
                                              ("allowed_origins", args.allowed_origins),
                                              ("allowed_url_hosts", args.allowed_url_hosts)) if value is not None}
    if args.allowed_file_root is not None:  # a relative folder is the working directory's (replicas run elsewhere)
        settings["allowed_file_root"] = os.path.abspath(os.path.expanduser(args.allowed_file_root))
    scaling = {key: value for key, value in (("min_replicas", args.min_replicas), ("max_replicas", args.max_replicas))
               if value is not None}
    if scaling:
        settings["autoscaling"] = scaling
    serve_model(args.model_path, args.host, args.port, backend=args.backend, settings=settings)
    return 0


def explain(args) -> int:
    """Explanations written to the output directory; prints the files and the ranking."""
    from plait.api import Model

    model = Model.load(args.model_path, backend=args.backend)
    try:
        explanation = model.explain(args.dataset, args.output_feature_name, args.method, args.every_class, args.steps,
                                    args.random_seed, args.parts)
    finally:
        model.close()
    paths = explanation.write(args.output_directory)
    print(json.dumps({**paths, "ranking": explanation.summary["ranking"]}))
    return 0


def export_model(args) -> int:
    """The model written in another format (plait.export); prints where."""
    from plait.api import Model

    model = Model.load(args.model_path, backend="local")
    print(json.dumps({"export": str(model.export_model(args.output_path, format=args.format)), "format": args.format}))
    return 0


def export_mlflow(args) -> int:
    """The model as an MLflow pyfunc model in ``--output-path`` (Ludwig's export_mlflow)."""
    from plait.export.mlflow import export_mlflow as export

    path = export(args.model_path, args.output_path, args.registered_model_name)
    print(json.dumps({"mlflow_model": path, "registered_model_name": args.registered_model_name}))
    return 0


# ---- visualize / report --------------------------------------------------------------------------

def visualize(args) -> int:
    """Ludwig's plots (plait visualize --visualization NAME) from the files named; prints the
    figures written."""
    from plait.visualize.files import from_files

    written = from_files(
        args.visualization, training_statistics=args.training_statistics, test_statistics=args.test_statistics,
        probabilities=args.probabilities, predictions=args.predictions, ground_truth=args.ground_truth,
        ground_truth_split=args.ground_truth_split, ground_truth_metadata=args.ground_truth_metadata,
        hyperopt_stats_path=args.hyperopt_stats_path, explanation_summary=args.explanation_summary,
        output_directory=args.output_directory,
        file_format=args.file_format, output_feature_name=args.output_feature_name, model_names=args.model_names,
        top_n_classes=args.top_n_classes, labels_limit=args.labels_limit, normalize=args.normalize,
        metrics=args.metrics, positive_label=args.positive_label)
    print(json.dumps({"visualization": args.visualization, "files": written}))
    return 0


def report(args) -> int:
    """One self-contained HTML page about a run or a search."""
    from plait.report import write_report

    path = write_report(args.run_directory, args.output, dataset=args.dataset)
    print(json.dumps({"report": path}))
    return 0


def collect_summary(args) -> int:
    """A trained model's layers, weights and config (Ludwig's collect_summary), or a pretrained
    model's weights' names."""
    if args.pretrained_model:
        from plait.collect.summary import pretrained_weights

        print("\n".join(f"{name}  {list(shape)}" for name, shape in pretrained_weights(args.pretrained_model)))
        return 0
    from plait.api import Model
    from plait.collect import model_summary

    print(model_summary(Model.load(args.model_path, backend="local")).text(args.depth))
    return 0


def collect_weights(args) -> int:
    """Named weights written one file each; prints the files."""
    from plait.api import Model
    from plait.collect import collect_weights as collect, save_tensors

    tensors = collect(Model.load(args.model_path, backend="local"), args.tensors)
    print(json.dumps({"files": save_tensors(tensors, args.output_directory, args.output_format)}, indent=2))
    return 0


def collect_activations(args) -> int:
    """Named layers' outputs on a dataset, one file per layer; prints the files."""
    from plait.api import Model
    from plait.collect import collect_activations as collect, save_tensors

    _check_ludwig_values(args)
    model = Model.load(args.model_path, backend=args.backend)
    try:
        activations = collect(model, args.layers, args.dataset, split=args.split, batch_size=args.batch_size,
                              random_seed=args.random_seed)
    finally:
        model.close()
    print(json.dumps({"files": save_tensors(activations, args.output_directory, args.output_format)}, indent=2))
    return 0


def check_install(args) -> int:
    """The installation's report (plait.check_install); exit 1 when something installed is broken."""
    from plait.check_install import check_install as check

    report = check()
    print(report.text())
    return 0 if report.ok else 1

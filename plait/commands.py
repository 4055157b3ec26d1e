"""What each CLI command does, given its parsed arguments. Heavy imports happen here, lazily."""

from __future__ import annotations

import json
import logging
import posixpath
import sys

from plait.errors import UsageError

log = logging.getLogger("plait")


def _config(args):
    from plait.config import load_config, with_backend_type

    config = load_config(args.config)
    if getattr(args, "cache_dir", None):
        config = config.model_copy(update={"backend": config.backend.model_copy(update={"cache_dir": args.cache_dir})})
    if getattr(args, "backend", None):
        config = with_backend_type(config, args.backend)
    return config


def validate(args) -> int:
    import yaml

    from plait.config.render import resolved_dict

    config = _config(args)
    yaml.safe_dump(resolved_dict(config), sys.stdout, sort_keys=False)
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
    from plait.run_directory import RunDirectory

    if args.resume:
        run = RunDirectory.existing(args.resume)
        saved = run.description()
        config_given = bool(args.config)
        args.config = args.config or str(run.config_file)
        config = _config(args)
        if not config_given and config.backend.credentials_hidden():
            raise UsageError(f"--resume {args.resume!r}: the run's config.yaml hides the cache credentials it was "
                             "given inline; resume with the original config as well (--config), or keep the "
                             "credentials in a JSON file named by backend.cache_credentials")
        return Model(config), dict(saved["data"]), saved["random_seed"], run
    if not args.config:
        raise UsageError("--config is required (unless --resume names a run directory)")
    model = Model(_config(args))
    data = _data_args(args)
    run = _new_run(args, model.config, data) if model.backend.is_coordinator else None
    return model, data, args.random_seed, model.backend.broadcast_object(run)


def _new_run(args, config, data: dict):
    import yaml

    from plait.config.render import resolved_dict
    from plait.run_directory import RunDirectory

    run = RunDirectory.create(args.output_directory, args.experiment_name)
    run.write_start(yaml.safe_dump(resolved_dict(config), sort_keys=False), data, args.random_seed, args.command)
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
            run.write_statistics("training", result.training_statistics)
    return result


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
    model, data, seed, run = _start_run(args)
    try:
        result = _train(args, model, data, seed, run)
        if model.backend.is_coordinator:  # the other ranks of a launcher are done
            test_stats = _test(args, model, result, run)
            _print_summary(run, result, test_stats, model_saved=not args.skip_save_model)
    finally:
        model.close()
    return 0


def _test(args, model, result, run) -> dict | None:
    """Test statistics and predictions on the cached test split, written to the run directory
    (computed where the backend maps batches: in this process, or as Ray Data jobs on Ray)."""
    from plait.inference import CachedSplit

    if not result.preprocessed.rows("test"):
        log.info("The test split is empty: no test statistics.")
        return None
    test_stats = model.evaluate_preprocessed(result.preprocessed, "test")
    if not args.skip_save_test_statistics:
        run.write_statistics("test", test_stats)
    if not args.skip_save_predictions:
        model.write_predictions(CachedSplit(result.preprocessed, "test"), run.path, output_format="parquet")
    return test_stats


def _print_summary(run, result, test_stats, model_saved: bool = True) -> None:
    history = result.training_statistics
    best = None
    if history:
        best = max((h for h in history if "validation" in h), key=lambda h: h["step"], default=history[-1])
    print(f"\nRun: {run}")
    where = f"model in {run.model_dir}" if model_saved else "model not saved (--skip-save-model)"
    print(f"Trained {history[-1]['epoch'] if history else 0} epochs, {history[-1]['step'] if history else 0} steps; {where}")
    shown = test_stats if test_stats is not None else (best or {}).get("validation")
    if shown:
        print("Test metrics:" if test_stats is not None else "Last validation metrics:")
        for name, metrics in shown.items():
            if name == "combined":
                continue
            print(f"  {name}: " + "  ".join(f"{k} {v:.4f}" for k, v in metrics.items()))


# ---- evaluate / predict --------------------------------------------------------------------------

def evaluate(args) -> int:
    from plait.api import Model
    from plait.utils.fs import ensure_dir, resolve, write_json

    model = Model.load(args.model_path, backend=args.backend)
    try:
        stats = model.evaluate(args.dataset, split=args.split, random_seed=args.random_seed)
    finally:
        model.close()
    if not args.skip_save_eval_stats:
        fs, folder = resolve(args.output_directory)
        ensure_dir(fs, folder)
        write_json(posixpath.join(folder, "evaluation_statistics.json"), stats, fs)
    print(json.dumps({k: v for k, v in stats.items() if k != "combined"}, indent=2))
    return 0


def predict(args) -> int:
    """Predictions written to the output directory by the backend: ``predictions.<format>``, a
    file (local) or a folder of part files in input order (Ray)."""
    from plait.api import Model

    model = Model.load(args.model_path, backend=args.backend)
    try:
        written = model.write_predictions(args.dataset, args.output_directory, args.output_format)
    finally:
        model.close()
    print(json.dumps({"predictions": written.path, "rows": written.rows}))
    return 0

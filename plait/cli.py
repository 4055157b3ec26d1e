"""The ``plait`` command line.

Only argparse is imported at start-up: each command imports what it needs when it runs, so
``plait --help`` answers without loading torch, pyarrow or ray. User mistakes print one
``plait: error: ...`` message and exit with code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys


def _add_config(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--config", "-c", required=required, help="the YAML config file")


def _add_data(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--dataset", help="the whole dataset (CSV, TSV, Parquet, JSON, JSONL; path or URL); plait splits it")
    g.add_argument("--training-set", help="a training set, when the data is already split")
    g.add_argument("--validation-set", help="a validation set (with --training-set)")
    g.add_argument("--test-set", help="a test set (with --training-set)")


def _add_run(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run")
    g.add_argument("--random-seed", type=int, default=42, help="seed for splitting, initialization and shuffling (default 42)")
    g.add_argument("--backend", choices=["local", "ray", "torchrun", "horovod", "deepspeed"],
                   help="where to run (default: the config's backend.type, else auto)")
    g.add_argument("--cache-dir", help="where preprocessed data is cached (overrides backend.cache_dir)")


def _add_output(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--output-directory", default="results", help="where results are written (default ./results)")
    g.add_argument("--experiment-name", default="experiment", help="results go to <output-directory>/<name>_run_<n>")
    g.add_argument("--model-name", default="run", help=argparse.SUPPRESS)


def _add_skip(p: argparse.ArgumentParser, *what: str) -> None:
    for item in what:
        p.add_argument(f"--skip-save-{item}", action="store_true", help=f"do not write the {item.replace('-', ' ')}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plait",
        description="Declarative deep learning: one YAML config, from a laptop to a Ray cluster.",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="more logging")
    # The deepspeed launcher (and torch.distributed.launch) pass --local_rank before the command;
    # the rank itself is read from the environment (LOCAL_RANK), which they set as well.
    parser.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("validate", help="check a config and print it with every default filled in")
    _add_config(p)

    p = sub.add_parser("preprocess", help="preprocess a dataset into the cache")
    _add_config(p)
    _add_data(p)
    _add_run(p)

    p = sub.add_parser("train", help="train a model")
    _add_config(p, required=False)
    _add_data(p)
    _add_run(p)
    _add_output(p)
    _add_skip(p, "model", "training-statistics", "log")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run from its checkpoint")

    p = sub.add_parser("experiment", help="preprocess, train, evaluate on the test split and predict")
    _add_config(p, required=False)
    _add_data(p)
    _add_run(p)
    _add_output(p)
    _add_skip(p, "model", "training-statistics", "test-statistics", "predictions", "log")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run from its checkpoint")

    p = sub.add_parser("evaluate", help="compute metrics of a trained model on a dataset")
    p.add_argument("--model-path", "-m", required=True, help="a model directory written by plait train")
    p.add_argument("--dataset", required=True, help="data with the output columns")
    p.add_argument("--split", choices=["full", "training", "validation", "test"], default="full",
                   help="evaluate on the rows the model's config and seed put in this split (default: all rows)")
    _add_run(p)
    p.set_defaults(random_seed=None)  # evaluate --split: the model's own seed unless given
    _add_output(p)
    _add_skip(p, "eval-stats")

    p = sub.add_parser("predict", help="predict with a trained model")
    p.add_argument("--model-path", "-m", required=True, help="a model directory written by plait train")
    p.add_argument("--dataset", required=True, help="data with the input columns (output columns are not needed)")
    _add_run(p)
    _add_output(p)
    p.add_argument("--output-format", choices=["parquet", "csv"], default="parquet",
                   help="predictions.<format> in the output directory: a file, or with --backend ray a folder of "
                        "part files that in name order hold the input's rows in order (default parquet)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    from plait.errors import PlaitError

    try:
        from plait import commands

        return getattr(commands, args.command)(args) or 0
    except PlaitError as err:
        print(f"plait: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("plait: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stderr.close()
        return 0


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("plait")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False


if __name__ == "__main__":
    raise SystemExit(main())

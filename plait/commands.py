"""What each CLI command does, given its parsed arguments. Heavy imports happen here, lazily."""

from __future__ import annotations

import json
import logging
import sys

from plait.errors import ConfigError

log = logging.getLogger("plait")


def _config(args):
    from plait.config import load_config

    config = load_config(args.config)
    overrides = {}
    if getattr(args, "cache_dir", None):
        overrides["cache_dir"] = args.cache_dir
    if getattr(args, "backend", None):
        overrides["type"] = args.backend
    if overrides:
        config = config.model_copy(update={"backend": config.backend.model_copy(update=overrides)})
    return config


def _check_backend(config) -> None:
    if config.backend.type in ("ray", "horovod", "deepspeed"):
        raise ConfigError(
            f"backend.type: the {config.backend.type} backend is not available in this version of "
            f"plait yet; use --backend local (or backend.type: local)"
        )


def validate(args) -> int:
    import yaml

    from plait.config.render import resolved_dict

    config = _config(args)
    yaml.safe_dump(resolved_dict(config), sys.stdout, sort_keys=False)
    return 0


def preprocess(args) -> int:
    from plait.data.preprocess import preprocess as run

    config = _config(args)
    _check_backend(config)
    data = run(
        config, args.dataset, training_set=args.training_set, validation_set=args.validation_set,
        test_set=args.test_set, seed=args.random_seed,
    )
    summary = {split: info["rows"] for split, info in data.metadata["splits"].items()}
    print(json.dumps({"cache": data.location, "from_cache": data.from_cache, "rows": summary}))
    return 0

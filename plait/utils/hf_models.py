"""Hugging Face models on local disk: finding a model's folder, offline, and reading its tokenizer
and config.

A model is named by a folder or by a hub name. A hub name is looked up in the local Hugging Face
cache only; plait never downloads at run time, so a missing model fails here, before any work,
with how to make it available. Only ``transformers`` builds models from these folders
(plait.models.hf_encoders); this module needs just ``huggingface_hub`` and ``tokenizers``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from plait.errors import ModelError

MODEL_CONFIG = "hf_model_config"
"""The metadata key of a Hugging Face encoder's model config (its config.json, as a dict)."""
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
TOKENIZER_FILE = "tokenizer.json"
SLOW_TOKENIZER_FILES = ("vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model")
"""The vocabulary files of tokenizers that transformers converts to a fast one."""


def is_hf_encoder(encoder) -> bool:
    """Whether an encoder's settings are a pretrained Hugging Face model's (plait.config.hf_encoders),
    told by a flag of their class: the features and models that ask need not import the config
    package, which costs about a second in every process that imports it."""
    return getattr(type(encoder), "is_hf_model", False)


def model_folder(name_or_path: str, setting: str) -> Path:
    """The folder of ``name_or_path``: the path itself, or the model's snapshot in the local
    Hugging Face cache. ``setting`` (a config path) is named in the error."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.is_absolute() or name_or_path.startswith((".", "~")) or name_or_path.count("/") > 1:
        raise ModelError(f"{setting}: {name_or_path!r} is not a folder; give the folder of a Hugging Face model "
                         f"(config.json, model.safetensors, tokenizer.json)")
    return _cached_snapshot(name_or_path, setting)


def hub_cache() -> str:
    """The local Hugging Face cache, as the environment says now (huggingface_hub reads it once,
    when first imported)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def _cached_snapshot(name: str, setting: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache()
    try:
        return Path(snapshot_download(name, cache_dir=cache, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        raise ModelError(
            f"{setting}: {name!r} is neither a folder nor in the local Hugging Face cache ({cache}); "
            f"plait does not download models. On a machine with internet run `hf download {name}` and copy its "
            f"cache folder here (or set HF_HUB_CACHE to it), or save the model with save_pretrained() and give "
            f"that folder") from None


def check_weights(folder: Path, setting: str) -> None:
    """The folder holds safetensors weights (plait loads no pickled .bin weights) whose headers
    read: a damaged file is named here, not in a safetensors traceback."""
    if any((folder / name).is_file() for name in WEIGHT_FILES):
        for file in sorted(folder.glob("*.safetensors")):
            _check_safetensors(file, setting)
        return
    pickled = sorted(p.name for p in folder.glob("*.bin"))
    advice = (f"it has only pickled weights ({', '.join(pickled)}), which plait does not load (unpickling runs "
              f"code): convert them with transformers' save_pretrained(safe_serialization=True)" if pickled else
              "it has no weights: save the model there with save_pretrained(), or set use_pretrained: false to "
              "start from random weights")
    raise ModelError(f"{setting}: {folder} has no model.safetensors; {advice}")


def _check_safetensors(file: Path, setting: str) -> None:
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="numpy") as weights:
            weights.keys()
    except Exception as error:  # noqa: BLE001 (safetensors raises its own error type, or OSError)
        reason = (str(error).splitlines() or [type(error).__name__])[0][:200]
        raise ModelError(f"{setting}: {file} is damaged ({reason}); save the model there again with "
                         "save_pretrained()") from None


def transformers_config(transformers, model_config: dict, setting: str):
    """The transformers config of a model's config.json; an architecture the installed
    transformers does not know is one line saying so (transformers lists every type it knows)."""
    try:
        return transformers.AutoConfig.for_model(**model_config)
    except (ValueError, KeyError, TypeError) as error:
        kind = model_config.get("model_type")
        if kind is None or f"{kind}" in str(error):
            raise ModelError(f"{setting}: its config.json names model_type {kind!r}, which transformers "
                             f"{transformers.__version__} does not know; use a model of an architecture it has "
                             "(llama, mistral, qwen2, gpt2, bert, ...) or a transformers that knows it") from None
        raise ModelError(f"{setting}: its config.json cannot be read by transformers: "
                         f"{str(error).splitlines()[0][:200]}") from None


def read_model_config(folder: Path, setting: str) -> dict:
    """The model's config.json."""
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{setting}: {folder} has no config.json, so it is not a Hugging Face model folder") from None
    except (OSError, ValueError) as error:
        raise ModelError(f"{setting}: {folder}/config.json cannot be read ({error})") from None


def tokenizer_json(name_or_path: str, setting: str) -> str:
    """The model's fast tokenizer, serialized (tokenizer.json, or converted from the model's slow
    tokenizer files by transformers when there is none)."""
    folder = model_folder(name_or_path, setting)
    return _tokenizer_in(folder, _version(folder), setting)


def _version(folder: Path) -> tuple:
    """What tells one state of a folder's tokenizer files from another (sizes and times)."""
    files = [folder / name for name in (TOKENIZER_FILE, *SLOW_TOKENIZER_FILES)]
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file())


@functools.lru_cache(maxsize=8)
def _tokenizer_in(folder: Path, version: tuple, setting: str) -> str:
    """Read once per process and state of the files: statistics and transforms ask for it once per
    partition."""
    path = folder / TOKENIZER_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8")
    return _converted_tokenizer(folder, setting)


def _converted_tokenizer(folder: Path, setting: str) -> str:
    if not any((folder / name).is_file() for name in SLOW_TOKENIZER_FILES):
        raise ModelError(f"{setting}: {folder} has no tokenizer (tokenizer.json, or the vocabulary files of one: "
                         f"{', '.join(SLOW_TOKENIZER_FILES)}); save the model's tokenizer there with save_pretrained()")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ModelError(f"{setting}: {folder} has no tokenizer.json; converting its other tokenizer files needs "
                         f"transformers: pip install plait[hf]") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, use_fast=True)
    except (OSError, ValueError, TypeError) as error:
        raise ModelError(f"{setting}: {folder} has no tokenizer that transformers can load ({error}); save the "
                         f"model's tokenizer there with save_pretrained()") from None
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ModelError(f"{setting}: the tokenizer in {folder} has no fast (tokenizer.json) form, which plait "
                         f"needs; save a fast tokenizer there")
    return backend.to_str()


def tokenizer_fingerprint(name_or_path: str, setting: str) -> str:
    """A hash of the tokenizer and the model's config, for the preprocessing cache key: a model
    folder that changes gives new token ids."""
    folder = model_folder(name_or_path, setting)
    config = (folder / "config.json").read_bytes() if (folder / "config.json").is_file() else b""
    digest = hashlib.sha256(tokenizer_json(name_or_path, setting).encode())
    digest.update(config)
    return digest.hexdigest()


def encoder_model_config(encoder, setting: str, vocabulary_size: int) -> dict:
    """The config of the model a Hugging Face encoder builds: the pretrained model's config.json,
    or, for a named encoder with use_pretrained false, its architecture over the tokenizer's
    vocabulary (transformers fills in the rest when it builds the model)."""
    if encoder.use_pretrained or encoder.named.model_type is None:
        config = read_model_config(model_folder(encoder.pretrained_model_name_or_path, setting), setting)
        if "model_type" not in config:
            raise ModelError(f"{setting}: the model's config.json names no model_type, so transformers cannot "
                             f"tell its architecture")
        if not encoder.use_pretrained:  # random weights: room for every token of the tokenizer
            config["vocab_size"] = max(int(config.get("vocab_size") or 0), vocabulary_size)
        return config
    return {**encoder.architecture, "model_type": encoder.named.model_type, "vocab_size": vocabulary_size}


def context_length(config: dict) -> int | None:
    """The most tokens the model takes (its position embeddings), where its config says."""
    for key in ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length"):
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None

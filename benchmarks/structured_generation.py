"""What structured generation (the ``text_parser`` decoder) costs: generated tokens/s of predict
held to a JSON schema and to a regular expression, against the same model generating freely, and
the one-time cost of teaching lm-format-enforcer the tokenizer.

    .venv/bin/python benchmarks/structured_generation.py
    .venv/bin/python benchmarks/structured_generation.py --vocab 16000 --rows 64 --tokens 96 --layers 4 --hidden 256

The model is a Llama of random weights (``--layers``, ``--hidden``) over a byte-level BPE tokenizer
of ``--vocab`` tokens learnt from the Python standard library's sources (found on this machine;
nothing is downloaded), saved as a plait model with ``trainer.type: none``. Each variant predicts
``--rows`` prompts with ``generation.max_new_tokens: --tokens``: free (no decoder), a JSON schema
(an object of a name of at most 20 characters, an enum and a boolean), a regex (a date). Tokens/s = the answers' tokens
(up to their end) / predict's wall time, after a warm-up predict of one batch (which, for
the constrained variants, also builds the tokenizer's data: timed apart as ``first_predict_s``).
Printed, and written as JSON (default ``benchmarks/out/structured_generation.json``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import preprocess  # noqa: E402  (benchmarks/preprocess.py: write_report, machine)

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "kind": {"type": "string", "enum": ["module", "class", "function"]},
                                           "public": {"type": "boolean"}},
          "required": ["name", "kind", "public"], "additionalProperties": False}
DECODERS = {"free": None,
            "json_schema": {"type": "text_parser", "json_schema": SCHEMA},
            "regex": {"type": "text_parser", "regex": r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"}}


def byte_level_tokenizer(vocab: int):
    """A byte-level BPE tokenizer learnt from the standard library's sources."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    sources = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator((path.read_text(errors="ignore") for path in sources), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tokenizer


def write_base(folder: Path, args) -> None:
    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    tokenizer = byte_level_tokenizer(args.vocab)
    config = transformers.LlamaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=args.hidden,
                                      intermediate_size=int(2.75 * args.hidden), num_hidden_layers=args.layers,
                                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=512,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))


def prompts(count: int):
    import pandas as pd

    words = ["parse", "the", "module", "name", "and", "count", "its", "lines", "date", "of", "release"]
    return pd.DataFrame({"prompt": [" ".join(words[(i + j) % len(words)] for j in range(8)) for i in range(count)],
                         "answer": ["x"] * count})


def variant(base: Path, work: Path, decoder: dict | None, args) -> dict:
    from plait.api import Model

    output = {"name": "answer", "type": "text", **({"decoder": decoder} if decoder else {})}
    model = Model({"model_type": "llm", "base_model": str(base),
                   "input_features": [{"name": "prompt", "type": "text"}], "output_features": [output],
                   "generation": {"max_new_tokens": args.tokens}, "trainer": {"type": "none", "eval_batch_size": 16},
                   "backend": {"type": "local", "cache_dir": str(work / "cache")}})
    model.train(prompts(16), progress_bar=False)
    started = time.perf_counter()
    model.predict(prompts(16))
    first = time.perf_counter() - started
    started = time.perf_counter()
    predictions = model.predict(prompts(args.rows))
    seconds = time.perf_counter() - started
    tokens = int(sum(len(p) for p in predictions["answer_probabilities"]))
    return {"first_predict_s": round(first, 3), "predict_s": round(seconds, 3), "tokens": tokens,
            "tokens_per_s": round(tokens / seconds, 1), "example": predictions["answer_predictions"].iloc[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=16000)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "structured_generation.json")
    args = parser.parse_args(argv)
    import torch

    torch.manual_seed(0)
    work = Path(tempfile.mkdtemp(prefix="plait-structured-"))
    try:
        write_base(work / "base", args)
        results = {name: variant(work / "base", work, decoder, args) for name, decoder in DECODERS.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    free = results["free"]["tokens_per_s"]
    for name, result in results.items():
        print(f"{name:12s} {result['tokens_per_s']:8.1f} tokens/s ({result['tokens_per_s'] / free:.2f}x free), "
              f"first predict {result['first_predict_s']:.2f} s, e.g. {result['example']!r}")
    preprocess.write_report(args.out, {"command": " ".join(sys.argv), "settings": vars(args) | {"out": str(args.out)},
                                       "results": results, "machine": preprocess.machine()})
    return 0


if __name__ == "__main__":
    sys.exit(main())

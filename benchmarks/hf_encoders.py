"""Benchmark of a frozen pretrained text encoder: run every step, or once at preprocessing
(``preprocessing.cache_encoder_embeddings: true``).

    .venv/bin/python benchmarks/hf_encoders.py
    .venv/bin/python benchmarks/hf_encoders.py --rows 4000 --epochs 4 --layers 4 --hidden 256

The encoder is a BERT-like model of random weights built here from a config (``--layers``,
``--hidden``; 4 heads, a feed-forward 4x the width) and saved with save_pretrained, with a
WordPiece tokenizer trained here on the texts: nothing is downloaded. The texts are
``--rows`` reviews of 20 to 60 filler words with one good or bad word (the label).

Each run is ``Model(config).train(csv)`` on the local backend with the encoder frozen
(``trainable: false``, ``reduce_output: mean``) and a binary output, a fresh cache each time:

* every step: the encoder runs in every training step (and every evaluation);
* cached: preprocessing runs the encoder once per row and stores its output; training reads
  the vectors.

Reported per run: the preprocessing time (``Model.preprocess``: tokenizing, and for the cached
run the encoder's forward passes), the train call's time (on the cache just written), the
training rows/s (median over the epochs after the first, as each epoch records it), and the sum. The speed-up is of
training rows/s, and of the whole call. Printed, and written as JSON (default
``benchmarks/out/hf_encoders.json``) with the command and the machine.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import preprocess  # noqa: E402  (benchmarks/preprocess.py: write_report, machine)

OUT_DIR = HERE / "out"
FILLER = ["the", "movie", "was", "very", "plot", "acting", "film", "long", "slow", "fun", "story", "scene", "actor",
          "music", "ending", "cast", "script", "director", "camera", "light"]


def reviews(rows: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    records = []
    for _ in range(rows):
        label = rng.random() < 0.5
        words = [rng.choice(FILLER) for _ in range(rng.randint(20, 60))]
        words.insert(rng.randint(0, len(words)), rng.choice(["good", "great"] if label else ["bad", "awful"]))
        records.append({"text": " ".join(words), "label": label})
    return pd.DataFrame(records)


def write_model(folder: Path, texts: list[str], layers: int, hidden: int) -> None:
    """A BERT-like model of random weights and a WordPiece tokenizer trained on ``texts``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=2000, special_tokens=specials))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]")),
                                                 ("[SEP]", tokenizer.token_to_id("[SEP]"))])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]")
    config = transformers.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=hidden,
                                     num_hidden_layers=layers, num_attention_heads=4, intermediate_size=4 * hidden,
                                     max_position_embeddings=128)
    transformers.BertModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)


def run(csv: Path, folder: Path, cache: bool, args, work: Path) -> dict:
    from plait.api import Model

    config = {"input_features": [{"name": "text", "type": "text",
                                  "preprocessing": {"cache_encoder_embeddings": cache},
                                  "encoder": {"type": "bert", "pretrained_model_name_or_path": str(folder),
                                              "reduce_output": "mean"}}],
              "output_features": [{"name": "label", "type": "binary"}],
              "trainer": {"epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": 0.001},
              "backend": {"type": "local", "cache_dir": str(work / f"cache-{cache}-{time.time_ns()}")}}
    model = Model(config)
    started = time.perf_counter()
    model.preprocess(str(csv))
    preprocessed = time.perf_counter()
    result = model.train(str(csv), progress_bar=False)  # the cache written just above
    trained = time.perf_counter()
    speeds = [r["rows_per_s"] for r in result.training_statistics if "rows_per_s" in r]
    return {"cached": cache, "preprocess_s": round(preprocessed - started, 2),
            "train_call_s": round(trained - preprocessed, 2),
            "train_rows_per_s": round(statistics.median(speeds[1:] or speeds), 1),
            "rows_per_s_per_epoch": [round(s, 1) for s in speeds], "total_s": round(trained - started, 2),
            "accuracy": round(model.evaluate(str(csv))["label"]["accuracy"], 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run, the first not counted (default 4)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT_DIR / "hf_encoders.json")
    args = parser.parse_args(argv)
    if min(args.rows, args.epochs, args.batch_size, args.layers, args.hidden) <= 0:
        parser.error("counts must be positive")
    work = Path(tempfile.mkdtemp(prefix="plait-hf-bench-"))
    try:
        frame = reviews(args.rows, args.seed)
        csv = work / "reviews.csv"
        frame.to_csv(csv, index=False)
        write_model(work / "model", frame["text"].tolist(), args.layers, args.hidden)
        runs = [run(csv, work / "model", cache, args, work) for cache in (False, True)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    every_step, cached = runs
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "every_step": every_step, "cached": cached,
              "train_speedup": round(cached["train_rows_per_s"] / every_step["train_rows_per_s"], 1),
              "total_speedup": round(every_step["total_s"] / cached["total_s"], 2),
              "gpu": "not measured: no device lent to this session", "machine": preprocess.machine()}
    for name, r in (("every step", every_step), ("cached", cached)):
        print(f"{name:>10}: training {r['train_rows_per_s']:,.0f} rows/s (per epoch {r['rows_per_s_per_epoch']}), "
              f"preprocess {r['preprocess_s']} s + train {r['train_call_s']} s = {r['total_s']} s, "
              f"accuracy {r['accuracy']}")
    print(f"speed-up: training {report['train_speedup']}x, preprocess + train {report['total_speedup']}x")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of sequence outputs and variable-length batches.

    .venv/bin/python benchmarks/sequences.py                    # both parts, defaults
    .venv/bin/python benchmarks/sequences.py --part generation --epochs 40 --beam 1 4
    .venv/bin/python benchmarks/sequences.py --part padding --rows 20000

Two parts:

* generation: a seq2seq task, reversing a sequence of 2-8 tokens of a 20-token vocabulary
  (``--rows`` seeded rows, 80 % trained on for ``--epochs``, no early stopping). A GRU encoder reads the input
  sequence and a text output with the generator decoder writes the reverse. Reported on the
  held-out 20 %: sequence and token accuracy, and generation throughput, in generated tokens per
  second of ``Model.predict`` on those rows repeated ``--predict-repeat`` times (its preprocessing
  included), for each ``--beam`` width.
* padding: variable-length texts (lengths drawn from a log-normal distribution, median 20 tokens,
  capped at 256), batched as training batches them. Reported for plain shuffling and for
  ``trainer.bucketing_field``: the share of a batch's token positions that are padding (each
  batch padded to its own longest row), and the seconds of one training epoch of an embed
  encoder, which pads per batch.

Results are printed and written as JSON (default ``benchmarks/out/sequences.json``) with the
command line and the machine's details.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import preprocess  # noqa: E402  (benchmarks/preprocess.py: write_report, machine)

VOCABULARY = [f"w{i}" for i in range(20)]


def reverse_task(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 9, rows)
    tokens = [rng.choice(VOCABULARY, n) for n in lengths]
    return pd.DataFrame({"source": [" ".join(t) for t in tokens], "target": [" ".join(t[::-1]) for t in tokens]})


def generation(args) -> dict:
    from plait.api import Model

    data = reverse_task(args.rows, args.seed)
    cut = int(len(data) * 0.8)
    results = {}
    for beam in args.beam:
        config = {"input_features": [{"name": "source", "type": "sequence",
                                      "encoder": {"type": "rnn", "cell_type": "gru", "state_size": 256,
                                                  "reduce_output": "last"}}],
                  "output_features": [{"name": "target", "type": "text", "preprocessing": {"tokenizer": "space"},
                                       "decoder": {"type": "generator", "beam_width": beam}}],
                  "trainer": {"epochs": args.epochs, "batch_size": 64, "learning_rate": 0.003, "early_stop": -1},
                  "backend": {"type": "local", "cache_dir": str(HERE / "data" / "sequences-cache")}}
        model = Model(config)
        start = time.perf_counter()
        model.train(data.iloc[:cut])
        trained = time.perf_counter() - start
        test = data.iloc[cut:]
        predicted = model.predict(test)["target_predictions"]
        timed = pd.concat([test] * args.predict_repeat, ignore_index=True)  # long enough to time
        start = time.perf_counter()
        generated = model.predict(timed)["target_predictions"]
        seconds = time.perf_counter() - start
        tokens = int(sum(len(p.split()) + 1 for p in generated))  # each sequence's tokens and its stop token
        metrics = model.evaluate(test)["target"]
        results[f"beam_{beam}"] = {"train_seconds": round(trained, 1), "predict_seconds": round(seconds, 3),
                                   "generated_tokens_per_s": round(tokens / seconds),
                                   "sequence_accuracy": round(metrics["sequence_accuracy"], 4),
                                   "token_accuracy": round(metrics["token_accuracy"], 4),
                                   "exact_matches": float(np.mean(predicted.to_numpy() == test["target"].to_numpy()))}
        print(f"beam {beam}: {results[f'beam_{beam}']}")
    return results


def padding(args) -> dict:
    from plait.api import Model
    from plait.data.tensors import table_tensors
from plait.training.batches import Batches, trim_padding

    rng = np.random.default_rng(args.seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(20), 0.8, args.rows)), 1, 256).astype(int)
    texts = [" ".join(rng.choice(VOCABULARY, n)) for n in lengths]
    frame = pd.DataFrame({"text": texts, "label": (lengths > 20).astype(int)})
    results = {}
    for name, field in (("shuffled", None), ("bucketed", "text")):
        config = {"input_features": [{"name": "text", "type": "text", "encoder": "embed",
                                      "preprocessing": {"tokenizer": "space"}}],
                  "output_features": [{"name": "label", "type": "binary"}],
                  "trainer": {"epochs": 1, "batch_size": 128, "bucketing_field": field},
                  "backend": {"type": "local", "cache_dir": str(HERE / "data" / "sequences-cache")}}
        model = Model(config)
        data = model.preprocess(frame)
        tokens = table_tensors(data.read_split("training"), data.metadata["features"], ["text"])["text"]
        batches = Batches({"text": tokens}, 128, seed=0, bucketing_field=field)
        real = padded = 0
        for batch in batches.epoch(0):
            cut = trim_padding(batch, ["text"])["text"]
            real, padded = real + int((cut != 0).sum()), padded + cut.numel()
        epoch_seconds = []
        for _ in range(args.repeat):
            model = Model(config)
            start = time.perf_counter()
            model.train(frame)
            epoch_seconds.append(time.perf_counter() - start)
        results[name] = {"padding_share": round(1 - real / padded, 4), "padded_positions": padded,
                         "full_length_positions": int(tokens.numel()), "train_epoch_seconds": round(min(epoch_seconds), 2)}
        print(f"{name}: {results[name]}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("generation", "padding", "both"), default="both")
    parser.add_argument("--rows", type=int, default=None, help="rows (generation: 6,000; padding: 20,000)")
    parser.add_argument("--epochs", type=int, default=40, help="generation: training epochs (default 40)")
    parser.add_argument("--beam", type=int, nargs="+", default=[1, 4], help="generation: beam widths (default 1 4)")
    parser.add_argument("--predict-repeat", type=int, default=10,
                        help="generation: the held-out rows repeated this many times for the timing (default 10)")
    parser.add_argument("--repeat", type=int, default=2, help="padding: training epochs timed, best kept (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "sequences.json")
    args = parser.parse_args(argv)
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])}
    if args.part in ("generation", "both"):
        report["generation"] = generation(argparse.Namespace(**{**vars(args), "rows": args.rows or 6000}))
    if args.part in ("padding", "both"):
        report["padding"] = padding(argparse.Namespace(**{**vars(args), "rows": args.rows or 20000}))
    report["machine"] = preprocess.machine()
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of LoRA fine-tuning (``model_type: llm``): plait against a plain transformers + peft loop
on the same model, rows and tokens.

    .venv/bin/python benchmarks/llm_lora.py
    .venv/bin/python benchmarks/llm_lora.py --layers 8 --hidden 512 --vocab 32000 --rows 1024

The model is a Llama of random weights built here from a config (``--layers``, ``--hidden``,
``--vocab``; 8 heads, a feed-forward 2.75x the width) with a word-level tokenizer over ``--vocab``
made-up words, saved with save_pretrained: nothing is downloaded. Each row's prompt is 16 to 48
words and its target 4 to 16 words (the prompt's last words, reversed).

* plait: ``Model(config).train`` on the local backend, LoRA (r 8, alpha 16, dropout 0.05, on
  q_proj and v_proj), AdamW, ``--batch-size`` rows per step, ``--epochs`` epochs; rows/s as each
  epoch records it.
* plain loop: the same base model and peft LoRA settings, AdamW with the same learning rate, the
  same training rows as plait's cache holds them (the same token ids), shuffled each epoch, each
  batch the rows' prompt then target, right-padded, labels -100 outside the target, and
  ``model(input_ids, attention_mask, labels)``: the loop the transformers and peft documentation
  write.

Tokens/s counts every real token a step reads (prompt, target and the end token), the same for
both; the first epoch is not counted (warm-up). Printed, and written as JSON (default
``benchmarks/out/llm_lora.json``) with the command and the machine.
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
LORA = {"type": "lora", "r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def rows(count: int, vocab: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab - len(SPECIALS))]
    records = []
    for _ in range(count):
        prompt = [rng.choice(words) for _ in range(rng.randint(16, 48))]
        records.append({"prompt": " ".join(prompt), "target": " ".join(reversed(prompt[-rng.randint(4, 16):]))})
    return pd.DataFrame(records)


def word_tokenizer(vocab: int):
    """A word-level tokenizer over ``vocab`` tokens: SPECIALS, then the made-up words w0, w1, ...;
    it puts <s> before a text (the device kit's LoRA step uses it too)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokens = SPECIALS + [f"w{i}" for i in range(vocab - len(SPECIALS))]
    tokenizer = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(SPECIALS)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tokenizer


def padded(batch: list, device=None) -> tuple:
    """``(input ids, attention mask, labels)`` of ``(prompt ids, target ids)`` rows: each row its
    prompt then its target, right-padded with 0, labels -100 outside the target (the plain loop's
    batches, here and in the device kit)."""
    import torch

    width = max(len(p) + len(t) for p, t in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros(len(batch), width, dtype=torch.long)
    for row, (p, t) in enumerate(batch):
        ids[row, :len(p) + len(t)] = torch.tensor(p + t)
        labels[row, len(p):len(p) + len(t)] = torch.tensor(t)
        mask[row, :len(p) + len(t)] = 1
    return ids.to(device), mask.to(device), labels.to(device)


def write_model(folder: Path, vocab: int, layers: int, hidden: int) -> None:
    """A Llama of random weights and a word-level tokenizer over the made-up words."""
    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    tokenizer = word_tokenizer(vocab)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=int(2.75 * hidden),
                                      num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=8,
                                      max_position_embeddings=256, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")


def plait_run(csv: Path, folder: Path, args, work: Path):
    from plait.api import Model

    config = {"model_type": "llm", "base_model": str(folder), "adapter": LORA,
              "input_features": [{"name": "prompt", "type": "text"}],
              "output_features": [{"name": "target", "type": "text"}],
              "trainer": {"type": "finetune", "epochs": args.epochs, "batch_size": args.batch_size,
                          "learning_rate": args.learning_rate, "optimizer": {"type": "adamw"}},
              "backend": {"type": "local", "cache_dir": str(work / "cache")}}
    model = Model(config)
    data = model.preprocess(str(csv))
    result = model.train(str(csv), progress_bar=False)
    speeds = [r["rows_per_s"] for r in result.training_statistics]
    return data, speeds


def plain_loop(data, folder: Path, args) -> tuple[list[float], int]:
    """Seconds per epoch of the plain loop, and the real tokens an epoch reads."""
    import peft
    import torch

    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    table = data.read_split("training")
    pairs = [([i - 1 for i in p], [i - 1 for i in t]) for p, t in zip(table["prompt"].to_pylist(), table["target"].to_pylist())]
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    model = peft.get_peft_model(model, peft.LoraConfig(r=LORA["r"], lora_alpha=LORA["alpha"], lora_dropout=LORA["dropout"],
                                                       target_modules=LORA["target_modules"], task_type="CAUSAL_LM"))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.learning_rate)
    model.train()
    rng = random.Random(args.seed)
    times = []
    for _ in range(args.epochs):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        started = time.perf_counter()
        for first in range(0, len(order), args.batch_size):
            ids, mask, labels = padded([pairs[i] for i in order[first:first + args.batch_size]])
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return times, sum(len(p) + len(t) for p, t in pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=768)
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run, the first not counted (default 3)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT_DIR / "llm_lora.json")
    args = parser.parse_args(argv)
    if min(args.rows, args.epochs - 1, args.batch_size, args.layers, args.hidden) <= 0 or args.vocab <= len(SPECIALS):
        parser.error("counts must be positive, with two epochs at least")
    work = Path(tempfile.mkdtemp(prefix="plait-llm-bench-"))
    try:
        csv = work / "rows.csv"
        rows(args.rows, args.vocab, args.seed).to_csv(csv, index=False)
        write_model(work / "model", args.vocab, args.layers, args.hidden)
        data, plait_speeds = plait_run(csv, work / "model", args, work)
        loop_times, tokens = plain_loop(data, work / "model", args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    training_rows = data.rows("training")
    tokens_per_row = tokens / training_rows
    plait_tokens = statistics.median(plait_speeds[1:]) * tokens_per_row
    loop_tokens = tokens / statistics.median(loop_times[1:])
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "training_rows": training_rows, "tokens_per_row": round(tokens_per_row, 1),
              "plait_tokens_per_s": round(plait_tokens), "plait_rows_per_s_per_epoch": [round(s, 1) for s in plait_speeds],
              "loop_tokens_per_s": round(loop_tokens), "loop_seconds_per_epoch": [round(t, 2) for t in loop_times],
              "ratio": round(plait_tokens / loop_tokens, 3),
              "gpu": "not measured: no device lent to this session", "machine": preprocess.machine()}
    print(f"plait: {plait_tokens:,.0f} tokens/s (rows/s per epoch {report['plait_rows_per_s_per_epoch']})")
    print(f"plain transformers + peft loop: {loop_tokens:,.0f} tokens/s (s per epoch {report['loop_seconds_per_epoch']})")
    print(f"plait / loop: {report['ratio']}")
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""QLoRA against LoRA on the CPU (``model_type: llm`` with ``quantization``): the base model's
memory, the process's peak memory, training tokens/s and generation tokens/s.

    .venv/bin/python benchmarks/llm_quantization.py
    .venv/bin/python benchmarks/llm_quantization.py --layers 8 --hidden 512 --vocab 8000 --rows 256

The model is benchmarks/llm_lora.py's: a Llama of random weights built from a config (``--layers``,
``--hidden``, ``--vocab``) with a word-level tokenizer, saved with save_pretrained; nothing is
downloaded; the rows are llm_lora's too (a prompt of 16 to 48 made-up words, a target of 4 to 16).
Each variant runs in a process of its own, so that its peak resident memory (``ru_maxrss``) is its
own: ``Model(config).train`` on the local backend, LoRA (r 8 on q_proj and v_proj) over the base
in float32 (lora), in 8 bits (qlora8: LLM.int8()) or in 4 bits (qlora4: nf4, double quantization,
float32 compute), ``--epochs`` epochs of ``--batch-size`` rows; then ``predict`` on ``--predict-rows``
prompts, greedy, ``--new-tokens`` tokens each.

* base model: bytes of the module's parameters and buffers once built (bitsandbytes' packed
  weights and their scales included; the adapter's few weights too);
* memory after training, resident: anonymous (what the process allocated: quantized weights,
  adapter, optimizer state, activations' leftovers) and file-backed (pages of the safetensors file,
  which transformers maps: float32 weights are used in place from it; the kernel may drop those
  pages and read them again). Then the peak (``ru_maxrss``, loading included);
* training tokens/s: every real token a step reads (prompt, target, end token), from the rows/s
  that plait records per epoch, the first epoch not counted (warm-up);
* generation tokens/s: the tokens generated over the wall time of ``predict``.

Printed, and written as JSON (default ``benchmarks/out/llm_quantization.json``) with the command
and the machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import llm_lora  # noqa: E402  (benchmarks/llm_lora.py: rows, write_model, LORA)
import preprocess  # noqa: E402  (benchmarks/preprocess.py: write_report, machine)

OUT_DIR = HERE / "out"
VARIANTS = {"lora": None, "qlora8": {"bits": 8},
            "qlora4": {"bits": 4, "bnb_4bit_quant_type": "nf4", "bnb_4bit_compute_dtype": "float32"}}


def variant_run(folder: Path, csv: Path, predict_csv: Path, quantization: dict | None, args) -> dict:
    """One variant, in this process: its figures as a dict."""
    import pandas as pd

    from plait.api import Model

    config = {"model_type": "llm", "base_model": str(folder), "adapter": llm_lora.LORA,
              "input_features": [{"name": "prompt", "type": "text"}],
              "output_features": [{"name": "target", "type": "text"}],
              "trainer": {"type": "finetune", "epochs": args.epochs, "batch_size": args.batch_size,
                          "learning_rate": 1e-4, "optimizer": {"type": "adamw"}, "eval_batch_size": args.batch_size},
              "generation": {"max_new_tokens": args.new_tokens, "min_new_tokens": args.new_tokens},
              "backend": {"type": "local", "cache_dir": str(csv.parent / "cache")}}
    if quantization is not None:
        config["quantization"] = quantization
    model = Model(config)
    data = model.preprocess(str(csv))
    table = data.read_split("training")
    tokens_per_row = sum(len(p) + len(t) for p, t in zip(table["prompt"].to_pylist(), table["target"].to_pylist())) \
        / len(table)
    result = model.train(str(csv), progress_bar=False)
    speeds = [r["rows_per_s"] for r in result.training_statistics]
    module_bytes = sum(t.numel() * t.element_size() for t in [*model.module.parameters(), *model.module.buffers()])
    resident = _resident_mib()
    prompts = pd.read_csv(predict_csv)
    started = time.perf_counter()
    model.predict(prompts)
    seconds = time.perf_counter() - started
    return {"model_mib": round(module_bytes / 2**20, 1),
            "anonymous_after_training_mib": resident["RssAnon"],
            "file_backed_after_training_mib": resident["RssFile"],
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "train_tokens_per_s": round(statistics.median(speeds[1:]) * tokens_per_row),
            "train_rows_per_s_per_epoch": [round(s, 1) for s in speeds],
            "generate_tokens_per_s": round(len(prompts) * args.new_tokens / seconds, 1),
            "validation_loss": round(result.training_statistics[-1]["validation"]["target"]["loss"], 4)}


def _resident_mib() -> dict[str, int]:
    """This process's resident memory now, after a collection and a malloc_trim: anonymous (what
    the process allocated) and file-backed (pages of mapped files: the weights file's, which
    safetensors maps, and which the kernel may drop and read again)."""
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    lines = Path("/proc/self/status").read_text().splitlines()
    return {key: int(line.split()[1]) // 1024 for line in lines for key in ("RssAnon", "RssFile")
            if line.startswith(key + ":")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run, the first not counted (default 3)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--predict-rows", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=OUT_DIR / "llm_quantization.json")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a variant's own process: WORKDIR:VARIANT
    args = parser.parse_args(argv)
    if args.one:
        work, name = args.one.rsplit(":", 1)
        work = Path(work)
        figures = variant_run(work / "model", work / "rows.csv", work / "prompts.csv", VARIANTS[name], args)
        print(json.dumps(figures))
        return 0
    if min(args.rows, args.epochs - 1, args.batch_size, args.layers, args.hidden, args.predict_rows,
           args.new_tokens) <= 0:
        parser.error("counts must be positive, with two epochs at least")
    work = Path(tempfile.mkdtemp(prefix="plait-llm-quant-"))
    results = {}
    try:
        llm_lora.rows(args.rows, args.vocab, 0).to_csv(work / "rows.csv", index=False)
        llm_lora.rows(args.predict_rows, args.vocab, 1)[["prompt"]].to_csv(work / "prompts.csv", index=False)
        llm_lora.write_model(work / "model", args.vocab, args.layers, args.hidden)
        passed = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--variants" and a not in VARIANTS]
        for name in args.variants:
            done = subprocess.run([sys.executable, __file__, *passed, "--one", f"{work}:{name}"], check=True,
                                  capture_output=True, text=True)
            results[name] = json.loads(done.stdout.strip().splitlines()[-1])
            shutil.rmtree(work / "cache", ignore_errors=True)
            print(f"{name:>7}: base model {results[name]['model_mib']} MiB, after training "
                  f"{results[name]['anonymous_after_training_mib']} MiB anonymous + "
                  f"{results[name]['file_backed_after_training_mib']} MiB file-backed, peak {results[name]['peak_rss_mib']} MiB, "
                  f"train {results[name]['train_tokens_per_s']:,} tokens/s, generate "
                  f"{results[name]['generate_tokens_per_s']} tokens/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "variants": results, "quantization": {k: VARIANTS[k] for k in results},
              "gpu": "not measured: no device lent to this session", "machine": preprocess.machine()}
    if "lora" in results:
        report["against_lora"] = {name: {key: round(r[key] / results["lora"][key], 2)
                                         for key in ("model_mib", "anonymous_after_training_mib", "peak_rss_mib",
                                                     "train_tokens_per_s",
                                                     "generate_tokens_per_s")}
                                  for name, r in results.items() if name != "lora"}
        print("against lora:", report["against_lora"])
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""LoRA and QLoRA on a Llama of random weights (about 1.1B parameters on the device), written
here with transformers: nothing is downloaded.

* write_model: the Llama (built on the GPU in bf16) and a word-level tokenizer, saved with
  save_pretrained; rows of made-up words (``benchmarks/llm_lora.py``'s task: the target is the
  prompt's last words reversed) with prompts long enough to keep the GPU busy.
* lora_plain: the loop the transformers and peft documentation write, on bf16 weights: peft
  LoRA (r 8, alpha 16, q_proj and v_proj, as llm_lora.py), AdamW, right-padded batches, labels
  -100 outside the target. Tokens/s counts real tokens (no padding); the first steps are warm-up.
* lora_plain_fp32: the same loop on float32 weights under bf16 autocast, which is how plait
  trains (it loads every base model in float32): the cost of that choice, measured apart.
* lora_plait: plait's ``model_type: llm`` with the same adapter, batch, learning rate and bf16
  autocast (``use_mixed_precision``); its rows/s after the first epoch times the rows' tokens.
* qlora_plain: the plain loop on the base model quantized to 4-bit NF4 by bitsandbytes (bf16
  compute, double quantization, no gradient checkpointing, so the speed compares with LoRA's):
  peak GPU memory and tokens/s.
* qlora_plait: the same through plait's ``quantization`` section (QLoRA, issue #39: the base
  loaded in 4 bits by bitsandbytes on the device, LoRA over it): peak GPU memory and tokens/s,
  against qlora_plain. (Before #39 plait refused quantization; a refusal is still recorded as
  the finding, should one come back.)

Model FLOPs utilisation counts the work a step must do, not what the kernels do: per token, 2N
FLOPs forward (a multiply-add per weight) and 2N backward for the inputs' gradients, where N is
the weights of every linear layer (the LM head included, the embedding lookup not); frozen weights need no
gradient of their own, so LoRA is 4N (the adapters' own gradients are < 0.1% and left out), a
full fine-tune 6N; attention adds 12 x layers x width x sequence length (4 forward, 8 backward,
the same with or without adapters: PaLM's count, the causal mask not halving it). Against the
bf16 matrix peak measured on the device (790 TFLOP/s on an H200, 798 on an H100).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from llm_lora import LORA, SPECIALS, padded, word_tokenizer  # benchmarks/llm_lora.py: the same plain loop's parts
from record import Recorder, StepContext
from steps.common import device_for, peak_memory_gib, reset_peak_memory, synchronize

PEAK_BF16_FLOPS = 790e12
SIZES = {
    "full": {"hidden": 2048, "layers": 16, "heads": 16, "kv_heads": 8, "ffn": 8192, "vocab": 32_000,
             "prompt_words": (200, 320), "rows": 320, "batch": 16, "steps": 24, "epochs": 2},
    "small": {"hidden": 128, "layers": 2, "heads": 4, "kv_heads": 4, "ffn": 512, "vocab": 2_000,
              "prompt_words": (16, 48), "rows": 48, "batch": 8, "steps": 4, "epochs": 2},
    "tiny": {"hidden": 64, "layers": 1, "heads": 4, "kv_heads": 4, "ffn": 128, "vocab": 500,
             "prompt_words": (8, 16), "rows": 16, "batch": 8, "steps": 2, "epochs": 2},
}
WARMUP_STEPS = 3
LEARNING_RATE = 1e-4
SEED = 0


def run(recorder: Recorder, context: StepContext) -> None:
    users = {"lora_plain", "lora_plain_fp32", "lora_plait", "qlora_plain", "qlora_plait"}  # of the folder
    context = recorder.context = context.needing("write_model", users)
    size = SIZES[context.size]
    folder = context.work / "llama"
    found = {"write_model": recorder.part("write_model", write_model, context, folder, size)}
    # float32 weights first: bf16 weights measured 2.3x slower twice, both times as the first loop
    # on a fresh GPU; in this order a warm-up cost would fall on the float32 loop instead.
    found["lora_plain_fp32"] = recorder.part("lora_plain_fp32", plain_loop, context, folder, size, "float32", None)
    found["lora_plain"] = recorder.part("lora_plain", plain_loop, context, folder, size, "bfloat16", None)
    found["lora_plait"] = recorder.part("lora_plait", plait_lora, context, folder, size, None)
    if context.cpu:
        recorder.skip("qlora_plain", "bitsandbytes' 4-bit NF4 training path is measured on the GPU only")
    else:
        found["qlora_plain"] = recorder.part("qlora_plain", plain_loop, context, folder, size, "bfloat16", "nf4")
    found["qlora_plait"] = recorder.part("qlora_plait", plait_lora, context, folder, size, {"bits": 4})
    notes = [f"{n} {r['tokens_per_s']:,.0f} tok/s" + ("" if context.cpu else f" MFU {r['mfu']:.1%}")
             for n, r in found.items() if r and "tokens_per_s" in r]
    if found.get("qlora_plait", {}) and found["qlora_plait"].get("refused_by_plait"):
        notes.append("qlora refused by plait")
    recorder.summary("; ".join(notes))


# ---- the model and the rows ---------------------------------------------------------------------------

def write_model(context: StepContext, folder: Path, size: dict) -> dict:
    """A Llama of random weights (bf16, built on the device) and a word-level tokenizer."""
    import torch

    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    device = device_for(context)
    tokenizer = word_tokenizer(size["vocab"])
    config = transformers.LlamaConfig(vocab_size=size["vocab"], hidden_size=size["hidden"], intermediate_size=size["ffn"],
                                      num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
                                      num_key_value_heads=size["kv_heads"], max_position_embeddings=1024,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(SEED)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    return {"parameters": sum(p.numel() for p in model.parameters()), "linear_parameters": linear_parameters(model),
            "layers": size["layers"], "hidden": size["hidden"], "vocab": size["vocab"]}


def words(size: dict) -> list[str]:
    return [f"w{i}" for i in range(size["vocab"] - len(SPECIALS))]


def linear_parameters(model) -> int:
    """N of the FLOPs count: the weights of every linear layer (the LM head included)."""
    import torch

    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def rows(size: dict, seed: int = SEED) -> list[tuple[str, str]]:
    rng, vocabulary = random.Random(seed), words(size)
    records = []
    for _ in range(size["rows"]):
        prompt = [rng.choice(vocabulary) for _ in range(rng.randint(*size["prompt_words"]))]
        records.append((" ".join(prompt), " ".join(reversed(prompt[-rng.randint(16, 32):]))))
    return records


def token_rows(folder: Path, size: dict) -> list[tuple[list[int], list[int]]]:
    """Each row's prompt ids (with <s>) and target ids (with </s>)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return [(tokenizer.encode(p).ids, tokenizer.encode(t, add_special_tokens=False).ids + [2]) for p, t in rows(size)]


def flops_per_token(linear: int, layers: int, hidden: int, mean_length: float, full_finetune: bool = False) -> float:
    return (6 if full_finetune else 4) * linear + 12 * layers * hidden * mean_length


# ---- the plain transformers + peft loop ----------------------------------------------------------------------

def plain_loop(context: StepContext, folder: Path, size: dict, dtype: str, quantized: str | None) -> dict:
    """LoRA as the transformers and peft documentation write it; timed after WARMUP_STEPS."""
    import torch

    device = device_for(context)
    reset_peak_memory(device)  # the earlier parts' models gone before this one loads
    model = load_for_lora(folder, device, dtype, quantized)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE)
    pairs = token_rows(folder, size)
    order = random.Random(SEED).sample(range(len(pairs)), len(pairs))
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "float32")
    reset_peak_memory(device)
    model.train()
    tokens, seconds, steps = 0, 0.0, 0
    while steps < WARMUP_STEPS + size["steps"] and context.seconds_left() > 20:
        first = (steps * size["batch"]) % len(pairs)
        batch = [pairs[order[(first + i) % len(pairs)]] for i in range(size["batch"])]
        ids, mask, labels = padded(batch, device)
        synchronize(device)
        started = time.perf_counter()
        with autocast:
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        if steps >= WARMUP_STEPS:
            tokens, seconds = tokens + int(mask.sum()), seconds + time.perf_counter() - started
        steps += 1
    if not seconds:
        raise TimeoutError("no timed step before the step's deadline")
    return figures(folder, size, tokens, seconds, steps - WARMUP_STEPS, pairs) | {
        "weights": quantized or dtype, "autocast": "bf16" if dtype == "float32" else None,
        "peak_gpu_memory_gib": peak_memory_gib(device), "final_loss": round(float(loss), 4)}


def load_for_lora(folder: Path, device, dtype: str, quantized: str | None):
    import peft
    import torch

    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    options: dict = {"dtype": getattr(torch, dtype)}
    if quantized:
        options["quantization_config"] = transformers.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type=quantized, bnb_4bit_compute_dtype=torch.bfloat16,
            bnb_4bit_use_double_quant=True)
        options["device_map"] = {"": device.index or 0}
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), **options)
    if quantized:
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    else:
        model = model.to(device)
    lora = peft.LoraConfig(r=LORA["r"], lora_alpha=LORA["alpha"], lora_dropout=LORA["dropout"],
                           target_modules=LORA["target_modules"], task_type="CAUSAL_LM")
    return peft.get_peft_model(model, lora)


def figures(folder: Path, size: dict, tokens: int, seconds: float, steps: int, pairs: list) -> dict:
    return rates(folder, size, tokens / seconds, pairs) | {"timed_steps": steps, "tokens_per_step": round(tokens / steps)}


def mean_tokens(pairs: list) -> float:
    return sum(len(p) + len(t) for p, t in pairs) / len(pairs)


def rates(folder: Path, size: dict, tokens_per_s: float, pairs: list) -> dict:
    """Tokens/s, the model FLOP/s they mean and the MFU, for any loop over the same rows."""
    # N from the model's config, not from the loaded model: a 4-bit weight is stored packed, two
    # to a byte, and its numel() is half the weights it multiplies by.
    linear = linear_parameters_of_folder(folder)
    achieved = tokens_per_s * flops_per_token(linear, size["layers"], size["hidden"], mean_tokens(pairs))
    return {"tokens_per_s": round(tokens_per_s), "model_tflops_per_s": round(achieved / 1e12, 2),
            "mfu": round(achieved / PEAK_BF16_FLOPS, 4)}


# ---- plait ------------------------------------------------------------------------------------------------------

def plait_lora(context: StepContext, folder: Path, size: dict, quantization: dict | None) -> dict:
    """plait's LoRA fine-tune on the same rows; with ``quantization``, QLoRA."""
    import pandas as pd

    from plait.api import Model
    from plait.errors import PlaitError

    device = device_for(context)
    csv = context.work / "rows.csv"
    pd.DataFrame(rows(size), columns=["prompt", "target"]).to_csv(csv, index=False)
    pairs = token_rows(folder, size)
    # No row cut (plait's default cap is 256 tokens): plait trains on the tokens the plain loop
    # does, and its tokens/s (rows/s times the rows' tokens) counts only tokens it trained on.
    longest_prompt = max(len(p) for p, _ in pairs)
    config = {"model_type": "llm", "base_model": str(folder), "adapter": LORA,
              "input_features": [{"name": "prompt", "type": "text",
                                  "preprocessing": {"max_sequence_length": longest_prompt}}],
              "output_features": [{"name": "target", "type": "text"}],
              "trainer": {"type": "finetune", "epochs": size["epochs"], "batch_size": size["batch"],
                          "learning_rate": LEARNING_RATE, "optimizer": {"type": "adamw"}, "skip_all_evaluation": True,
                          "use_mixed_precision": True},
              "preprocessing": {"split": {"type": "random", "probabilities": [1.0, 0.0, 0.0]}},
              "backend": {"type": "local", "cache_dir": str(context.work / "cache")}}
    if quantization:
        config["quantization"] = quantization
    reset_peak_memory(device)
    try:
        result = Model(config).train(str(csv), progress_bar=False)
    except PlaitError as error:
        if not quantization:
            raise
        return {"refused_by_plait": f"{type(error).__name__}: {error}"[:500]}
    speeds = [r["rows_per_s"] for r in result.training_statistics if "rows_per_s" in r]
    return rates(folder, size, speeds[-1] * mean_tokens(pairs), pairs) | {
        "rows_per_s_per_epoch": [round(s, 1) for s in speeds], "tokens_per_row": round(mean_tokens(pairs), 1),
        "peak_gpu_memory_gib": peak_memory_gib(device), "weights": "float32 (plait loads base models in float32)",
        "autocast": "bf16"}


def linear_parameters_of_folder(folder: Path) -> int:
    import torch

    from plait.models.hf_encoders import import_transformers

    config = import_transformers().AutoConfig.from_pretrained(str(folder))
    with torch.device("meta"):
        model = import_transformers().AutoModelForCausalLM.from_config(config)
    return linear_parameters(model)

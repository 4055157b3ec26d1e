"""Peak memory per worker of one model fully fine-tuned with each strategy on two Ray Train workers:
ddp, fsdp and DeepSpeed ZeRO stages 1, 2 and 3 (``model_type: llm``, CPU, gloo).

    .venv/bin/python benchmarks/llm_memory.py
    .venv/bin/python benchmarks/llm_memory.py --layers 12 --hidden 768 --vocab 16000 --strategies ddp zero3

The model is a Llama of random weights built here from a config (about 110M parameters by
default: 12 layers of width 768, a 16,000-word vocabulary, untied embeddings), saved with
save_pretrained; nothing is downloaded. Each run is ``Model(config).train`` on a local Ray of
4 logical CPUs with ``backend.trainer.num_workers: 2``, ``--steps`` optimizer steps of AdamW on
2-row batches of short texts (so activations are small beside the model's state).

Memory is the kernel's high-water mark of each worker process's resident set (VmHWM), read
every 50 ms from the driver while the run lasts. The workers run with a fixed glibc mmap
threshold (``MALLOC_MMAP_THRESHOLD_``; ``--glibc-default`` leaves glibc's own), so that a freed
tensor's memory goes back to the system and the peak measures what the strategy holds rather
than the allocator's history. A run of a tiny model of the same architecture
(1 layer of width 64) under ddp gives what a worker holds before any model (Python, torch,
transformers, DeepSpeed, Ray): "model state" is each peak above that. Beside it, the state the
strategy should hold per worker for this model: fp32 weights, gradients and AdamW's two moments,
16 bytes a parameter, divided by the workers where the strategy shards them (ZeRO-1: the
moments; ZeRO-2: and the gradients; ZeRO-3 and fsdp: all). Printed, and written as JSON
(default ``benchmarks/out/llm_memory.json``) with the command and the machine.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import llm_lora  # noqa: E402  (benchmarks/llm_lora.py: write_model)
import preprocess  # noqa: E402  (benchmarks/preprocess.py: write_report, machine)

OUT_DIR = HERE / "out"
STRATEGIES = {"ddp": {"type": "ddp"}, "fsdp": {"type": "fsdp"},
              "zero1": {"type": "deepspeed", "zero_optimization": {"stage": 1}},
              "zero2": {"type": "deepspeed", "zero_optimization": {"stage": 2}},
              "zero3": {"type": "deepspeed", "zero_optimization": {"stage": 3}}}
SHARDED = {"ddp": (), "fsdp": ("weights", "gradients", "moments"), "zero1": ("moments",),
           "zero2": ("gradients", "moments"), "zero3": ("weights", "gradients", "moments")}
BYTES = {"weights": 4, "gradients": 4, "moments": 8}
"""Bytes per parameter of each part of the state (fp32; AdamW keeps two moments)."""
WORKERS = 2


class PeakWatcher:
    """Polls the VmHWM of every Ray Train worker process while a run lasts."""

    def __init__(self):
        self.peaks: dict[int, int] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()

    def _watch(self) -> None:
        while not self.done.wait(0.05):
            for pid in _train_workers():
                peak = _high_water_mark(pid)
                if peak is not None:
                    self.peaks[pid] = max(peak, self.peaks.get(pid, 0))


def _train_workers() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"ray::RayTrainWorker" in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def _high_water_mark(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def texts(count: int, vocab: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab - len(llm_lora.SPECIALS))]
    return pd.DataFrame([{"prompt": " ".join(rng.choice(words) for _ in range(16)),
                          "target": " ".join(rng.choice(words) for _ in range(4))} for _ in range(count)])


def run(folder: Path, csv: Path, strategy: dict, steps: int, work: Path) -> list[int]:
    from plait.api import Model

    config = {"model_type": "llm", "base_model": str(folder),
              "input_features": [{"name": "prompt", "type": "text"}],
              "output_features": [{"name": "target", "type": "text"}],
              "trainer": {"type": "finetune", "train_steps": steps, "batch_size": 2, "learning_rate": 1e-5,
                          "optimizer": {"type": "adamw"}, "eval_batch_size": 2},
              "preprocessing": {"split": {"type": "random", "probabilities": [0.9, 0.05, 0.05]}},
              "backend": {"type": "ray", "cache_dir": str(work / "cache"),
                          "trainer": {"num_workers": WORKERS, "strategy": strategy}}}
    with PeakWatcher() as watcher:
        Model(config).train(str(csv), progress_bar=False)
    return sorted(watcher.peaks.values(), reverse=True)[:WORKERS]


def expected_state(parameters: int, name: str) -> int:
    return sum(BYTES[part] * parameters // (WORKERS if part in SHARDED[name] else 1) for part in BYTES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=16000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--strategies", nargs="+", choices=list(STRATEGIES), default=list(STRATEGIES))
    parser.add_argument("--out", type=Path, default=OUT_DIR / "llm_memory.json")
    parser.add_argument("--glibc-default", action="store_true",
                        help="leave glibc's dynamic mmap threshold on in the workers (see main)")
    args = parser.parse_args(argv)
    import ray
    import torch

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # glibc raises its mmap threshold each time a large block is freed, up to 32 MiB: from then on
    # freed tensors stay in the heap and a process's resident set keeps the high-water mark of
    # every layout it has been through, not what it holds. A fixed threshold (any value stops
    # the raising) hands large blocks back when freed, so the peak measures the strategy.
    env = {} if args.glibc_default else {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    work = Path(tempfile.mkdtemp(prefix="plait-llm-memory-"))
    try:
        csv = work / "rows.csv"
        texts(64, args.vocab, 0).to_csv(csv, index=False)
        llm_lora.write_model(work / "tiny", args.vocab, 1, 64)
        llm_lora.write_model(work / "model", args.vocab, args.layers, args.hidden)
        parameters = sum(t.numel() for t in _weights(work / "model").values())
        baseline = max(run(work / "tiny", csv, STRATEGIES["ddp"], args.steps, work))
        results = {}
        for name in args.strategies:
            peaks = run(work / "model", csv, STRATEGIES[name], args.steps, work)
            results[name] = {"peak_rss_mib": [round(p / 2**20) for p in peaks],
                             "model_state_mib": [round((p - baseline) / 2**20) for p in peaks],
                             "expected_state_mib": round(expected_state(parameters, name) / 2**20)}
            print(f"{name:>6}: peak {results[name]['peak_rss_mib']} MiB per worker, model state "
                  f"{results[name]['model_state_mib']} MiB (expected {results[name]['expected_state_mib']} MiB)")
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "worker_env": env,
              "parameters": parameters, "workers": WORKERS, "baseline_peak_rss_mib": round(baseline / 2**20),
              "strategies": results, "torch": torch.__version__,
              "gpu": "not measured: no device lent to this session", "machine": preprocess.machine()}
    if "ddp" in results:
        ddp = max(results["ddp"]["model_state_mib"])
        report["state_vs_ddp"] = {name: round(max(r["model_state_mib"]) / ddp, 2) for name, r in results.items()}
        print("model state against ddp:", report["state_vs_ddp"])
    preprocess.write_report(args.out, report)
    return 0


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


if __name__ == "__main__":
    sys.exit(main())

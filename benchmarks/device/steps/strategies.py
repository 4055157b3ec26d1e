"""Each distributed strategy with one worker on CUDA: ``train.py``'s table trained by a process
group of one, made as torchrun makes it (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``... set for a
process of its own, so that DeepSpeed's and FSDP's global state never outlives a strategy).

The process records the backend plait asked ``torch.distributed`` for (NCCL on the GPU, gloo in
the dry-run), the peak GPU memory, rows/s per epoch and the test accuracy. ZeRO-2 runs with
DeepSpeed's fp16 (its own loss scaler: plait's one fp16 path today), ZeRO-3 with bf16.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from record import Recorder, StepContext
from steps.common import free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SIZES = {"full": {"rows": 50_000, "epochs": 2}, "small": {"rows": 5_000, "epochs": 1}, "tiny": {"rows": 1_000, "epochs": 1}}
SEED = 42


def strategy_sections(cpu: bool) -> dict[str, dict]:
    """``backend.trainer.strategy`` of each part. fp16 is refused by DeepSpeed on the CPU."""
    return {"ddp": {"type": "ddp"}, "fsdp": {"type": "fsdp"},
            "zero2": {"type": "deepspeed", "zero_optimization": {"stage": 2}, **({} if cpu else {"fp16": {"enabled": True}})},
            "zero3": {"type": "deepspeed", "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}}


def run(recorder: Recorder, context: StepContext) -> None:
    size = SIZES[context.size]
    results = {}
    for name, section in strategy_sections(context.cpu).items():
        results[name] = recorder.part(name, launch, context, {"section": section, **size})
    done = [f"{n} {r['rows_per_s']:,.0f} rows/s ({r['process_group']})" for n, r in results.items() if r]
    recorder.summary("; ".join(done))


def launch(context: StepContext, spec: dict) -> dict:
    """One strategy in a process of its own, in a one-process group as torchrun would make it."""
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(ROOT / "benchmarks"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory(dir=context.work) as work:
        proc = subprocess.run([sys.executable, __file__, json.dumps({**spec, "work": work, "cpu": context.cpu})],
                              cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=max(10, context.seconds_left() - 5))
    print(proc.stdout[-10000:], proc.stderr[-10000:], sep="\n")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {spec['section']['type']} process exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def train_one(spec: dict) -> dict:
    """In the launched process: train, and record what the strategy asked torch for."""
    import logging

    import torch
    import torch.distributed as dist
    import train

    from plait import Model

    logging.getLogger("plait").setLevel(logging.WARNING)
    asked = []
    make_group = dist.init_process_group

    def recorded(backend=None, *args, **kwargs):
        asked.append(backend)
        return make_group(backend, *args, **kwargs)

    dist.init_process_group = recorded
    frame = train.make_data(spec["rows"], SEED)
    config = train.make_config(spec["epochs"], 256, str(Path(spec["work"]) / "cache"))
    config["trainer"].update(early_stop=-1)
    config["backend"] = {"type": "torchrun", "cache_dir": str(Path(spec["work"]) / "cache"),
                         "trainer": {"strategy": spec["section"]}}
    model = Model(config)
    result = model.train(dataset=frame, random_seed=SEED, progress_bar=False)
    figures = train.epoch_figures(result.training_statistics)
    accuracy = model.evaluate(frame, split="test", random_seed=SEED)[train.OUTPUT_COLUMN]["accuracy"]
    cuda = torch.cuda.is_available()
    expected = "gloo" if spec["cpu"] else "nccl"
    if asked != [expected]:
        raise AssertionError(f"the strategy asked torch.distributed for {asked}, expected [{expected!r}]")
    return {"process_group": asked[0], "device": "cuda" if cuda else "cpu", "rows_per_s": round(figures["rows_per_s"]),
            "rows_per_s_per_epoch": [round(r) for r in figures["rows_per_s_per_epoch"]], "test_accuracy": accuracy,
            "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3) if cuda else None,
            "section": spec["section"]}


if __name__ == "__main__":
    print(json.dumps(train_one(json.loads(sys.argv[1]))))
